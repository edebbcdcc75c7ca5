//! Builds a 1M-prefix IPv6 table as the `fib6` bench does and prints the build time, the
//! table's memory and the process's peak resident memory (VmHWM), which includes the build's
//! transient vectors: the issue's budget is 2 s and 200 MB for the build.
//!
//! ```sh
//! cargo run --release --example fib6_build
//! ```

use std::net::Ipv6Addr;

use xfwd_dataplane::io::memory::advise_huge_pages;
use xfwd_dataplane::l3::fib::NhIndex;
use xfwd_dataplane::l3::fib6::{Fib6, Prefix6};

/// The bench's length mix (per mille) and registry blocks, as in benches/router.rs.
const LENGTH_MIX6: &[(u8, u32)] = &[
    (16, 1),
    (20, 2),
    (24, 4),
    (28, 8),
    (29, 30),
    (32, 140),
    (33, 5),
    (34, 5),
    (35, 5),
    (36, 40),
    (38, 10),
    (40, 80),
    (42, 15),
    (44, 90),
    (45, 10),
    (46, 15),
    (47, 15),
    (48, 445),
    (56, 35),
    (64, 35),
    (128, 6),
];
const BLOCKS6: &[(u128, u8)] = &[
    (0x2001 << 112, 16),
    (0x2400 << 112, 12),
    (0x2600 << 112, 12),
    (0x2800 << 112, 12),
    (0x2a00 << 112, 12),
    (0x2c00 << 112, 12),
];

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let mut x = 0xD1B5_4A32_D192_ED03u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let total: u32 = LENGTH_MIX6.iter().map(|(_, w)| w).sum();
    let routes: Vec<(Prefix6, NhIndex)> = (0..1_000_000usize)
        .map(|i| {
            let mut pick = (next() % u64::from(total)) as u32;
            let len = LENGTH_MIX6
                .iter()
                .find(|(_, w)| {
                    if pick < *w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .map_or(48, |(l, _)| *l);
            let (block, blen) = BLOCKS6[(next() % BLOCKS6.len() as u64) as usize];
            let bits = ((u128::from(next()) << 64) | u128::from(next())) >> blen;
            (Prefix6::truncate(Ipv6Addr::from(block | bits), len), NhIndex((i % 16 + 1) as u16))
        })
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
