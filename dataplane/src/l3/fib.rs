//! The forwarding information base: longest-prefix match over IPv4 routes.
//!
//! # Structure: DIR-24-8, and the choices not taken
//!
//! A flat table of 2^24 16-bit entries indexed by the top 24 bits of the address (32 MiB), and
//! groups of 256 entries for the last 8 bits of the few prefixes longer than /24. An entry is
//! either a next-hop index or, with its top bit set, a group number. A lookup is one memory read
//! for any destination covered by /24 or shorter (almost all of a full Internet table) and two
//! for the rest, with no branches on prefix length.
//!
//! - A binary or multibit trie (Patricia, Poptrie) uses far less memory but several dependent
//!   reads per lookup; with a million prefixes those reads miss the cache, and a forwarder's
//!   cold lookups are bound by memory latency, not instructions.
//! - smoltcp's linear scan is right for a host with three routes, wrong for a router.
//! - 16-bit entries rather than 32: half the memory and half the TLB reach for the same table;
//!   the cost is at most 32,767 distinct next hops and 32,767 groups of longer prefixes, far
//!   more than a box with a handful of ports and a full table needs (build reports when exceeded).
//!
//! A reload builds a new table (a million routes in well under a second, see the `fib` bench),
//! which replaces the old one atomically; kernel-mode changes repaint the entries under each
//! changed prefix ([`Fib::repaint`]) in a table no reader holds (`routes::incremental`).
//!
//! The flat table is 32 MiB: in 4 KiB pages that is 8,192 TLB entries, far more than a core has,
//! so cold lookups would each pay a page walk on top of the cache miss. How its memory is backed
//! is the kernel's business and this layer makes no system calls: the builder takes an
//! [`Advice`] that runs on the table before it is first written, and the forwarder passes
//! `io::setup::memory::advise_huge_pages` (transparent huge pages where the system allows them).
//! Or the memory is lent ([`Lent`], [`Fib::build_lent`]): the XDP path's program reads its IPv4
//! table from the pages of a BPF map that xfwd maps and builds the same structure in.

use core::fmt;
use core::net::Ipv4Addr;
use core::ptr::NonNull;

pub use super::prefix::{Prefix, PrefixError};

/// Index of a next hop in the table the FIB was built with (never 0: 0 means no route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NhIndex(pub u16);

const GROUP: u16 = 0x8000;
const MAX_INDEX: usize = 0x7fff;
/// Entries of the flat table: one per /24.
pub const FLAT: usize = 1 << 24;
/// Entries of a group: one per address of a /24.
pub const GROUP_LEN: usize = 256;

/// Why a table could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    /// More next hops than an entry can name.
    #[error("{0} distinct next hops; the table holds at most 32767")]
    TooManyNextHops(usize),
    /// More groups of longer-than-/24 prefixes than an entry can name.
    #[error("prefixes longer than /24 need more than 32767 groups of 256 entries")]
    TooManyGroups,
    /// More groups of longer-than-/24 prefixes than lent memory has room for ([`Lent`]).
    #[error("prefixes longer than /24 fall in more than {0} /24s, the most the table's memory has room for")]
    NoRoomForGroups(usize),
    /// An IPv6 table larger than its 31-bit node indices can name.
    #[error("the IPv6 table needs more than 2^31 trie nodes or 2^32 leaves")]
    TooManyNodes,
}

/// Memory a table is built in that its owner lends for the table's lifetime, instead of the
/// allocator's: the XDP path's map, which the program reads and xfwd maps
/// (`io::program::dir4`). The table writes every entry it reads; what the memory held before
/// is ignored.
pub trait Lent: Send + Sync {
    /// The flat table ([`FLAT`] entries) and room for groups (a multiple of [`GROUP_LEN`]
    /// entries). Each call returns the same memory, which stays where it is while `self` lives.
    fn tables(&mut self) -> (&mut [u16], &mut [u16]);
}

/// Where a table's entries are.
enum Store {
    /// The allocator's: the flat table, and the groups, grown as needed.
    Heap { tbl24: Box<[u16]>, tbl8: Vec<u16> },
    /// Lent, with room for `room` group entries.
    Lent { mem: Box<dyn Lent>, room: usize },
}

/// A DIR-24-8 longest-prefix-match table (see the module documentation).
pub struct Fib {
    /// The flat table's [`FLAT`] entries and the groups' `tbl8_len` entries, in `store`.
    tbl24: NonNull<u16>,
    tbl8: NonNull<u16>,
    tbl8_len: usize,
    store: Store,
    routes: usize,
    /// Groups of `tbl8` no slot names any more ([`Fib::repaint`]), reused first.
    free_groups: Vec<u16>,
}

// SAFETY: `tbl24` and `tbl8` point into `store`, which the Fib owns (the allocator's memory)
// or holds the only handle to (lent memory, which stays put while the handle lives); like a
// Box, a shared Fib is only read and a Fib is written only through `&mut`.
unsafe impl Send for Fib {}
// SAFETY: as for Send: reads through `&Fib` only.
unsafe impl Sync for Fib {}

impl fmt::Debug for Fib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fib").field("routes", &self.routes).field("groups", &(self.tbl8_len / GROUP_LEN)).finish()
    }
}

impl Clone for Fib {
    /// A copy in the allocator's memory, lent or not.
    fn clone(&self) -> Fib {
        self.copy_advised(no_advice)
    }
}

/// A hint on how a freshly allocated, not yet written table should be backed, given the
/// addresses it spans (see the module documentation); [`no_advice`] leaves it to the allocator.
pub type Advice = fn(core::ops::Range<usize>);

/// The [`Advice`] that asks for nothing.
pub fn no_advice(_span: core::ops::Range<usize>) {}

/// The addresses `s` spans (for an [`Advice`]).
pub fn span<T>(s: &[T]) -> core::ops::Range<usize> {
    let start = s.as_ptr() as usize;
    start..start + core::mem::size_of_val(s)
}

impl Fib {
    /// An empty table (no route) in `store`.
    fn new_in(mut store: Store) -> Fib {
        let (tbl24, tbl8, tbl8_len) = match &mut store {
            Store::Heap { tbl24, tbl8 } => {
                debug_assert_eq!(tbl24.len(), FLAT);
                (NonNull::from(&mut tbl24[..]).cast(), NonNull::from(&mut tbl8[..]).cast(), tbl8.len())
            }
            Store::Lent { mem, room } => {
                let (t24, t8) = mem.tables();
                assert!(t24.len() == FLAT && t8.len() % GROUP_LEN == 0, "lent memory of the wrong shape");
                t24.fill(0);
                *room = t8.len();
                (NonNull::from(t24).cast(), NonNull::from(t8).cast(), 0)
            }
        };
        Fib { tbl24, tbl8, tbl8_len, store, routes: 0, free_groups: Vec::new() }
    }

    /// Builds the table from `(prefix, next hop index)` pairs; for a prefix given twice the
    /// last one wins. Indices must be 1..=32767. The memory is the allocator's ([`no_advice`]).
    pub fn build(routes: &[(Prefix, NhIndex)]) -> Result<Fib, FibError> {
        Fib::build_advised(routes, no_advice)
    }

    /// [`Fib::build`], with `advise` run on the flat table before it is first written.
    pub fn build_advised(routes: &[(Prefix, NhIndex)], advise: Advice) -> Result<Fib, FibError> {
        let tbl24 = vec![0u16; FLAT].into_boxed_slice();
        advise(span(&tbl24));
        Fib::new_in(Store::Heap { tbl24, tbl8: Vec::new() }).paint(routes)
    }

    /// [`Fib::build`] in lent memory (the groups it has room for at most), which the table
    /// holds until it is dropped.
    pub fn build_lent(routes: &[(Prefix, NhIndex)], mem: Box<dyn Lent>) -> Result<Fib, FibError> {
        Fib::new_in(Store::Lent { mem, room: 0 }).paint(routes)
    }

    /// Paints `routes` over the empty table, shorter prefixes first so that longer ones
    /// overwrite them; stable, so that a later duplicate wins.
    fn paint(mut self, routes: &[(Prefix, NhIndex)]) -> Result<Fib, FibError> {
        if let Some((_, nh)) = routes.iter().find(|(_, nh)| nh.0 == 0 || usize::from(nh.0) > MAX_INDEX) {
            return Err(FibError::TooManyNextHops(usize::from(nh.0)));
        }
        let mut order: Vec<usize> = (0..routes.len()).collect();
        order.sort_by_key(|&i| routes[i].0.len);
        for &i in &order {
            let (p, nh) = routes[i];
            self.fill(p, nh.0)?;
        }
        self.routes = routes.len();
        Ok(self)
    }

    /// Sets every entry under `p` to `value`: a range of the flat table for a /24 or shorter
    /// (forgetting the groups it held), else a range of the /24's group, made if needed.
    fn fill(&mut self, p: Prefix, value: u16) -> Result<(), FibError> {
        let slot = (p.addr >> 8) as usize;
        if p.len <= 24 {
            let range = slot..slot + (1usize << (24 - p.len));
            for i in range.clone() {
                let e = self.flat()[i];
                if e & GROUP != 0 {
                    self.free_groups.push(e & !GROUP);
                }
            }
            self.flat_mut()[range].fill(value);
        } else {
            let start = self.group(slot)? * GROUP_LEN + (p.addr & 0xff) as usize;
            self.groups_mut()[start..start + (1usize << (32 - p.len))].fill(value);
        }
        Ok(())
    }

    /// The flat table.
    #[inline(always)]
    fn flat(&self) -> &[u16] {
        // SAFETY: `tbl24` points at FLAT initialised entries in `store` (Fib::new_in), alive
        // as long as `self`; shared reads only.
        unsafe { core::slice::from_raw_parts(self.tbl24.as_ptr(), FLAT) }
    }

    fn flat_mut(&mut self) -> &mut [u16] {
        // SAFETY: as in `flat`, through `&mut self`: no other reference into the table lives.
        unsafe { core::slice::from_raw_parts_mut(self.tbl24.as_ptr(), FLAT) }
    }

    /// The groups in use.
    #[inline(always)]
    fn groups(&self) -> &[u16] {
        // SAFETY: `tbl8` points at `tbl8_len` initialised entries in `store` (kept in step by
        // `add_group`), alive as long as `self`; shared reads only.
        unsafe { core::slice::from_raw_parts(self.tbl8.as_ptr(), self.tbl8_len) }
    }

    fn groups_mut(&mut self) -> &mut [u16] {
        // SAFETY: as in `groups`, through `&mut self`.
        unsafe { core::slice::from_raw_parts_mut(self.tbl8.as_ptr(), self.tbl8_len) }
    }

    /// A new group, every entry `value`; its number.
    fn add_group(&mut self, value: u16) -> Result<usize, FibError> {
        let g = self.tbl8_len / GROUP_LEN;
        if g > MAX_INDEX {
            return Err(FibError::TooManyGroups);
        }
        match &mut self.store {
            Store::Heap { tbl8, .. } => {
                tbl8.extend(std::iter::repeat_n(value, GROUP_LEN));
                self.tbl8 = NonNull::from(&mut tbl8[..]).cast();
            }
            Store::Lent { room, .. } => {
                if self.tbl8_len + GROUP_LEN > *room {
                    return Err(FibError::NoRoomForGroups(*room / GROUP_LEN));
                }
                // SAFETY: within the lent room (checked above), which `tbl8` points at.
                unsafe { core::slice::from_raw_parts_mut(self.tbl8.as_ptr().add(self.tbl8_len), GROUP_LEN) }
                    .fill(value);
            }
        }
        self.tbl8_len += GROUP_LEN;
        Ok(g)
    }

    /// Makes the entries under `p` what `routes` (every route, by prefix, with `nh` giving
    /// each one's next hop) says, after `p`'s route was added, changed or removed; the rest of
    /// the table is untouched. The range is filled with `p`'s route, or the longest shorter
    /// one covering it, then the routes inside `p` are painted over it, shortest first; groups
    /// of longer-than-/24 prefixes left with no such prefix fold back into their slot. Costs
    /// the range and the routes inside it: a /24 or longer takes microseconds. `routes` must
    /// hold every route the table was built from and repainted with since, as they are now.
    pub fn repaint<V>(
        &mut self,
        p: Prefix,
        routes: &std::collections::BTreeMap<Prefix, V>,
        nh: impl Fn(&V) -> NhIndex,
    ) -> Result<(), FibError> {
        let value = |q: Prefix| routes.get(&q).map_or(0, |v| nh(v).0);
        // What the range holds with no route inside it: p's own, else the covering route's.
        let base = routes.get(&p).map(|v| nh(v).0).unwrap_or_else(|| {
            (0..p.len).rev().map(|l| value(Prefix::truncate(p.addr(), l))).find(|&v| v != 0).unwrap_or(0)
        });
        if base > MAX_INDEX as u16 {
            return Err(FibError::TooManyNextHops(usize::from(base)));
        }
        let last = p.addr | !p.mask();
        let mut inside: Vec<(Prefix, u16)> = if p.len == 32 {
            Vec::new()
        } else {
            routes
                .range(Prefix { addr: p.addr, len: p.len + 1 }..=Prefix { addr: last, len: 32 })
                .filter(|(q, _)| q.len > p.len && p.contains(q.addr()))
                .map(|(q, v)| (*q, nh(v).0))
                .collect()
        };
        inside.sort_by_key(|(q, _)| q.len);
        if let Some((_, v)) = inside.iter().find(|(_, v)| *v == 0 || usize::from(*v) > MAX_INDEX) {
            return Err(FibError::TooManyNextHops(usize::from(*v)));
        }
        self.fill(p, base)?;
        for (q, v) in inside {
            self.fill(q, v)?;
        }
        // A /24 whose last longer prefix went holds one value: its group folds back.
        if p.len > 24 {
            let slot24 = Prefix::truncate(p.addr(), 24);
            let longer = routes
                .range(Prefix { addr: slot24.addr, len: 25 }..=Prefix { addr: slot24.addr | 0xff, len: 32 })
                .any(|(q, _)| q.len > 24 && slot24.contains(q.addr()));
            let slot = (p.addr >> 8) as usize;
            let e = self.flat()[slot];
            if !longer && e & GROUP != 0 {
                let g = usize::from(e & !GROUP);
                self.flat_mut()[slot] = self.groups()[g * GROUP_LEN];
                self.free_groups.push(e & !GROUP);
            }
        }
        self.routes = routes.len();
        Ok(())
    }

    /// Makes the entries under `p` what they are in `src` (another table over the same next
    /// hops), after `p`'s route changed there: the flat entries under `p` (a /24 or shorter)
    /// or of the /24 that holds it (longer) copied, with their groups' entries, each group
    /// numbered as this table numbers them; the rest of the table is untouched. Costs the
    /// range, like [`Fib::repaint`], and needs no routes: how the XDP path's table follows the
    /// workers' (`io::program::dir4`).
    pub fn repaint_from(&mut self, p: Prefix, src: &Fib) -> Result<(), FibError> {
        let first = (p.addr >> 8) as usize;
        let slots = first..first + (1usize << (24 - p.len.min(24)));
        for slot in slots {
            let e = src.flat()[slot];
            if e & GROUP != 0 {
                let from = usize::from(e & !GROUP) * GROUP_LEN;
                let to = self.group(slot)? * GROUP_LEN;
                self.groups_mut()[to..to + GROUP_LEN].copy_from_slice(&src.groups()[from..from + GROUP_LEN]);
            } else {
                let mine = self.flat()[slot];
                if mine & GROUP != 0 {
                    self.free_groups.push(mine & !GROUP);
                }
                self.flat_mut()[slot] = e;
            }
        }
        self.routes = src.routes;
        Ok(())
    }

    /// A copy of the table in lent memory ([`Lent`]): the same entries and groups, numbered
    /// alike; [`FibError::NoRoomForGroups`], before any entry is copied, when the table uses
    /// more groups than `mem` has room for.
    pub fn copy_lent(&self, mem: Box<dyn Lent>) -> Result<Fib, FibError> {
        let mut f = Fib::new_in(Store::Lent { mem, room: 0 });
        let room = match &f.store {
            Store::Lent { room, .. } => *room,
            Store::Heap { .. } => 0,
        };
        if self.tbl8_len > room {
            return Err(FibError::NoRoomForGroups(room / GROUP_LEN));
        }
        f.flat_mut().copy_from_slice(self.flat());
        f.tbl8_len = self.tbl8_len;
        f.groups_mut().copy_from_slice(self.groups());
        f.routes = self.routes;
        f.free_groups.clone_from(&self.free_groups);
        Ok(f)
    }

    /// The group of `slot`, made (holding the slot's value) if it has none.
    fn group(&mut self, slot: usize) -> Result<usize, FibError> {
        let e = self.flat()[slot];
        if e & GROUP != 0 {
            return Ok(usize::from(e & !GROUP));
        }
        let g = match self.free_groups.pop() {
            Some(g) => {
                let g = usize::from(g);
                self.groups_mut()[g * GROUP_LEN..(g + 1) * GROUP_LEN].fill(e);
                g
            }
            None => self.add_group(e)?,
        };
        self.flat_mut()[slot] = GROUP | g as u16;
        Ok(g)
    }

    /// A copy of the table in the allocator's memory, its flat part allocated with `advise`
    /// as a build does (a plain `clone` would lose the advice: huge pages).
    pub fn copy_advised(&self, advise: Advice) -> Fib {
        let mut tbl24 = vec![0u16; FLAT].into_boxed_slice();
        advise(span(&tbl24));
        tbl24.copy_from_slice(self.flat());
        let mut f = Fib::new_in(Store::Heap { tbl24, tbl8: self.groups().to_vec() });
        f.routes = self.routes;
        f.free_groups.clone_from(&self.free_groups);
        f
    }

    /// The next hop of the longest prefix containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: Ipv4Addr) -> Option<NhIndex> {
        let a = u32::from(addr);
        let e = self.flat()[(a >> 8) as usize];
        let e = if e & GROUP != 0 { self.groups()[(usize::from(e & !GROUP) << 8) | (a & 0xff) as usize] } else { e };
        (e != 0).then_some(NhIndex(e))
    }

    /// Prefetches the entry for `addr` (a hint for batch lookups; no effect on results).
    #[inline]
    pub fn prefetch(&self, addr: Ipv4Addr) {
        crate::prefetch::read(&self.flat()[(u32::from(addr) >> 8) as usize]);
    }

    /// Number of routes it was built from.
    pub fn routes(&self) -> usize {
        self.routes
    }

    /// Groups in use (free ones included), each a /24 that holds longer prefixes.
    pub fn groups_used(&self) -> usize {
        self.tbl8_len / GROUP_LEN
    }

    /// Bytes of table memory (lent memory: all of it, room for groups included).
    pub fn memory(&self) -> usize {
        let groups = match &self.store {
            Store::Heap { tbl8, .. } => tbl8.capacity(),
            Store::Lent { room, .. } => *room,
        };
        (FLAT + groups) * 2
    }

    /// Whether the table is in lent memory.
    pub fn is_lent(&self) -> bool {
        matches!(self.store, Store::Lent { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// A xorshift64 generator from `seed`: the same tables every run.
    fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    #[test]
    fn longest_prefix_wins_at_every_length() {
        let routes = [
            (p("0.0.0.0/0"), NhIndex(1)),
            (p("10.0.0.0/8"), NhIndex(2)),
            (p("10.1.0.0/16"), NhIndex(3)),
            (p("10.1.2.0/24"), NhIndex(4)),
            (p("10.1.2.128/25"), NhIndex(5)),
            (p("10.1.2.200/32"), NhIndex(6)),
        ];
        let f = Fib::build(&routes).unwrap();
        assert_eq!(f.lookup(ip("1.2.3.4")), Some(NhIndex(1)));
        assert_eq!(f.lookup(ip("10.9.9.9")), Some(NhIndex(2)));
        assert_eq!(f.lookup(ip("10.1.9.9")), Some(NhIndex(3)));
        assert_eq!(f.lookup(ip("10.1.2.1")), Some(NhIndex(4)));
        assert_eq!(f.lookup(ip("10.1.2.129")), Some(NhIndex(5)));
        assert_eq!(f.lookup(ip("10.1.2.200")), Some(NhIndex(6)));
        assert_eq!(f.lookup(ip("10.1.2.201")), Some(NhIndex(5)));
        // Order of the input does not matter.
        let mut rev = routes;
        rev.reverse();
        let g = Fib::build(&rev).unwrap();
        for a in ["1.2.3.4", "10.9.9.9", "10.1.2.1", "10.1.2.129", "10.1.2.200", "10.1.2.127"] {
            assert_eq!(f.lookup(ip(a)), g.lookup(ip(a)), "{a}");
        }
    }

    #[test]
    fn no_route_is_none_and_a_later_duplicate_wins() {
        let f = Fib::build(&[(p("198.18.0.0/15"), NhIndex(1)), (p("198.18.0.0/15"), NhIndex(2))]).unwrap();
        assert_eq!(f.lookup(ip("198.19.255.255")), Some(NhIndex(2)));
        assert_eq!(f.lookup(ip("198.20.0.0")), None);
        assert_eq!(f.lookup(ip("0.0.0.0")), None);
    }

    #[test]
    fn matches_a_naive_oracle_on_random_tables() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        for _ in 0..5 {
            let routes: Vec<(Prefix, NhIndex)> = (0..300)
                .map(|_| {
                    let len = [0, 8, 12, 16, 20, 23, 24, 24, 24, 26, 28, 30, 32][(next() % 13) as usize];
                    // Cluster addresses so prefixes nest and overlap often.
                    let addr = Ipv4Addr::from(0x0a00_0000 | (next() as u32 & 0x00ff_ffff));
                    (Prefix::truncate(addr, len), NhIndex((next() % 1000 + 1) as u16))
                })
                .collect();
            let f = Fib::build(&routes).unwrap();
            for _ in 0..20_000 {
                let a = Ipv4Addr::from(if next() % 2 == 0 {
                    0x0a00_0000 | (next() as u32 & 0x00ff_ffff)
                } else {
                    next() as u32
                });
                // The oracle: longest containing prefix, the last given among equals.
                let want = routes
                    .iter()
                    .enumerate()
                    .filter(|(_, (p, _))| p.contains(a))
                    .max_by_key(|(i, (p, _))| (p.prefix_len(), *i))
                    .map(|(_, (_, nh))| *nh);
                assert_eq!(f.lookup(a), want, "{a}");
            }
        }
    }

    #[test]
    fn advice_runs_once_on_the_flat_table_before_it_is_written() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static ADVISED: AtomicUsize = AtomicUsize::new(0);
        fn check(span: core::ops::Range<usize>) {
            assert_eq!(span.len(), 2 << 24, "the flat table's bytes");
            // SAFETY: the span is the flat table, allocated (zeroed) and alive while the build
            // that called this runs; u16 has no invalid values and the start is aligned for it.
            let table = unsafe { core::slice::from_raw_parts(span.start as *const u16, 1 << 24) };
            assert!(table.iter().all(|&e| e == 0), "advised after the first write");
            ADVISED.fetch_add(1, Relaxed);
        }
        let f = Fib::build_advised(&[(p("10.0.0.0/8"), NhIndex(1))], check).unwrap();
        assert_eq!(ADVISED.load(Relaxed), 1);
        assert_eq!(f.lookup(ip("10.1.2.3")), Some(NhIndex(1)));
    }

    #[test]
    fn repainting_each_change_gives_the_table_a_full_build_gives() {
        use std::collections::BTreeMap;
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut routes: BTreeMap<Prefix, NhIndex> = BTreeMap::new();
        let mut f = Fib::build(&[]).unwrap();
        for step in 0..2000 {
            let len = [8, 16, 20, 23, 24, 24, 25, 26, 28, 30, 31, 32][(next() % 12) as usize];
            let addr = Ipv4Addr::from(0x0a0a_0000 | (next() as u32 & 0x0003_ffff));
            // The default route comes and goes once (a whole-table repaint).
            let p = if step == 700 || step == 1400 { Prefix::truncate(addr, 0) } else { Prefix::truncate(addr, len) };
            if step == 1400 || (step != 700 && next() % 3 == 0) {
                routes.remove(&p);
            } else {
                routes.insert(p, NhIndex((next() % 500 + 1) as u16));
            }
            f.repaint(p, &routes, |v| *v).unwrap();
            if step % 250 == 249 {
                let list: Vec<(Prefix, NhIndex)> = routes.iter().map(|(p, v)| (*p, *v)).collect();
                let full = Fib::build(&list).unwrap();
                for _ in 0..20_000 {
                    let a = Ipv4Addr::from(0x0a0a_0000 | (next() as u32 & 0x0003_ffff));
                    assert_eq!(f.lookup(a), full.lookup(a), "{a} after {step} changes");
                }
                for p in routes.keys() {
                    for a in [p.addr(), p.broadcast()] {
                        assert_eq!(f.lookup(a), full.lookup(a), "{a} at the edge of {p}");
                    }
                }
                // Groups are reused, not leaked: no more than the /24s with longer prefixes.
                let used = routes
                    .keys()
                    .filter(|p| p.prefix_len() > 24)
                    .map(|p| p.addr | 0xff)
                    .collect::<std::collections::HashSet<_>>()
                    .len();
                assert!(
                    f.groups_used() - f.free_groups.len() == used,
                    "{} groups, {} free, {used} needed",
                    f.groups_used(),
                    f.free_groups.len()
                );
            }
        }
    }

    #[test]
    fn next_hop_indices_are_bounded() {
        assert!(Fib::build(&[(p("10.0.0.0/8"), NhIndex(0))]).is_err());
        assert!(Fib::build(&[(p("10.0.0.0/8"), NhIndex(0x8000))]).is_err());
    }

    /// Memory lent as the XDP path's map lends it, here from the heap, holding garbage.
    struct Borrowed(Vec<u16>, Vec<u16>);

    impl Lent for Borrowed {
        fn tables(&mut self) -> (&mut [u16], &mut [u16]) {
            (&mut self.0, &mut self.1)
        }
    }

    fn borrowed(groups: usize) -> Box<dyn Lent> {
        Box::new(Borrowed(vec![0xffff; FLAT], vec![0xffff; groups * GROUP_LEN]))
    }

    #[test]
    fn a_table_in_lent_memory_answers_as_one_in_its_own_through_every_repaint() {
        use std::collections::BTreeMap;
        let mut next = xorshift(0x51_7cc1_b727_220au64);
        let mut routes: BTreeMap<Prefix, NhIndex> = BTreeMap::new();
        for _ in 0..400 {
            let len = [0, 8, 16, 20, 24, 24, 25, 28, 32][(next() % 9) as usize];
            let addr = Ipv4Addr::from(0xc612_0000 | (next() as u32 & 0x0001_ffff));
            routes.insert(Prefix::truncate(addr, len), NhIndex((next() % 300 + 1) as u16));
        }
        let list: Vec<(Prefix, NhIndex)> = routes.iter().map(|(p, v)| (*p, *v)).collect();
        let mut own = Fib::build(&list).unwrap();
        let mut lent = Fib::build_lent(&list, borrowed(1024)).unwrap();
        assert!(lent.is_lent() && !own.is_lent());
        assert_eq!(lent.memory(), (FLAT + 1024 * GROUP_LEN) * 2);
        for step in 0..600 {
            let len = [16, 24, 25, 26, 30, 32][(next() % 6) as usize];
            let p = Prefix::truncate(Ipv4Addr::from(0xc612_0000 | (next() as u32 & 0x0001_ffff)), len);
            if next() % 3 == 0 {
                routes.remove(&p);
            } else {
                routes.insert(p, NhIndex((next() % 300 + 1) as u16));
            }
            own.repaint(p, &routes, |v| *v).unwrap();
            lent.repaint(p, &routes, |v| *v).unwrap();
            if step % 100 == 99 {
                for _ in 0..20_000 {
                    let a = Ipv4Addr::from(0xc612_0000 | (next() as u32 & 0x0001_ffff));
                    assert_eq!(lent.lookup(a), own.lookup(a), "{a} after {step} changes");
                }
                assert_eq!(lent.lookup(ip("1.2.3.4")), own.lookup(ip("1.2.3.4")));
                assert_eq!(lent.groups_used(), own.groups_used());
            }
        }
        // A copy leaves the lent memory: the allocator's, the same answers.
        let copy = lent.clone();
        assert!(!copy.is_lent());
        assert_eq!(copy.lookup(ip("198.18.1.1")), lent.lookup(ip("198.18.1.1")));
    }

    #[test]
    fn a_lent_copy_follows_its_source_prefix_by_prefix_without_routes() {
        use std::collections::BTreeMap;
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut routes: BTreeMap<Prefix, NhIndex> = BTreeMap::new();
        let random_prefix = |next: &mut dyn FnMut() -> u64, lens: &[u8]| {
            let len = lens[(next() % lens.len() as u64) as usize];
            Prefix::truncate(Ipv4Addr::from(0xc612_0000 | (next() as u32 & 0x0001_ffff)), len)
        };
        for _ in 0..300 {
            let p = random_prefix(&mut next, &[0, 8, 16, 20, 24, 25, 28, 32]);
            routes.insert(p, NhIndex((next() % 300 + 1) as u16));
        }
        let list: Vec<(Prefix, NhIndex)> = routes.iter().map(|(p, v)| (*p, *v)).collect();
        let mut src = Fib::build(&list).unwrap();
        let mut copy = src.copy_lent(borrowed(1024)).unwrap();
        assert!(copy.is_lent());
        assert_eq!((copy.groups_used(), copy.routes()), (src.groups_used(), src.routes()));
        // The source changes in batches; the copy is told only which prefixes changed, and
        // takes the entries under them from the source (its groups numbered its own way once
        // they fold and come back).
        for batch in 0..60 {
            let mut changed = Vec::new();
            for _ in 0..10 {
                let p = random_prefix(&mut next, &[8, 16, 23, 24, 25, 26, 30, 32]);
                if next() % 3 == 0 {
                    routes.remove(&p);
                } else {
                    routes.insert(p, NhIndex((next() % 300 + 1) as u16));
                }
                src.repaint(p, &routes, |v| *v).unwrap();
                changed.push(p);
            }
            for p in &changed {
                copy.repaint_from(*p, &src).unwrap();
            }
            for _ in 0..5_000 {
                let a = Ipv4Addr::from(0xc612_0000 | (next() as u32 & 0x0001_ffff));
                assert_eq!(copy.lookup(a), src.lookup(a), "{a} after batch {batch}");
            }
            assert_eq!(copy.lookup(ip("1.2.3.4")), src.lookup(ip("1.2.3.4")));
        }
        // Every entry agrees, not just those looked up.
        for a in (0xc612_0000u32..0xc614_0000).map(Ipv4Addr::from) {
            assert_eq!(copy.lookup(a), src.lookup(a), "{a}");
        }
        // A source with more groups than the memory's room: refused whole.
        assert_eq!(src.copy_lent(borrowed(1)).unwrap_err(), FibError::NoRoomForGroups(1));
    }

    #[test]
    fn lent_memory_with_no_room_for_another_group_says_so() {
        let routes =
            [(p("198.18.0.0/25"), NhIndex(1)), (p("198.18.1.0/25"), NhIndex(1)), (p("198.18.2.0/25"), NhIndex(1))];
        assert!(Fib::build_lent(&routes[..2], borrowed(2)).is_ok());
        assert_eq!(Fib::build_lent(&routes, borrowed(2)).unwrap_err(), FibError::NoRoomForGroups(2));
    }
}
