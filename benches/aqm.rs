//! The flow queues: one enqueue plus one dequeue per item, with a standing backlog spread over
//! 4 and over 450 flows (the two load cases). Time per item on one core; no CoDel drops
//! (every item leaves at its arrival time) so the cost measured is classification-free queueing:
//! flow table, slot pool and DRR. The flow keys are built once, outside the timed loop.
//!
//! `cargo bench --bench aqm`; `cargo bench --bench aqm -- --test` runs each case once.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xfwd_dataplane::aqm::{FlowKey, FlowQueues, FqParams};

const ITEMS: u64 = 4096;

fn keys(flows: u16) -> Vec<FlowKey> {
    (0..flows)
        .map(|n| FlowKey {
            protocol: 17,
            src: [10, 0, (n >> 8) as u8, n as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            src_port: 40_000 + n,
            dst_port: 5201,
            ..FlowKey::default()
        })
        .collect()
}

fn enqueue_dequeue(c: &mut Criterion) {
    let mut group = c.benchmark_group("aqm");
    group.throughput(Throughput::Elements(ITEMS));
    for flows in [4u16, 450] {
        let keys = keys(flows);
        let mut q: FlowQueues<u64> = FlowQueues::new(FqParams::default());
        // A standing backlog of two items per flow (up to the pool's size).
        let mut now = 0u64;
        for (i, k) in keys.iter().cycle().take(2 * usize::from(flows)).enumerate() {
            assert!(q.enqueue(k, i as u64, 1500, now, false).is_none());
        }
        let mut next = 0usize;
        group.bench_function(format!("enqueue+dequeue/{flows}-flows"), |b| {
            b.iter(|| {
                for _ in 0..ITEMS {
                    now += 1;
                    let k = &keys[next];
                    next = if next + 1 == keys.len() { 0 } else { next + 1 };
                    let dropped = q.enqueue(k, now, 1500, now, false);
                    black_box(dropped);
                    black_box(q.dequeue(now));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, enqueue_dequeue);
criterion_main!(benches);
