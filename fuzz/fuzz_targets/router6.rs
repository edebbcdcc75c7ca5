//! The IPv6 router decision on arbitrary frames (the destination MAC set to the port's and the
//! EtherType and version to IPv6's, most of the time, so the fuzzer gets past the first
//! checks), with real tables: connected prefixes, a global and a link-local gateway.
#![no_main]

use std::net::Ipv6Addr;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::action::SCRATCH_LEN;
use xfwd_dataplane::l3::fib::no_advice;
use xfwd_dataplane::l3::tables::RouteTarget6;
use xfwd_dataplane::l3::{decide, testing, Key6, NeighborTable, NeighborTable6, PortSpec, RouterState, RouterTables, V6};
use xfwd_dataplane::wire::MacAddr;
use xfwd_dataplane::{Action, PortId};

const MACS: [MacAddr; 2] = [MacAddr([2, 0, 0, 0, 5, 5]), MacAddr([2, 0, 0, 0, 4, 4])];

fn world() -> &'static (RouterTables, NeighborTable, NeighborTable6) {
    static W: OnceLock<(RouterTables, NeighborTable, NeighborTable6)> = OnceLock::new();
    W.get_or_init(|| {
        let ip = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let port = |name: &str, mac, mtu, a: &str, ll: &str| PortSpec {
            mtu,
            link_local: Some(ip(ll)),
            ..testing::port(name, mac, &[a])
        };
        let ports = vec![
            port("eth5", MACS[0], 1500, "2001:2:0:10::2/64", "fe80::5"),
            port("eth4", MACS[1], 1400, "2001:2:0:30::1/64", "fe80::4"),
        ];
        let routes = [
            ("2001:2:100::/48".parse().unwrap(), RouteTarget6::Via { gw: ip("2001:2:0:30::2"), dev: None }),
            ("2001:2:200::/48".parse().unwrap(), RouteTarget6::Via { gw: ip("fe80::99"), dev: Some(PortId(1)) }),
            ("2001:3::/32".parse().unwrap(), RouteTarget6::Dev(PortId(0))),
        ];
        let t = RouterTables::build_dual(ports, &[], &routes, no_advice).unwrap();
        let n = NeighborTable6::new6(64);
        n.insert(Key6::global(ip("2001:2:0:30::2")), MacAddr([2, 0, 0, 0, 0, 2]), PortId(1), true).unwrap();
        n.insert(Key6::global(ip("2001:2:0:10::1")), MacAddr([2, 0, 0, 0, 0, 1]), PortId(0), true).unwrap();
        // IPv4's table, which no IPv6 decision reads.
        (t, NeighborTable::new(8), n)
    })
}

fuzz_target!(|data: &[u8]| {
    let (t, n4, n) = world();
    let Some((&ctl, rest)) = data.split_first() else { return };
    let ingress = PortId(ctl & 1);
    let mut frame = rest.to_vec();
    if ctl & 2 == 0 && frame.len() >= 15 {
        frame[..6].copy_from_slice(&MACS[usize::from(ingress.0)].0);
        frame[12..14].copy_from_slice(&[0x86, 0xdd]);
        frame[14] = 0x60 | (frame[14] & 0x0f);
    }
    let mut st = RouterState::new(u32::from(ctl >> 4), 3);
    if ctl & 8 == 0 {
        st.fit(t);
    }
    let mut scratch = [0u8; SCRATCH_LEN];
    let len = frame.len();
    match decide::<V6>(&mut frame, ingress, t, n4, n, &mut st, u64::from(ctl) * 100, &mut scratch) {
        Action::Reply { len: l, .. } => assert!(usize::from(l) <= SCRATCH_LEN && usize::from(l) <= 14 + 1280),
        Action::ForwardTrimmed { len: l, .. } => assert!(usize::from(l) <= len),
        Action::Forward(p) | Action::Glean { port: p, .. } => assert!(p.index() < 2),
        Action::Flood(_) => panic!("a router never floods"),
        Action::Drop(_) => {}
    }
    assert_eq!(frame.len(), len, "decisions never resize the frame in place");
});
