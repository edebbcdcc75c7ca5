//! Instructions per frame in the decision path, for `valgrind --tool=callgrind` (instruction
//! counts are stable on a noisy machine where times are not).
//!
//! ```sh
//! cargo build --release --example decision_cost
//! valgrind --tool=callgrind --toggle-collect='decision_cost::router_batch' \
//!     target/release/examples/decision_cost router 64000     # or: bridge_batch … bridge,
//!                                                             # router6_batch … router6
//! # as the worker runs them, prefetch stage included (toggle router_pipeline / bridge_pipeline):
//! #   target/release/examples/decision_cost router 64000 pipeline
//! ```
//!
//! It builds tables like the criterion benches' (a 4,096-MAC FDB; a router with a
//! 100,000-prefix table and resolved next hops), then decides `N` frames in batches of 64. Only
//! the batch functions are counted: callgrind's total divided by N is the instructions per frame.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use xfwd_dataplane::action::SCRATCH_LEN;
use xfwd_dataplane::io::frames::worker::{BridgeDecide, Decide, RouterDecide};
use xfwd_dataplane::io::setup::memory::advise_huge_pages;
use xfwd_dataplane::l2::{self, Fdb};
use xfwd_dataplane::l3::testing::{port, reference_ports};
use xfwd_dataplane::l3::{
    self, NeighborTable, NeighborTable6, Prefix, Prefix6, RouteTarget, RouteTarget4, RouteTarget6, RouterState,
    RouterTables,
};
use xfwd_dataplane::time::Seconds;
use xfwd_dataplane::wire::ethernet::ETHERTYPE_IPV4;

/// A plain two-port bridge's settings (made once, outside the measured batches).
static POLICIES: std::sync::LazyLock<l2::Policies> = std::sync::LazyLock::new(|| l2::Policies::uniform(2));
use xfwd_dataplane::wire::{EthernetFrame, MacAddr};
use xfwd_dataplane::PortId;

fn mac(i: u32) -> MacAddr {
    let b = i.to_be_bytes();
    MacAddr([0x02, 0x00, b[0], b[1], b[2], b[3]])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "router".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    // A third argument `pipeline` runs the batches as the worker does, with its prefetch stage.
    let prefetch = args.next().as_deref() == Some("pipeline");
    match what.as_str() {
        "bridge" => bridge(n, prefetch),
        "router6" => router6(n),
        _ => router(n, prefetch),
    }
}

/// `N` frames through the bridge decision, in batches of 64 over a 4,096-MAC FDB.
fn bridge(n: usize, prefetch: bool) {
    let fdb = Fdb::new(8192, 300);
    for i in 0..4096 {
        fdb.learn(mac(i), PortId((i % 2) as u8), Seconds(1));
    }
    let frames: Vec<([u8; 64], PortId)> = (0..4096u32)
        .map(|i| {
            let mut f = [0u8; 64];
            let mut eth = EthernetFrame::new_checked(&mut f[..]).expect("64 bytes hold a header");
            eth.set_dst(mac(((i * 7 + 1) % 4096) | 1));
            eth.set_src(mac(i & !1));
            eth.set_ethertype(ETHERTYPE_IPV4);
            (f, PortId(0))
        })
        .collect();
    let mut done = 0;
    while done < n {
        let at = done % frames.len();
        let batch = &frames[at..(at + 64).min(frames.len())];
        if prefetch {
            bridge_pipeline(batch, &fdb);
        } else {
            bridge_batch(batch, &fdb);
        }
        done += 64;
    }
    println!("bridge: {done} frames");
}

/// `N` frames through the IPv6 router decision: 100,000 /48s through 16 resolved gateways.
fn router6(n: usize) {
    let ip6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let eth5 = MacAddr([2, 0, 0, 0, 5, 5]);
    let ports = vec![
        port("eth5", eth5, &["2001:2:0:10::2/64"]),
        port("eth4", MacAddr([2, 0, 0, 0, 4, 4]), &["2001:2:0:30::1/64"]),
    ];
    let gws: Vec<Ipv6Addr> = (0..16).map(|i| Ipv6Addr::new(0x2001, 2, 0, 0x30, 0, 0, 0, 0x10 + i)).collect();
    // 100,000 /48s under 2001:db8::/32's neighbour 2400::/12, as the IPv4 case's /24s.
    let statics: Vec<(Prefix6, RouteTarget6)> = (0..100_000u32)
        .map(|i| {
            let a = Ipv6Addr::from((0x2400u128 << 112) | (u128::from(i) << 80));
            (Prefix6::truncate(a, 48), RouteTarget::via(gws[(i % 16) as usize]))
        })
        .collect();
    let t = RouterTables::build_dual(ports, &[], &statics, advise_huge_pages).unwrap();
    let neighbors = NeighborTable6::new6(64);
    // IPv4's table, which no IPv6 decision reads.
    let neighbors4 = NeighborTable::new(8);
    for (i, g) in gws.iter().enumerate() {
        neighbors
            .insert(xfwd_dataplane::l3::Key6::global(*g), MacAddr([2, 0, 0, 0, 9, i as u8]), PortId(1), true)
            .unwrap();
    }
    let mut st = RouterState::new(0, 1);
    st.fit(&t);
    let mut scratch = [0u8; SCRATCH_LEN];
    let template: Vec<Vec<u8>> = (0..4096u32)
        .map(|i| {
            let dst = Ipv6Addr::from((0x2400u128 << 112) | (u128::from((i * 24 + 7) % 100_000) << 80) | 9);
            let mut v = Vec::new();
            etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], eth5.0)
                .ipv6(ip6("2001:2:0:10::1").octets(), dst.octets(), 64)
                .udp(1024, 9)
                .write(&mut v, &[0u8; 18])
                .unwrap();
            v
        })
        .collect();
    let done =
        batches(n, &template, |batch| router6_batch(batch, &t, (&neighbors4, &neighbors), &mut st, &mut scratch));
    println!("router6: {done} frames");
}

/// `N` frames through the IPv4 router decision: 100,000 /24s through 16 resolved gateways.
fn router(n: usize, prefetch: bool) {
    let eth5 = MacAddr([2, 0, 0, 0, 5, 5]);
    let ports = reference_ports();
    let gws: Vec<Ipv4Addr> = (0..16).map(|i| Ipv4Addr::new(198, 18, 30, 10 + i)).collect();
    let statics: Vec<(Prefix, RouteTarget4)> = (0..100_000u32)
        .map(|i| {
            (Prefix::truncate(Ipv4Addr::from(0x0b00_0000 + (i << 8)), 24), RouteTarget::via(gws[(i % 16) as usize]))
        })
        .collect();
    let t = RouterTables::build_advised(ports, &statics, advise_huge_pages).unwrap();
    let neighbors = NeighborTable::new(64);
    let neighbors6 = NeighborTable6::new6(8);
    for (i, g) in gws.iter().enumerate() {
        neighbors.insert(*g, MacAddr([2, 0, 0, 0, 9, i as u8]), PortId(1), true).unwrap();
    }
    let mut st = RouterState::new(0, 1);
    st.fit(&t);
    let mut scratch = [0u8; SCRATCH_LEN];
    let template: Vec<Vec<u8>> = (0..4096u32)
        .map(|i| {
            let mut v = Vec::new();
            etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], eth5.0)
                .ipv4([198, 18, 10, 1], Ipv4Addr::from(0x0b00_0000 + ((i * 24 + 7) << 8) + 9).octets(), 64)
                .udp(1024, 9)
                .write(&mut v, &[0u8; 18])
                .unwrap();
            v
        })
        .collect();
    let done = batches(n, &template, |batch| {
        if prefetch {
            router_pipeline(batch, &t, (&neighbors, &neighbors6), &mut st, &mut scratch);
        } else {
            router_batch(batch, &t, (&neighbors, &neighbors6), &mut st, &mut scratch);
        }
    });
    println!("router: {done} frames");
}

/// Runs `n` frames of `template` through `decide`, 64 at a time, each a fresh copy (the
/// decisions rewrite TTL, checksum and MACs in place); the frames run.
fn batches(n: usize, template: &[Vec<u8>], mut decide: impl FnMut(&mut [Vec<u8>])) -> usize {
    let mut batch: Vec<Vec<u8>> = template[..64].to_vec();
    let mut done = 0;
    while done < n {
        for (k, f) in batch.iter_mut().enumerate() {
            f.copy_from_slice(&template[(done + k) % template.len()]);
        }
        decide(&mut batch);
        done += 64;
    }
    done
}

/// One batch of the IPv6 router decision (`--toggle-collect='decision_cost::router6_batch'`).
#[inline(never)]
fn router6_batch(
    batch: &mut [Vec<u8>],
    t: &RouterTables,
    (n4, n6): (&NeighborTable, &NeighborTable6),
    st: &mut RouterState,
    scratch: &mut [u8; SCRATCH_LEN],
) {
    for f in batch.iter_mut() {
        black_box(l3::decide::<l3::V6>(f, PortId(0), t, n4, n6, st, 1000, scratch));
    }
}

/// One batch of the bridge decision (a separate function so callgrind can count it alone:
/// `--toggle-collect='decision_cost::bridge_batch'`).
#[inline(never)]
fn bridge_batch(frames: &[([u8; 64], PortId)], fdb: &Fdb) {
    for (f, p) in frames {
        black_box(l2::decide(&f[..], *p, fdb, Seconds(2), &POLICIES));
    }
}

/// The same batch as the worker runs it, each frame's FDB lines prefetched a few frames ahead
/// (`--toggle-collect='decision_cost::bridge_pipeline'`).
#[inline(never)]
fn bridge_pipeline(frames: &[([u8; 64], PortId)], fdb: &Fdb) {
    let d = BridgeDecide::PREFETCH_DISTANCE;
    for (f, _) in frames.iter().take(d) {
        l2::prefetch(&f[..], fdb);
    }
    for (k, (f, p)) in frames.iter().enumerate() {
        if let Some((ahead, _)) = frames.get(k + d) {
            l2::prefetch(&ahead[..], fdb);
        }
        black_box(l2::decide(&f[..], *p, fdb, Seconds(2), &POLICIES));
    }
}

/// One batch of the router decision (`--toggle-collect='decision_cost::router_batch'`).
#[inline(never)]
fn router_batch(
    batch: &mut [Vec<u8>],
    t: &RouterTables,
    (neighbors, neighbors6): (&NeighborTable, &NeighborTable6),
    st: &mut RouterState,
    scratch: &mut [u8; SCRATCH_LEN],
) {
    for f in batch.iter_mut() {
        black_box(l3::decide::<l3::V4>(f, PortId(0), t, neighbors, neighbors6, st, 1000, scratch));
    }
}

/// The same batch as the worker runs it, each frame's FIB entry prefetched a few frames ahead
/// (`--toggle-collect='decision_cost::router_pipeline'`).
#[inline(never)]
fn router_pipeline(
    batch: &mut [Vec<u8>],
    t: &RouterTables,
    (neighbors, neighbors6): (&NeighborTable, &NeighborTable6),
    st: &mut RouterState,
    scratch: &mut [u8; SCRATCH_LEN],
) {
    let d = RouterDecide::PREFETCH_DISTANCE;
    for f in batch.iter().take(d) {
        l3::prefetch(f, t);
    }
    for k in 0..batch.len() {
        if let Some(ahead) = batch.get(k + d) {
            l3::prefetch(ahead, t);
        }
        black_box(l3::decide::<l3::V4>(&mut batch[k], PortId(0), t, neighbors, neighbors6, st, 1000, scratch));
    }
}
