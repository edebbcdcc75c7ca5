//! The ARP state machine on arbitrary frames, gleans and timer ticks.
#![no_main]

use std::net::Ipv4Addr;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::resolve::arp::{ArpConfig, ArpCounters, ArpEngine, Glean};
use xfwd_dataplane::l3::testing::reference_ports;
use xfwd_dataplane::l3::{NeighborTable, NeighborTable6, RouterTables};
use xfwd_dataplane::PortId;

/// Built once: a table is 32 MiB, which would dominate every run.
fn tables() -> Arc<ArcSwap<RouterTables>> {
    static T: OnceLock<Arc<ArcSwap<RouterTables>>> = OnceLock::new();
    Arc::clone(T.get_or_init(|| {
        let ports = reference_ports();
        Arc::new(ArcSwap::from_pointee(RouterTables::build(ports, &[]).unwrap()))
    }))
}

fuzz_target!(|data: &[u8]| {
    let tables = tables();
    let neighbors = Arc::new(NeighborTable::new(16));
    let cfg = ArpConfig { glean_queue: 2, max_pending: 4, icmp_rate: 0, icmp_burst: 4 };
    let peer = Arc::new(NeighborTable6::new6(8));
    let mut e = ArpEngine::new(tables, (Arc::clone(&neighbors), peer), cfg, Arc::new(ArpCounters::default()));
    let mut now = 0u64;
    // Records: [kind, len, bytes…].
    let mut rest = data;
    while let [kind, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (chunk, next) = tail.split_at(n);
        rest = next;
        let port = PortId(kind & 1);
        match kind >> 1 & 3 {
            0 => e.on_arp(port, chunk, now),
            1 => {
                let hop = Ipv4Addr::new(198, 18, 30, chunk.first().copied().unwrap_or(9));
                e.on_glean(Glean { ingress: PortId(0), port, next_hop: hop.into(), frame: chunk }, now);
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
