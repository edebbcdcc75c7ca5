//! The bridge decision (parse, learn source, look up destination) on batches of 64 frames with a
//! populated FDB, with the worker's pipelined prefetch (the FDB lines of the frame a few places
//! ahead) and without. Throughput is frames per second on one core.
//!
//! `cargo bench --bench bridge`; in CI `cargo bench --bench bridge -- --test` runs each case once.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use xfwd_dataplane::io::frames::worker::{BridgeDecide, Decide};
use xfwd_dataplane::l2::{decide, prefetch, Fdb};
use xfwd_dataplane::time::Seconds;
use xfwd_dataplane::wire::ethernet::ETHERTYPE_IPV4;
use xfwd_dataplane::wire::{EthernetFrame, MacAddr};
use xfwd_dataplane::PortId;

const BATCH: usize = 64;

fn mac(i: u32) -> MacAddr {
    let b = i.to_be_bytes();
    MacAddr([0x02, 0x00, b[0], b[1], b[2], b[3]])
}

/// `stations` MACs, even ones behind port 0 and odd ones behind port 1, and `frames` frames
/// between random pairs of them on opposite ports (each frame comes in on its source's port).
fn setup(stations: u32, frames: usize) -> (Fdb, Vec<([u8; 64], PortId)>) {
    // Twice the stations: every one is learnt (two-choice tables start refusing near 95 %).
    let fdb = Fdb::new(2 * stations as usize, 300);
    for i in 0..stations {
        fdb.learn(mac(i), PortId((i % 2) as u8), Seconds(1));
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let out = (0..frames)
        .map(|_| {
            let s = (next() % u64::from(stations)) as u32;
            let mut d = (next() % u64::from(stations)) as u32;
            if d % 2 == s % 2 {
                d ^= 1;
                d %= stations;
            }
            let mut f = [0u8; 64];
            let mut eth = EthernetFrame::new_checked(&mut f[..]).expect("64 bytes hold a header");
            eth.set_dst(mac(d));
            eth.set_src(mac(s));
            eth.set_ethertype(ETHERTYPE_IPV4);
            (f, PortId((s % 2) as u8))
        })
        .collect();
    (fdb, out)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("bridge_decide_batch64");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, stations) in [("4k_macs", 4096u32), ("64k_macs", 65536u32)] {
        let (fdb, frames) = setup(stations, 1 << 16);
        let pol = xfwd_dataplane::l2::Policies::uniform(2);
        let batches: Vec<&[([u8; 64], PortId)]> = frames.chunks(BATCH).collect();
        // As the worker does it (a prefetch stage BridgeDecide::PREFETCH_DISTANCE frames ahead of
        // the decisions), and without the stage, to see what it buys.
        for dist in [BridgeDecide::PREFETCH_DISTANCE, 0] {
            let mut i = 0usize;
            let id = format!("{name}{}", if dist == 0 { "_no_prefetch" } else { "" });
            g.bench_function(id, |b| {
                b.iter_batched_ref(
                    || {
                        i = (i + 1) % batches.len();
                        batches[i]
                    },
                    |batch| {
                        for (f, _) in batch.iter().take(dist) {
                            prefetch(black_box(&f[..]), &fdb);
                        }
                        for k in 0..batch.len() {
                            if dist > 0 && k + dist < batch.len() {
                                prefetch(black_box(&batch[k + dist].0[..]), &fdb);
                            }
                            let (f, port) = &batch[k];
                            black_box(decide(black_box(&f[..]), *port, &fdb, Seconds(2), &pol));
                        }
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
