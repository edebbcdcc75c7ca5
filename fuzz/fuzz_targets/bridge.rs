//! The bridge decision on arbitrary frames, ports and times, against one shared small FDB.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::l2::{decide, Fdb};
use xfwd_dataplane::time::Seconds;
use xfwd_dataplane::{Action, PortId};

static FDB: OnceLock<Fdb> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let fdb = FDB.get_or_init(|| Fdb::new(64, 30));
    let Some((&ctl, frame)) = data.split_first() else { return };
    let ingress = PortId(ctl % 4);
    let now = Seconds(u32::from(ctl >> 2) * 7 + 1);
    let v = decide(frame, ingress, fdb, now);
    if let Action::Forward(p) = v.action {
        assert_ne!(p, ingress, "never back out of the ingress port");
    }
    assert!(fdb.len(now) <= fdb.capacity());
});
