//! rtnetlink messages, as the kernel-mirror thread reads them, on arbitrary bytes: each
//! message parsed and its event applied to a mirror of two ports, whose routes are then read
//! as the thread reads them (whole, and prefix by prefix for what changed), and must agree.
//! (The tables built from them are left to the unit tests: a 32 MiB FIB per input would
//! slow this to a few runs a second.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::routes::rtnl::{parse, Message};
use xfwd_dataplane::routes::mirror::{ListCursor, Mirror, TABLE_MAIN};
use xfwd_dataplane::l3::{testing, PortSpec};
use xfwd_dataplane::wire::MacAddr;

fn port(name: &str, mac: u8) -> PortSpec {
    testing::port(name, MacAddr([2, 0, 0, 0, 0, mac]), &[])
}

fuzz_target!(|data: &[u8]| {
    let mut m = Mirror::new(TABLE_MAIN, vec![(4, port("eth4", 4)), (5, port("eth5", 5))]);
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
        let whole = m.routes4();
        for p in &d.v4 {
            // The route a changed prefix gets is the one the whole list has for it (the
            // local table's where both tables have one).
            let eff = m.effective4(*p);
            let listed: Vec<_> = whole.iter().filter(|r| r.prefix == *p).collect();
            let want = listed.iter().find(|r| r.local_table).or(listed.first()).map(|r| (*r).clone());
            assert_eq!(eff, want, "{p}");
        }
        let _ = m.routes6();
        let _ = m.local_addresses();
        // `show routes` lists every route held, each once.
        let mut listed = Vec::new();
        assert!(m.list_step(&mut ListCursor::default(), usize::MAX, &mut listed));
        assert_eq!(listed.len(), m.len());
    }
});
