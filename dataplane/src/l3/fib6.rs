//! Longest-prefix match over IPv6 routes.
//!
//! # Structure: a 22-bit direct table over a popcount-compressed multibit trie
//!
//! The IPv4 table's trick (one flat array indexed by most of the address) does not carry
//! over: a full IPv6 table is mostly /32 to /48 prefixes, so a flat level deep enough to
//! resolve them would be 2^48 entries. The structure here is:
//!
//! - a **direct table** of 2^22 32-bit entries indexed by the top 22 bits (16 MiB; pages no
//!   route touches are never written, so a small table costs little), each either a next hop
//!   or the root of a trie;
//! - **trie nodes with a stride of six bits**: 22 + 7 × 6 = 64, so no level straddles the two
//!   64-bit halves of an address and a level's index is one shift of one of them (the last
//!   level, at bit 124, takes the last four bits). A node is 24 bytes padded to 32 (so that none
//!   straddles two cache lines: measured, 11 against 16 M cold lookups/s): a 64-bit bitmap of
//!   which of its 64 children are nodes, a 64-bit bitmap of where runs of equal leaves begin,
//!   and the indices of its first child node and first leaf. Children of a node are contiguous,
//!   so a child's index is the first one's plus a population count of the bits below it; runs
//!   of equal next hops are stored once, so a prefix expanded over 32 slots costs one leaf.
//!   (This is the layout published as Poptrie; the code is written for this table.)
//! - **leaves** of 16 bits, the next-hop index (0: no route), as in the IPv4 table.
//!
//! A /32 resolves in two node reads after the direct table, a /48 in five, a /64 in seven.
//! The reads are dependent, so a batch lookup ([`Fib6::lookup_batch`]) walks the keys of a
//! batch one level at a time and prefetches each key's next node (and its leaf) a pass before
//! it is read: a cold batch waits for memory about once per level, not once per level per key.
//! Measured (`fib6` bench, one core of the 2-vCPU test machine, 1M prefixes): about 4× the
//! cold rate of one lookup after another; still several times slower than the IPv4 table,
//! which reads one entry — the price of IPv6's long prefixes.
//!
//! The choices not taken: a binary trie (128 dependent reads), a hash table per prefix length
//! with a binary search over lengths (seven probes, each a likely cache miss, and markers to
//! maintain), and a range table with binary search (20 dependent reads for a million ranges).
//! Updates rebuild the table, as for IPv4: a million prefixes build in well under the two
//! seconds a reload may take (see the `fib6` bench).

use core::fmt;
use core::net::Ipv6Addr;

use super::fib::{no_advice, span, Advice, FibError, NhIndex};
pub use super::prefix::{Prefix6, Prefix6Error};

/// Bits resolved by the direct table.
const DIRECT_BITS: u32 = 22;
/// Bits resolved per trie level.
const STRIDE: u32 = 6;
/// A direct-table entry that names a node rather than a next hop.
const NODE: u32 = 1 << 31;
/// Next-hop indices an entry can hold (as for IPv4: 15 bits).
const MAX_INDEX: usize = 0x7fff;
/// Node indices a direct entry can hold.
const MAX_NODES: usize = (NODE - 1) as usize;

/// One trie level: which of the 64 children are nodes, where runs of equal leaves start, and
/// the indices of the first child node and the first leaf.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct Node {
    nodes: u64,
    runs: u64,
    first_node: u32,
    first_leaf: u32,
}

/// The six bits of `key` that the level starting at bit `off` resolves (past bit 127: zeros).
#[inline(always)]
fn slot(key: u128, off: u32) -> u32 {
    ((key << off) >> (128 - STRIDE)) as u32
}

/// [`slot`] from the half of the key that holds the level: `hi` for levels below bit 64.
#[inline(always)]
fn slot64(half: u64, off: u32) -> u32 {
    ((half << (off & 63)) >> (64 - STRIDE)) as u32
}

/// The node that stands for "no node": no children, no runs, its leaf the unused leaf 0.
const SENTINEL: Node = Node { nodes: 0, runs: 0, first_node: 0, first_leaf: 1 };

impl Node {
    /// The child node's index if slot `i` is a node.
    #[inline(always)]
    fn child(&self, i: u32) -> Option<u32> {
        (self.nodes >> i & 1 == 1).then(|| self.first_node + (self.nodes & ((1u64 << i) - 1)).count_ones())
    }

    /// The leaf index of slot `i`, which must not be a node.
    #[inline(always)]
    fn leaf(&self, i: u32) -> u32 {
        self.first_leaf + (self.runs & (u64::MAX >> (63 - i))).count_ones() - 1
    }
}

/// An IPv6 longest-prefix-match table (see the module documentation).
pub struct Fib6 {
    direct: Box<[u32]>,
    nodes: Vec<Node>,
    leaves: Vec<u16>,
    routes: usize,
}

impl fmt::Debug for Fib6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fib6")
            .field("routes", &self.routes)
            .field("nodes", &self.nodes.len())
            .field("leaves", &self.leaves.len())
            .finish()
    }
}

/// Builder state: routes sorted by address, then length, duplicates resolved.
struct Build<'a> {
    routes: &'a [(u128, u8, u16)],
    nodes: Vec<Node>,
    leaves: Vec<u16>,
}

impl Build<'_> {
    /// Fills node `at` for the level starting at bit `off` from `routes` (all inside the node's
    /// range and longer than `off`), under `inherited` (the next hop of the longest shorter
    /// prefix covering the whole node).
    fn node(&mut self, at: usize, off: u32, routes: core::ops::Range<usize>, inherited: u16) -> Result<(), FibError> {
        let end = off + STRIDE;
        let mut slots = [inherited; 64];
        // Prefixes ending inside this level, shorter first so longer ones overwrite them.
        let mut short: Vec<usize> = routes.clone().filter(|&i| u32::from(self.routes[i].1) <= end).collect();
        short.sort_by_key(|&i| self.routes[i].1);
        for i in short {
            let (addr, len, nh) = self.routes[i];
            let first = slot(addr, off) as usize;
            let count = 1usize << (end - u32::from(len));
            slots[first..first + count].fill(nh);
        }
        // Prefixes longer than this level, grouped by the slot they fall in (they are sorted by
        // address, so each group is contiguous).
        let mut groups: [(usize, usize); 64] = [(0, 0); 64];
        let mut nodes = 0u64;
        for i in routes {
            let (addr, len, _) = self.routes[i];
            if u32::from(len) > end {
                let s = slot(addr, off) as usize;
                if nodes >> s & 1 == 0 {
                    groups[s] = (i, i);
                    nodes |= 1 << s;
                }
                groups[s].1 = i + 1;
            }
        }
        let first_node = self.nodes.len();
        if first_node + nodes.count_ones() as usize > MAX_NODES {
            return Err(FibError::TooManyNodes);
        }
        self.nodes.resize(first_node + nodes.count_ones() as usize, Node::default());
        let first_leaf = self.leaves.len();
        let mut runs = 0u64;
        let mut last = None;
        for (s, &nh) in slots.iter().enumerate() {
            if nodes >> s & 1 == 0 && last != Some(nh) {
                runs |= 1 << s;
                self.leaves.push(nh);
                last = Some(nh);
            }
        }
        self.nodes[at] = Node {
            nodes,
            runs,
            first_node: first_node as u32,
            first_leaf: u32::try_from(first_leaf).unwrap_or(u32::MAX),
        };
        let mut child = first_node;
        for (s, &(lo, hi)) in groups.iter().enumerate() {
            if nodes >> s & 1 == 1 {
                self.node(child, end, lo..hi, slots[s])?;
                child += 1;
            }
        }
        Ok(())
    }
}

impl Fib6 {
    /// Builds the table from `(prefix, next hop index)` pairs; for a prefix given twice the
    /// last one wins. Indices must be 1..=32767. The memory is the allocator's ([`no_advice`]).
    pub fn build(routes: &[(Prefix6, NhIndex)]) -> Result<Fib6, FibError> {
        Fib6::build_advised(routes, no_advice)
    }

    /// [`Fib6::build`], with `advise` run on the direct table, the nodes and the leaves before
    /// each is first written (a lookup reads several nodes far apart: without huge pages each
    /// read would also miss the TLB).
    pub fn build_advised(routes: &[(Prefix6, NhIndex)], advise: Advice) -> Result<Fib6, FibError> {
        if let Some((_, nh)) = routes.iter().find(|(_, nh)| nh.0 == 0 || usize::from(nh.0) > MAX_INDEX) {
            return Err(FibError::TooManyNextHops(usize::from(nh.0)));
        }
        // Sorted by address then length; of duplicates the last given is kept.
        let mut sorted: Vec<(u128, u8, u16)> = routes.iter().map(|(p, nh)| (p.addr, p.len, nh.0)).collect();
        let mut order: Vec<u32> = (0..sorted.len() as u32).collect();
        order.sort_by_key(|&i| (sorted[i as usize].0, sorted[i as usize].1));
        let mut dedup: Vec<(u128, u8, u16)> = Vec::with_capacity(sorted.len());
        for &i in &order {
            let r = sorted[i as usize];
            match dedup.last_mut() {
                Some(last) if (last.0, last.1) == (r.0, r.1) => *last = r,
                _ => dedup.push(r),
            }
        }
        sorted = dedup;

        let mut direct = vec![0u32; 1 << DIRECT_BITS].into_boxed_slice();
        advise(span(&direct));
        let top = |a: u128| (a >> (128 - DIRECT_BITS)) as usize;
        let mut short: Vec<usize> = (0..sorted.len()).filter(|&i| u32::from(sorted[i].1) <= DIRECT_BITS).collect();
        short.sort_by_key(|&i| sorted[i].1);
        for i in short {
            let (addr, len, nh) = sorted[i];
            let first = top(addr);
            direct[first..first + (1usize << (DIRECT_BITS - u32::from(len)))].fill(u32::from(nh));
        }
        // Room for every node the build can make, so that the nodes are never moved (and stay
        // where they were advised): each node lies on the path of a prefix longer than the
        // direct table, which passes one node per six bits. Pages never written are never
        // backed.
        let bound = 1 + sorted
            .iter()
            .map(|r| (u32::from(r.1).saturating_sub(DIRECT_BITS)).div_ceil(STRIDE) as usize)
            .sum::<usize>();
        let mut nodes = Vec::with_capacity(bound);
        advise(span(nodes.spare_capacity_mut()));
        // Node 0 is the sentinel, leaf 0 the one it names.
        nodes.push(SENTINEL);
        let mut b = Build { routes: &sorted, nodes, leaves: vec![0] };
        let mut i = 0;
        while i < sorted.len() {
            if u32::from(sorted[i].1) <= DIRECT_BITS {
                i += 1;
                continue;
            }
            let t = top(sorted[i].0);
            let mut j = i;
            while j < sorted.len() && top(sorted[j].0) == t {
                j += 1;
            }
            // Routes of this slot longer than /22 (a /22 or shorter with the same top bits
            // sorts before them and was applied above).
            let lo = (i..j).find(|&k| u32::from(sorted[k].1) > DIRECT_BITS).unwrap_or(j);
            let at = b.nodes.len();
            if at >= MAX_NODES {
                return Err(FibError::TooManyNodes);
            }
            b.nodes.push(Node::default());
            let inherited = direct[t] as u16;
            b.node(at, DIRECT_BITS, lo..j, inherited)?;
            direct[t] = NODE | at as u32;
            i = j;
        }
        if b.leaves.len() > u32::MAX as usize {
            return Err(FibError::TooManyNodes);
        }
        let Build { nodes, leaves: built, .. } = b;
        debug_assert!(nodes.len() <= bound, "the node bound holds");
        // The leaves' final size is known only now: copied once into memory advised first.
        let mut leaves = Vec::with_capacity(built.len());
        advise(span(leaves.spare_capacity_mut()));
        leaves.extend_from_slice(&built);
        Ok(Fib6 { direct, nodes, leaves, routes: routes.len() })
    }

    /// The next hop of the longest prefix containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: Ipv6Addr) -> Option<NhIndex> {
        let key = u128::from(addr);
        let (hi, lo) = ((key >> 64) as u64, key as u64);
        let e = self.direct[(hi >> (64 - DIRECT_BITS)) as usize];
        let nh = if e & NODE == 0 {
            e as u16
        } else {
            let mut n = &self.nodes[(e & !NODE) as usize];
            let mut off = DIRECT_BITS;
            loop {
                let s = slot64(if off < 64 { hi } else { lo }, off);
                match n.child(s) {
                    Some(c) => {
                        n = &self.nodes[c as usize];
                        off += STRIDE;
                    }
                    None => break self.leaves[n.leaf(s) as usize],
                }
            }
        };
        (nh != 0).then_some(NhIndex(nh))
    }

    /// Looks up every address of `addrs` into `out` (same length): the same answers as
    /// [`Fib6::lookup`], computed a level at a time across the batch. Each pass walks only the
    /// lanes still unresolved (a compacted list, so one deep host route does not make every
    /// lane walk its depth) and prefetches each lane's next node a whole pass before it is
    /// read. (Computing both outcomes of a level and keeping one, without a branch, was
    /// measured slower on hot keys.)
    pub fn lookup_batch(&self, addrs: &[Ipv6Addr], out: &mut [Option<NhIndex>]) {
        const LANES: usize = 64;
        assert_eq!(addrs.len(), out.len(), "one answer per address");
        for (addrs, out) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let n = addrs.len();
            let mut hi = [0u64; LANES];
            let mut lo = [0u64; LANES];
            // Per lane: the node to read next, the answer from the direct table or the leaf
            // that holds it; the lanes still unresolved.
            let mut at = [0u32; LANES];
            let mut res = [0u16; LANES];
            let mut leaf = [0u32; LANES];
            let mut live = [0u8; LANES];
            for l in 0..n {
                let key = u128::from(addrs[l]);
                (hi[l], lo[l]) = ((key >> 64) as u64, key as u64);
                crate::prefetch::read(&self.direct[(hi[l] >> (64 - DIRECT_BITS)) as usize]);
            }
            let mut count = 0;
            for l in 0..n {
                let e = self.direct[(hi[l] >> (64 - DIRECT_BITS)) as usize];
                let node = e & NODE != 0;
                res[l] = if node { 0 } else { e as u16 };
                at[l] = if node { e & !NODE } else { 0 };
                crate::prefetch::read(&self.nodes[at[l] as usize]);
                live[count] = l as u8;
                count += usize::from(node);
            }
            let mut off = DIRECT_BITS;
            while count > 0 {
                let half = if off < 64 { &hi } else { &lo };
                let mut next = 0;
                for i in 0..count {
                    let l = usize::from(live[i]);
                    let node = &self.nodes[at[l] as usize];
                    let s = slot64(half[l], off);
                    let is_node = node.nodes >> s & 1 == 1;
                    // The leaf is read after the last pass, prefetched now: reading it here
                    // would wait for memory twice in a row at the last level.
                    let li = if is_node { 0 } else { node.leaf(s) };
                    leaf[l] = if is_node { leaf[l] } else { li };
                    crate::prefetch::read(&self.leaves[li as usize]);
                    at[l] = if is_node { node.first_node + (node.nodes & ((1u64 << s) - 1)).count_ones() } else { 0 };
                    crate::prefetch::read(&self.nodes[at[l] as usize]);
                    live[next] = l as u8;
                    next += usize::from(is_node);
                }
                count = next;
                off += STRIDE;
            }
            for l in 0..n {
                // Leaf 0 is never an answer: a lane that stopped at the direct table has its own.
                let nh = if leaf[l] != 0 { self.leaves[leaf[l] as usize] } else { res[l] };
                out[l] = (nh != 0).then_some(NhIndex(nh));
            }
        }
    }

    /// Prefetches the direct entry for `addr` (a hint; no effect on results).
    #[inline]
    pub fn prefetch(&self, addr: Ipv6Addr) {
        crate::prefetch::read(&self.direct[(u128::from(addr) >> (128 - DIRECT_BITS)) as usize]);
    }

    /// Number of routes it was built from.
    pub fn routes(&self) -> usize {
        self.routes
    }

    /// Bytes of table memory written: the direct table whole (although its pages no route
    /// touched are never backed), the nodes and leaves made (the nodes' room for more is
    /// never written, so never backed).
    pub fn memory(&self) -> usize {
        self.direct.len() * 4 + self.nodes.len() * core::mem::size_of::<Node>() + self.leaves.len() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix6 {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins_at_every_length() {
        // One prefix of every length along the same address, each with its own next hop: an
        // address that agrees with it for exactly k bits matches the /k route.
        let base = ip("2001:db8:89ab:cdef:0123:4567:89ab:cdef");
        let routes: Vec<(Prefix6, NhIndex)> =
            (0..=128u8).map(|l| (Prefix6::truncate(base, l), NhIndex(u16::from(l) + 1))).collect();
        let fib = Fib6::build(&routes).unwrap();
        assert_eq!(fib.lookup(base), Some(NhIndex(129)));
        for k in 0..128u32 {
            // Flip bit k (from the top): the longest matching prefix is /k.
            let a = Ipv6Addr::from(u128::from(base) ^ (1u128 << (127 - k)));
            assert_eq!(fib.lookup(a), Some(NhIndex(k as u16 + 1)), "bit {k} flipped");
        }
    }

    #[test]
    fn no_route_is_none_and_a_later_duplicate_wins() {
        let fib = Fib6::build(&[(p("2001:db8::/32"), NhIndex(1)), (p("2001:db8::/32"), NhIndex(2))]).unwrap();
        assert_eq!(fib.lookup(ip("2001:db8::1")), Some(NhIndex(2)));
        assert_eq!(fib.lookup(ip("2001:db9::1")), None);
        assert_eq!(fib.lookup(ip("::1")), None);
        let empty = Fib6::build(&[]).unwrap();
        assert_eq!(empty.lookup(ip("2001:db8::1")), None);
    }

    #[test]
    fn next_hop_indices_are_bounded() {
        assert_eq!(Fib6::build(&[(p("::/0"), NhIndex(0))]).unwrap_err(), FibError::TooManyNextHops(0));
        assert_eq!(Fib6::build(&[(p("::/0"), NhIndex(0x8000))]).unwrap_err(), FibError::TooManyNextHops(0x8000));
        assert!(Fib6::build(&[(p("::/0"), NhIndex(0x7fff))]).is_ok());
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn addr(&mut self) -> u128 {
            (u128::from(self.next()) << 64) | u128::from(self.next())
        }
    }

    /// The longest prefix containing `a`, by scanning every route (the last duplicate wins).
    fn oracle(routes: &[(Prefix6, NhIndex)], a: Ipv6Addr) -> Option<NhIndex> {
        let mut best: Option<(u8, NhIndex)> = None;
        for (p, nh) in routes {
            if p.contains(a) && best.is_none_or(|(l, _)| p.len >= l) {
                best = Some((p.len, *nh));
            }
        }
        best.map(|(_, nh)| nh)
    }

    #[test]
    fn matches_a_naive_oracle_on_random_tables() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for round in 0..40 {
            // Prefixes clustered under a few random /8s-/24s so that they nest and collide, of
            // every length, some duplicated with another next hop.
            let roots: Vec<u128> = (0..4).map(|_| rng.addr()).collect();
            let n = 1 + (rng.next() % 200) as usize;
            let mut routes: Vec<(Prefix6, NhIndex)> = Vec::new();
            for _ in 0..n {
                let root = roots[(rng.next() % 4) as usize];
                let shared = (rng.next() % 40) as u32;
                let a = (root & !(u128::MAX >> shared)) | (rng.addr() & (u128::MAX >> shared));
                let len = match rng.next() % 10 {
                    0 => (rng.next() % 21) as u8,
                    1..=6 => 24 + (rng.next() % 41) as u8,
                    _ => (rng.next() % 129) as u8,
                };
                let nh = NhIndex(1 + (rng.next() % 50) as u16);
                routes.push((Prefix6::truncate(Ipv6Addr::from(a), len), nh));
                if rng.next() % 10 == 0 {
                    routes.push((Prefix6::truncate(Ipv6Addr::from(a), len), NhIndex(nh.0 + 1)));
                }
            }
            let fib = Fib6::build(&routes).unwrap();
            let mut probes: Vec<Ipv6Addr> = Vec::new();
            for (p, _) in &routes {
                // Inside each prefix, at its edges, and just past them.
                let lo = u128::from(p.addr());
                let hi = lo | !p.mask();
                for a in [lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1), lo | (rng.addr() & !p.mask())] {
                    probes.push(Ipv6Addr::from(a));
                }
            }
            probes.extend((0..200).map(|_| Ipv6Addr::from(rng.addr())));
            let mut batch = vec![None; probes.len()];
            fib.lookup_batch(&probes, &mut batch);
            for (a, b) in probes.iter().zip(&batch) {
                let want = oracle(&routes, *a);
                assert_eq!(fib.lookup(*a), want, "round {round}: {a} in {routes:?}");
                assert_eq!(*b, want, "round {round}, batch: {a}");
            }
        }
    }
}
