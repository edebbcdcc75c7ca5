//! The router decision on arbitrary frames (the destination MAC set to the port's, most of the
//! time, so the fuzzer gets past the first check), with real tables.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::action::SCRATCH_LEN;
use xfwd_dataplane::l3::tables::scope6;
use xfwd_dataplane::l3::testing::port;
use xfwd_dataplane::l3::{decide, NeighborTable, NeighborTable6, PortSpec, RouteTarget, RouterState, RouterTables, V4};
use xfwd_dataplane::wire::MacAddr;
use xfwd_dataplane::{Action, PortId};

const MACS: [MacAddr; 2] = [MacAddr([2, 0, 0, 0, 5, 5]), MacAddr([2, 0, 0, 0, 4, 4])];

fn world() -> &'static (RouterTables, NeighborTable, NeighborTable6) {
    static W: OnceLock<(RouterTables, NeighborTable, NeighborTable6)> = OnceLock::new();
    W.get_or_init(|| {
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let ll = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let ports = vec![
            port("eth5", MACS[0], &["198.18.10.2/24", "198.18.11.2/24"]),
            PortSpec { mtu: 1400, ..port("eth4", MACS[1], &["198.18.30.1/24"]) },
        ];
        let routes = [
            ("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2"))),
            ("10.0.0.0/8".parse().unwrap(), RouteTarget::Dev(PortId(0))),
            // Through IPv6 gateways (RFC 5549): one resolved, one not.
            ("172.16.0.0/16".parse().unwrap(), RouteTarget::Via { gw: IpAddr::V6(ll("fe80::2")), dev: Some(PortId(1)) }),
            ("172.17.0.0/16".parse().unwrap(), RouteTarget::Via { gw: IpAddr::V6(ll("fe80::3")), dev: Some(PortId(1)) }),
        ];
        let t = RouterTables::build(ports, &routes).unwrap();
        let n = NeighborTable::new(64);
        n.insert(ip("198.18.30.2"), MacAddr([2, 0, 0, 0, 0, 2]), PortId(1), true).unwrap();
        n.insert(ip("198.18.10.1"), MacAddr([2, 0, 0, 0, 0, 1]), PortId(0), true).unwrap();
        let n6 = NeighborTable6::new6(8);
        n6.insert(scope6(ll("fe80::2"), PortId(1)), MacAddr([2, 0, 0, 0, 0, 2]), PortId(1), true).unwrap();
        (t, n, n6)
    })
}

fuzz_target!(|data: &[u8]| {
    let (t, n, n6) = world();
    let Some((&ctl, rest)) = data.split_first() else { return };
    let ingress = PortId(ctl & 1);
    let mut frame = rest.to_vec();
    if ctl & 2 == 0 && frame.len() >= 6 {
        frame[..6].copy_from_slice(&MACS[usize::from(ingress.0)].0);
    }
    // A header checksum made right, so that what follows it (options above all) is reached.
    if ctl & 4 == 0 && frame.len() >= 14 + 20 {
        let ihl = usize::from(frame[14] & 0x0f) * 4;
        if (20..=60).contains(&ihl) && frame.len() >= 14 + ihl {
            frame[24..26].copy_from_slice(&[0, 0]);
            let sum = xfwd_dataplane::wire::checksum::checksum(&frame[14..14 + ihl]);
            frame[24..26].copy_from_slice(&sum.to_be_bytes());
        }
    }
    let mut st = RouterState::new(u32::from(ctl >> 4), 3);
    // With the gateway cache fitted to the tables (as a worker has it), or not yet (a reload
    // the worker has not taken in).
    if ctl & 8 == 0 {
        st.fit(t);
    }
    let mut scratch = [0u8; SCRATCH_LEN];
    let len = frame.len();
    match decide::<V4>(&mut frame, ingress, t, n, n6, &mut st, u64::from(ctl) * 100, &mut scratch) {
        Action::Reply { len: l, .. } => assert!(usize::from(l) <= SCRATCH_LEN),
        Action::ForwardTrimmed { len: l, .. } => assert!(usize::from(l) <= len),
        Action::Forward(p) | Action::Glean { port: p, .. } => assert!(p.index() < 2),
        Action::Flood(_) => panic!("a router never floods"),
        Action::Drop(_) => {}
    }
    assert_eq!(frame.len(), len, "decisions never resize the frame in place");
});
