//! The bridge decision on arbitrary frames, ports, times and per-port settings, against one
//! shared small FDB.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::l2::{decide, Fdb, Policies, PortPolicy};
use xfwd_dataplane::time::Seconds;
use xfwd_dataplane::{Action, PortId};

static FDB: OnceLock<Fdb> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let fdb = FDB.get_or_init(|| Fdb::new(64, 30));
    let Some((&ctl, rest)) = data.split_first() else { return };
    let Some((&bits, frame)) = rest.split_first() else { return };
    let ingress = PortId(ctl % 4);
    let now = Seconds(u32::from(ctl >> 2) * 7 + 1);
    // Four ports; one of them (bits 0-1) gets the settings of bits 2-7 (bit 7: a storm limit
    // of one flood a second).
    let mut ports = [PortPolicy::default(); 4];
    let b = |i: u8| bits & (1 << i) == 0;
    ports[usize::from(bits & 3)] = PortPolicy {
        learning: b(2),
        flood: b(3),
        mcast_flood: b(4),
        bcast_flood: b(5),
        isolated: !b(6),
        storm_limit: (!b(7)).then_some(1),
    };
    let pol = Policies::new(&ports);
    let v = decide(frame, ingress, fdb, now, &pol);
    match v.action {
        Action::Forward(p) => {
            assert_ne!(p, ingress, "never back out of the ingress port");
            assert!(pol.reaches(ingress, p), "never between two isolated ports");
        }
        Action::Flood(set) => {
            assert!(!set.is_empty() && !set.contains(ingress.index()), "a flood goes somewhere, not back");
            assert!(set.iter().all(|p| pol.reaches(ingress, PortId(p as u8))));
        }
        _ => {}
    }
    assert!(fdb.len(now) <= fdb.capacity());
});
