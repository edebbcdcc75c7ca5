//! The router's configuration parser on arbitrary text: an error or a valid configuration,
//! never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use xfwd_config::RouterConfig;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // A routes file, if the text names one, is the same text: its lines meet that parser too.
        if let Err(e) = RouterConfig::parse(Path::new("fuzz.toml"), text, |_| Ok(text.to_owned())) {
            let _ = e.to_string();
        }
    }
});
