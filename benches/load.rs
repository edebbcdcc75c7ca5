//! What the workers' loop accounting costs (`xfwd_dataplane::load`): per round, the two clock
//! reads a round adds (`CLOCK_MONOTONIC` through the vDSO, as the worker reads it), the sums and
//! the publication of the totals (plain stores to the worker's own counters); per kick, two
//! more clock reads; every 10 ms, a read of the thread's schedstat. Beside them, one clock read
//! alone. Divide a round's cost by the frames per round under load (`xfwd show stats`) for
//! the cost per frame.
//!
//! `cargo bench --bench load`; `cargo bench --bench load -- --test` runs each case once.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use xfwd_dataplane::load::LoopAccount;
use xfwd_dataplane::stats::QueueCounters;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the valid timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn accounting(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.bench_function("clock-read", |b| b.iter(|| black_box(monotonic_ns())));
    let counters = QueueCounters::new(0, None, 2);
    let mut acct = LoopAccount::new(monotonic_ns());
    // A round with work: its two reads (the round's start is the last one's end), the sums and
    // the publication; the kick's two reads are measured apart.
    group.bench_function("round-with-work", |b| {
        b.iter(|| {
            let rx_end = monotonic_ns();
            let end = monotonic_ns();
            acct.work_round(rx_end, end, black_box(64), black_box(0), black_box(0));
            counters.load.publish(acct.totals());
        })
    });
    group.bench_function("idle-round", |b| {
        b.iter(|| {
            let _rx_end = black_box(monotonic_ns());
            let end = monotonic_ns();
            acct.idle_round(end, 0);
        })
    });
    group.bench_function("kick-timing", |b| {
        let mut kick_ns = 0u64;
        b.iter(|| {
            let t = monotonic_ns();
            kick_ns += black_box(monotonic_ns()).saturating_sub(t);
        });
        black_box(kick_ns);
    });
    // The run delay, read every 10 ms (a hundred times a second).
    let file = std::fs::File::open("/proc/thread-self/schedstat").unwrap();
    group.bench_function("schedstat-read", |b| {
        b.iter(|| {
            use std::os::unix::fs::FileExt;
            let mut buf = [0u8; 96];
            let n = file.read_at(&mut buf, 0).unwrap();
            black_box(xfwd_dataplane::load::parse_schedstat(std::str::from_utf8(&buf[..n]).unwrap()))
        })
    });
    group.finish();
}

criterion_group!(benches, accounting);
criterion_main!(benches);
