//! Builds a 1M-prefix IPv6 table as the `fib6` bench does and prints the build time, the
//! table's memory and the process's peak resident memory (VmHWM), which includes the build's
//! transient vectors: the issue's budget is 2 s and 200 MB for the build.
//!
//! ```sh
//! cargo run --release --example fib6_build
//! ```

use xfwd_dataplane::io::setup::memory::advise_huge_pages;
use xfwd_dataplane::l3::fib::NhIndex;
use xfwd_dataplane::l3::fib6::{Fib6, Prefix6};

#[path = "../benches/common/tables.rs"]
#[allow(dead_code, reason = "the IPv4 half serves the benches")]
mod tables;

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // The fib6 bench's table: its seed, its generator.
    let mut rng = tables::Rng(0xD1B5_4A32_D192_ED03);
    let routes: Vec<(Prefix6, NhIndex)> = tables::prefixes6(1_000_000, &mut rng)
        .into_iter()
        .enumerate()
        .map(|(i, p)| (p, NhIndex((i % 16 + 1) as u16)))
        .collect();
    let before = vm_hwm_kib().unwrap_or(0);
    let start = std::time::Instant::now();
    let fib = Fib6::build_advised(&routes, advise_huge_pages).expect("builds");
    let took = start.elapsed();
    let after = vm_hwm_kib().unwrap_or(0);
    println!(
        "{} prefixes built in {:.0} ms; table {} MiB; peak resident {} MiB before the build (the routes), {} MiB after (+{} MiB for the build)",
        fib.routes(),
        took.as_secs_f64() * 1e3,
        fib.memory() >> 20,
        before >> 10,
        after >> 10,
        (after - before) >> 10
    );
}
