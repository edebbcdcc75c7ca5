//! rtnetlink messages, as the kernel-mirror thread reads them, on arbitrary bytes: each
//! message parsed, its event applied to a mirror of two ports, and the tables that follow it by
//! prefix updated and published, checked against a whole build at the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::io::rtnl::{parse, Message};
use xfwd_dataplane::l3::fib::no_advice;
use xfwd_dataplane::l3::incremental::Incremental;
use xfwd_dataplane::l3::mirror::{Mirror, TABLE_MAIN};
use xfwd_dataplane::l3::{PortSpec, RouterTables};
use xfwd_dataplane::wire::MacAddr;

fn port(name: &str, mac: u8) -> PortSpec {
    PortSpec {
        name: name.into(),
        mac: MacAddr([2, 0, 0, 0, 0, mac]),
        mtu: 1500,
        addrs: Vec::new(),
        addrs6: Vec::new(),
        link_local: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut m = Mirror::new(TABLE_MAIN, vec![(4, port("eth4", 4)), (5, port("eth5", 5))]);
    let mut inc = Incremental::full(m.ports(), m.routes4_iter(), &m.routes6(), (0, 1), no_advice).unwrap();
    m.take_dirty();
    // Messages one after another, each at most 512 bytes (its length in the first two bytes).
    let mut at = 0;
    while at + 2 <= data.len() {
        let len = usize::from(u16::from_le_bytes([data[at], data[at + 1]]) % 512);
        let end = (at + 2 + len).min(data.len());
        if let Some(Message::Event(e)) = parse(&data[at + 2..end]) {
            m.apply(e);
        }
        at = end;
        let d = m.take_dirty();
        if d.all {
            match Incremental::full(m.ports(), m.routes4_iter(), &m.routes6(), (0, 1), no_advice) {
                Ok(i) => inc = i,
                Err(_) => return,
            }
            continue;
        }
        for p in &d.v4 {
            if inc.set4(*p, m.effective4(*p).as_ref()).is_err() {
                return;
            }
        }
        if d.v6 && inc.set6(&m.routes6(), no_advice).is_err() {
            return;
        }
        if inc.publish(true).is_err() {
            return;
        }
    }
    // What was followed change by change is what a whole build gives.
    let Ok(full) = RouterTables::build_mirrored(m.ports(), &m.routes4(), &m.routes6(), no_advice) else { return };
    let live = inc.live();
    for (p, _, _) in full.routes.iter() {
        for a in [p.addr(), p.broadcast()] {
            assert_eq!(live.route(a), full.route(a), "{a}");
        }
    }
});
