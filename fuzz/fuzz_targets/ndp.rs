//! The neighbour discovery engine on arbitrary frames, gleans and timer ticks (the frames made
//! IPv6 carrying ICMPv6 with hop limit 255, most of the time, to get past the first checks;
//! checksums are not checked when fuzzing).
#![no_main]

use std::net::Ipv6Addr;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::resolve::arp::{ArpConfig, ArpCounters, Glean};
use xfwd_dataplane::l3::fib::no_advice;
use xfwd_dataplane::resolve::ndp::NdpEngine;
use xfwd_dataplane::l3::tables::RouteTarget6;
use xfwd_dataplane::l3::{testing, NeighborTable, NeighborTable6, PortSpec, RouterTables};
use xfwd_dataplane::wire::MacAddr;
use xfwd_dataplane::PortId;

const MACS: [MacAddr; 2] = [MacAddr([2, 0, 0, 0, 5, 5]), MacAddr([2, 0, 0, 0, 4, 4])];

fn tables() -> Arc<ArcSwap<RouterTables>> {
    static T: OnceLock<Arc<ArcSwap<RouterTables>>> = OnceLock::new();
    Arc::clone(T.get_or_init(|| {
        let ip = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let port = |name: &str, mac, a: &str, ll: &str, v4: &str| PortSpec {
            link_local: Some(ip(ll)),
            ..testing::port(name, mac, &[v4, a])
        };
        let ports = vec![
            port("eth5", MACS[0], "2001:2:0:10::2/64", "fe80::5", "198.18.10.2/24"),
            port("eth4", MACS[1], "2001:2:0:30::1/64", "fe80::4", "198.18.30.1/24"),
        ];
        let routes =
            [("2001:2:200::/48".parse().unwrap(), RouteTarget6::Via { gw: ip("fe80::99"), dev: Some(PortId(1)) })];
        Arc::new(ArcSwap::from_pointee(RouterTables::build_dual(ports, &[], &routes, no_advice).unwrap()))
    }))
}

fuzz_target!(|data: &[u8]| {
    let neighbors = Arc::new(NeighborTable6::new6(16));
    let cfg = ArpConfig { glean_queue: 2, max_pending: 4, icmp_rate: 0, icmp_burst: 4 };
    let peer = Arc::new(NeighborTable::new(8));
    let mut e = NdpEngine::new(tables(), (Arc::clone(&neighbors), peer), cfg, Arc::new(ArpCounters::default()));
    let mut now = 0u64;
    // Records: [kind, len, bytes…].
    let mut rest = data;
    while let [kind, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (chunk, next) = tail.split_at(n);
        rest = next;
        let port = PortId(kind & 1);
        match kind >> 1 & 3 {
            0 => {
                let mut f = chunk.to_vec();
                if kind & 0x80 == 0 && f.len() >= 14 + 40 {
                    f[12..14].copy_from_slice(&[0x86, 0xdd]);
                    f[14] = 0x60;
                    f[14 + 6] = 58;
                    f[14 + 7] = 255;
                }
                e.on_ndp(port, &f, now)
            }
            1 => {
                let last = chunk.first().copied().unwrap_or(9);
                let hop = if kind & 0x40 == 0 {
                    Ipv6Addr::new(0x2001, 2, 0, 0x30, 0, 0, 0, u16::from(last))
                } else {
                    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, u16::from(last))
                };
                // Half of them IPv4 frames (an IPv4 route through an IPv6 gateway, RFC 5549).
                let mut f = chunk.to_vec();
                if kind & 0x80 != 0 && f.len() >= 14 + 20 {
                    f[12..14].copy_from_slice(&[0x08, 0x00]);
                    f[14] = 0x45;
                }
                e.on_glean(Glean { ingress: PortId(0), port, next_hop: hop.into(), frame: &f }, now);
            }
            2 => now += u64::from(*len) * 500,
            _ if kind & 0x20 == 0 => e.timers(now),
            _ => e.announce(port),
        }
        for (p, f) in e.take_output() {
            assert!(p.index() < 2 && !f.is_empty());
        }
        assert!(neighbors.len() <= neighbors.capacity());
    }
});
