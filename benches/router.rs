//! The router's hot path with a full-size table: FIB lookups, FIB build, and the router decision
//! (parse, validate, LPM, neighbour, TTL + checksum, MAC rewrite) on batches of 64 frames.
//!
//! The table: 1,000,000 prefixes whose lengths follow a full Internet table (about 60 % /24,
//! almost nothing longer), 16 gateways on two ports. "hot": 4,000 destinations, which fit in
//! cache; "cold": 1,000,000 random destinations inside the table, which do not.
//!
//! `cargo bench --bench router`; in CI the test harness runs each case once.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use xfwd_dataplane::action::SCRATCH_LEN;
use xfwd_dataplane::io::frames::worker::{Decide, RouterDecide};
use xfwd_dataplane::io::setup::memory::advise_huge_pages;
use xfwd_dataplane::l3::fib::{Fib, NhIndex, Prefix};
use xfwd_dataplane::l3::fib6::{Fib6, Prefix6};
use xfwd_dataplane::l3::testing::{port, reference_ports};
use xfwd_dataplane::l3::{
    decide, prefetch, prefetch6, NeighborTable, NeighborTable6, RouteTarget, RouteTarget4, RouteTarget6, RouterState,
    RouterTables, V4, V6,
};
use xfwd_dataplane::wire::MacAddr;
use xfwd_dataplane::{Action, PortId};

#[path = "common/tables.rs"]
mod tables;

use tables::{destinations, destinations6, prefixes, prefixes6, Rng};

const BATCH: usize = 64;
const ROUTES: usize = 1_000_000;

fn bench_fib(c: &mut Criterion) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let table = prefixes(ROUTES, &mut rng);
    let routes: Vec<(Prefix, NhIndex)> =
        table.iter().enumerate().map(|(i, p)| (*p, NhIndex((i % 16 + 1) as u16))).collect();
    let start = std::time::Instant::now();
    let fib = Fib::build_advised(&routes, advise_huge_pages).unwrap();
    eprintln!(
        "fib: {} routes built in {:.0} ms, {} MiB of table",
        ROUTES,
        start.elapsed().as_secs_f64() * 1e3,
        fib.memory() >> 20
    );
    let small_pages = Fib::build(&routes).unwrap();
    let mut g = c.benchmark_group("fib_lookup_1m");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, n, fib) in [
        ("hot_4k_dsts", 4_000usize, &fib),
        ("cold_1m_dsts", 1_000_000, &fib),
        ("hot_4k_dsts_4k_pages", 4_000, &small_pages),
        ("cold_1m_dsts_4k_pages", 1_000_000, &small_pages),
    ] {
        let dsts = destinations(&table, n, &mut rng);
        let mut at = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                at = (at + BATCH) % (dsts.len() - BATCH);
                let batch = &dsts[at..at + BATCH];
                for d in batch {
                    fib.prefetch(*d);
                }
                for d in batch {
                    black_box(fib.lookup(black_box(*d)));
                }
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("fib_build");
    g.sample_size(10);
    g.bench_function("1m_routes", |b| {
        b.iter(|| black_box(Fib::build_advised(black_box(&routes), advise_huge_pages).unwrap()))
    });
    g.finish();
}

fn bench_fib6(c: &mut Criterion) {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let table = prefixes6(ROUTES, &mut rng);
    let routes: Vec<(Prefix6, NhIndex)> =
        table.iter().enumerate().map(|(i, p)| (*p, NhIndex((i % 16 + 1) as u16))).collect();
    let start = std::time::Instant::now();
    let fib = Fib6::build_advised(&routes, advise_huge_pages).unwrap();
    eprintln!(
        "fib6: {} routes built in {:.0} ms, {} MiB of table ({fib:?})",
        ROUTES,
        start.elapsed().as_secs_f64() * 1e3,
        fib.memory() >> 20
    );
    let mut g = c.benchmark_group("fib6_lookup_1m");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, n) in [("hot_4k_dsts", 4_000usize), ("cold_1m_dsts", 1_000_000)] {
        let dsts = destinations6(&table, n, &mut rng);
        let mut at = 0usize;
        g.bench_function(format!("{name}_one_by_one"), |b| {
            b.iter(|| {
                at = (at + BATCH) % (dsts.len() - BATCH);
                for d in &dsts[at..at + BATCH] {
                    black_box(fib.lookup(black_box(*d)));
                }
            })
        });
        let mut out = [None; BATCH];
        g.bench_function(format!("{name}_batch"), |b| {
            b.iter(|| {
                at = (at + BATCH) % (dsts.len() - BATCH);
                fib.lookup_batch(black_box(&dsts[at..at + BATCH]), &mut out);
                black_box(&out);
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("fib6_build");
    g.sample_size(10);
    g.bench_function("1m_routes", |b| {
        b.iter(|| black_box(Fib6::build_advised(black_box(&routes), advise_huge_pages).unwrap()))
    });
    g.finish();
}

fn bench_router(c: &mut Criterion) {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let table = prefixes(ROUTES, &mut rng);
    let eth5 = xfwd_dataplane::l3::testing::ETH5;
    let ports = reference_ports();
    let gateways: Vec<Ipv4Addr> = (0..16).map(|i| Ipv4Addr::new(198, 18, 30, 10 + i)).collect();
    let statics: Vec<(Prefix, RouteTarget4)> =
        table.iter().enumerate().map(|(i, p)| (*p, RouteTarget::via(gateways[i % 16]))).collect();
    let t = RouterTables::build_advised(ports, &statics, advise_huge_pages).unwrap();
    let neighbors = NeighborTable::new(64);
    let neighbors6 = NeighborTable6::new6(8);
    for (i, gw) in gateways.iter().enumerate() {
        neighbors.insert(*gw, MacAddr([2, 0, 0, 0, 9, i as u8]), PortId(1), true).unwrap();
    }
    let mut state = RouterState::new(0, 1);
    state.fit(&t);
    let mut scratch = [0u8; SCRATCH_LEN];
    let mut g = c.benchmark_group("router_decide_batch64_1m");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, n) in [("hot_4k_dsts", 4_000usize), ("cold_1m_dsts", 1_000_000)] {
        let dsts = destinations(&table, n, &mut rng);
        // 64-byte UDP frames from the eth5 side, TTL 64, valid checksums.
        let frames: Vec<[u8; 64]> = dsts
            .iter()
            .map(|d| {
                let mut v = Vec::with_capacity(64);
                etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], eth5.0)
                    .ipv4([198, 18, 10, 1], d.octets(), 64)
                    .udp(1024, 9)
                    .write(&mut v, &[0u8; 18])
                    .unwrap();
                let mut f = [0u8; 64];
                f[..v.len()].copy_from_slice(&v);
                f
            })
            .collect();
        // As the worker does it (a prefetch stage RouterDecide::PREFETCH_DISTANCE frames ahead of
        // the decisions), and without the stage, to see what it buys.
        for dist in [RouterDecide::PREFETCH_DISTANCE, 0] {
            let staged = dist > 0;
            let mut at = 0usize;
            let id = format!("{name}{}", if staged { "" } else { "_no_prefetch" });
            g.bench_function(id, |b| {
                b.iter_batched_ref(
                    || {
                        // A fresh copy: the decision rewrites TTL and MACs in place.
                        at = (at + BATCH) % (frames.len() - BATCH);
                        frames[at..at + BATCH].to_vec()
                    },
                    |batch| {
                        if staged {
                            for f in batch.iter().take(dist) {
                                prefetch(&f[..], &t);
                            }
                        }
                        for i in 0..batch.len() {
                            if staged && i + dist < batch.len() {
                                prefetch(&batch[i + dist][..], &t);
                            }
                            let f = &mut batch[i];
                            let a = decide::<V4>(
                                &mut f[..60],
                                PortId(0),
                                &t,
                                &neighbors,
                                &neighbors6,
                                &mut state,
                                1000,
                                &mut scratch,
                            );
                            debug_assert!(matches!(a, Action::Forward(PortId(1))));
                            black_box(a);
                        }
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

fn bench_router6(c: &mut Criterion) {
    let mut rng = Rng(0x94D0_49BB_1331_11EB);
    let table = prefixes6(ROUTES, &mut rng);
    let eth5 = MacAddr([2, 0, 0, 0, 5, 5]);
    let eth4 = MacAddr([2, 0, 0, 0, 4, 4]);
    let ports = vec![port("eth5", eth5, &["2001:2:0:10::2/64"]), port("eth4", eth4, &["2001:2:0:30::1/64"])];
    let gateways: Vec<Ipv6Addr> = (0..16).map(|i| Ipv6Addr::new(0x2001, 2, 0, 0x30, 0, 0, 0, 0x10 + i)).collect();
    let statics: Vec<(Prefix6, RouteTarget6)> =
        table.iter().enumerate().map(|(i, p)| (*p, RouteTarget::via(gateways[i % 16]))).collect();
    let t = RouterTables::build_dual(ports, &[], &statics, advise_huge_pages).unwrap();
    let neighbors = NeighborTable6::new6(64);
    // IPv4's table, which no IPv6 decision reads.
    let neighbors4 = NeighborTable::new(8);
    for (i, gw) in gateways.iter().enumerate() {
        neighbors
            .insert(xfwd_dataplane::l3::Key6::global(*gw), MacAddr([2, 0, 0, 0, 9, i as u8]), PortId(1), true)
            .unwrap();
    }
    let mut state = RouterState::new(0, 1);
    state.fit(&t);
    let mut scratch = [0u8; SCRATCH_LEN];
    let mut g = c.benchmark_group("router6_decide_batch64_1m");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, n) in [("hot_4k_dsts", 4_000usize), ("cold_1m_dsts", 1_000_000)] {
        let dsts = destinations6(&table, n, &mut rng);
        // 80-byte UDP frames from the eth5 side, hop limit 64.
        let frames: Vec<[u8; 80]> = dsts
            .iter()
            .map(|d| {
                let mut v = Vec::with_capacity(80);
                etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], eth5.0)
                    .ipv6("2001:2:0:10::1".parse::<Ipv6Addr>().unwrap().octets(), d.octets(), 64)
                    .udp(1024, 9)
                    .write(&mut v, &[0u8; 18])
                    .unwrap();
                let mut f = [0u8; 80];
                f[..v.len()].copy_from_slice(&v);
                f
            })
            .collect();
        // As the worker runs it: a prefetch stage (the FIB's direct entry) frames ahead.
        let dist = RouterDecide::PREFETCH_DISTANCE;
        let mut at = 0usize;
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    at = (at + BATCH) % (frames.len() - BATCH);
                    frames[at..at + BATCH].to_vec()
                },
                |batch| {
                    for f in batch.iter().take(dist) {
                        prefetch6(&f[..], &t);
                    }
                    for i in 0..batch.len() {
                        if i + dist < batch.len() {
                            prefetch6(&batch[i + dist][..], &t);
                        }
                        let f = &mut batch[i];
                        let a = decide::<V6>(
                            &mut f[..],
                            PortId(0),
                            &t,
                            &neighbors4,
                            &neighbors,
                            &mut state,
                            1000,
                            &mut scratch,
                        );
                        debug_assert!(matches!(a, Action::Forward(PortId(1))), "{a:?}");
                        black_box(a);
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_fib, bench_fib6, bench_router, bench_router6);
criterion_main!(benches);
