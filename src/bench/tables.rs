//! The synthetic full tables: prefix lengths in proportion to real IPv4 and IPv6 tables,
//! destinations inside them, the same for a seed on every run. `xfwd bench --routes` loads
//! them into every arm; the criterion benches and the examples measure the same tables
//! (`benches/common/tables.rs`).

use std::net::{Ipv4Addr, Ipv6Addr};

use xfwd_dataplane::l3::fib::Prefix;
use xfwd_dataplane::l3::fib6::Prefix6;

/// A xorshift generator: the same tables on every run.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait, reason = "an endless generator, not an iterator")]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Prefix lengths in proportion to a full Internet table (per mille), /8 to /32.
pub const LENGTH_MIX: &[(u8, u32)] = &[
    (8, 1),
    (12, 2),
    (14, 5),
    (16, 15),
    (17, 10),
    (18, 20),
    (19, 40),
    (20, 60),
    (21, 70),
    (22, 120),
    (23, 85),
    (24, 567),
    (25, 1),
    (26, 1),
    (27, 1),
    (28, 1),
    (32, 1),
];

/// `n` IPv4 prefixes in unicast space (1.0.0.0 – 223.255.255.255), lengths by [`LENGTH_MIX`];
/// some may repeat (see [`table4`]).
pub fn prefixes(n: usize, rng: &mut Rng) -> Vec<Prefix> {
    (0..n)
        .map(|_| {
            let len = pick_len(LENGTH_MIX, rng);
            // Unicast space 1.0.0.0 – 223.255.255.255.
            let a = (rng.next() as u32) % (223 << 24) + (1 << 24);
            Prefix::truncate(Ipv4Addr::from(a), len)
        })
        .collect()
}

/// `n` addresses, each inside a prefix of `table` drawn at random.
pub fn destinations(table: &[Prefix], n: usize, rng: &mut Rng) -> Vec<Ipv4Addr> {
    (0..n)
        .map(|_| {
            let p = table[(rng.next() % table.len() as u64) as usize];
            let host = if p.prefix_len() >= 32 { 0 } else { (rng.next() as u32) & (u32::MAX >> p.prefix_len()) };
            Ipv4Addr::from(u32::from(p.addr()) | host)
        })
        .collect()
}

/// IPv6 prefix lengths in proportion to a full Internet table (per mille): mostly /32 to /48,
/// some /56 and /64, a few host routes.
pub const LENGTH_MIX6: &[(u8, u32)] = &[
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

/// The blocks the registries allocate from, which a real table's prefixes cluster under.
pub const BLOCKS6: &[(u128, u8)] = &[
    (0x2001 << 112, 16),
    (0x2400 << 112, 12),
    (0x2600 << 112, 12),
    (0x2800 << 112, 12),
    (0x2a00 << 112, 12),
    (0x2c00 << 112, 12),
];

/// `n` IPv6 prefixes under the registries' blocks ([`BLOCKS6`]), lengths by [`LENGTH_MIX6`];
/// some may repeat (see [`table6`]).
pub fn prefixes6(n: usize, rng: &mut Rng) -> Vec<Prefix6> {
    (0..n)
        .map(|_| {
            let len = pick_len(LENGTH_MIX6, rng);
            let (block, blen) = BLOCKS6[(rng.next() % BLOCKS6.len() as u64) as usize];
            let bits = (u128::from(rng.next()) << 64 | u128::from(rng.next())) >> blen;
            Prefix6::truncate(Ipv6Addr::from(block | bits), len)
        })
        .collect()
}

/// `n` addresses, each inside a prefix of `table` drawn at random.
pub fn destinations6(table: &[Prefix6], n: usize, rng: &mut Rng) -> Vec<Ipv6Addr> {
    (0..n)
        .map(|_| {
            let p = table[(rng.next() % table.len() as u64) as usize];
            let host = (u128::from(rng.next()) << 64 | u128::from(rng.next()))
                .checked_shr(u32::from(p.prefix_len()))
                .unwrap_or(0);
            Ipv6Addr::from(u128::from(p.addr()) | host)
        })
        .collect()
}

/// What a full IPv4 table never carries (RFC 6890's special-purpose blocks a router filters:
/// this network, private, shared, loopback, link-local).
pub const BOGONS4: &[&str] =
    &["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"];

/// `n` distinct IPv4 prefixes from `seed`, none overlapping `keep_out` (the benchmarking range
/// the rig's own routes and traffic use) or [`BOGONS4`], in the order drawn.
pub fn table4(n: usize, seed: u64, keep_out: Prefix) -> Vec<Prefix> {
    let bogons: Vec<Prefix> = BOGONS4.iter().map(|b| b.parse().expect("a prefix")).collect();
    distinct(n, seed, prefixes, |p| !p.overlaps(&keep_out) && !bogons.iter().any(|b| p.overlaps(b)))
}

/// `n` distinct IPv6 prefixes from `seed`, none overlapping `keep_out`, in the order drawn.
pub fn table6(n: usize, seed: u64, keep_out: Prefix6) -> Vec<Prefix6> {
    distinct(n, seed, prefixes6, |p| !p.overlaps(&keep_out))
}

/// `n` distinct values that `keep` keeps, drawn by `draw` from `seed`, in the order drawn.
fn distinct<P: Copy + Eq + std::hash::Hash>(
    n: usize,
    seed: u64,
    draw: impl Fn(usize, &mut Rng) -> Vec<P>,
    keep: impl Fn(&P) -> bool,
) -> Vec<P> {
    // xorshift stays at 0 from 0.
    let mut rng = Rng(seed.max(1));
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        for p in draw(n - out.len(), &mut rng) {
            if keep(&p) && seen.insert(p) {
                out.push(p);
            }
        }
    }
    out
}

/// The length mix in words, for a report's conditions.
pub fn mix_said(mix: &[(u8, u32)]) -> String {
    let total: u32 = mix.iter().map(|(_, w)| w).sum();
    mix.iter()
        .map(|(l, w)| format!("/{l} {:.1} %", f64::from(*w) * 100.0 / f64::from(total)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A prefix length drawn from `mix` (length, weight per mille).
fn pick_len(mix: &[(u8, u32)], rng: &mut Rng) -> u8 {
    let total: u32 = mix.iter().map(|(_, w)| w).sum();
    let mut pick = (rng.next() % u64::from(total)) as u32;
    for &(len, w) in mix {
        if pick < w {
            return len;
        }
        pick -= w;
    }
    mix[mix.len() - 1].0
}
