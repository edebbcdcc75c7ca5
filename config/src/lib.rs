//! xfwd's configuration: the router's TOML file ([`router`]), the bridge's ([`bridge`]) and the duration and core-list
//! values the command line accepts, parsed with errors that say what is expected. (The poll,
//! XDP and zero-copy modes are the data plane's own, `xfwd_dataplane::io::setup::options`.)

// Production code: no function over 100 lines of code (clippy.toml); tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod bridge;
pub mod router;

pub use bridge::BridgeConfig;
pub use router::{ConfigError, RouterConfig};

pub use xfwd_dataplane::io::setup::settings::{parse_cores, parse_duration, ValueError};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("300").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        // As tc writes them (`codel target 500us interval 100ms`).
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("500µs").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("500usec").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("100msec").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("2sec").unwrap(), Duration::from_secs(2));
        for bad in ["", "s", "1x", "-1s", "1..2s", "ms500", "1u", "1ns"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("1x").unwrap_err().to_string().contains("500ms"));
    }

    #[test]
    fn core_lists() {
        assert_eq!(parse_cores("0").unwrap(), vec![0]);
        assert_eq!(parse_cores("1,0").unwrap(), vec![1, 0]);
        assert_eq!(parse_cores("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cores("1, 4-5").unwrap(), vec![1, 4, 5]);
        for bad in ["", "a", "3-1", "1,,2", "-1"] {
            assert!(parse_cores(bad).is_err(), "{bad}");
        }
    }
}
