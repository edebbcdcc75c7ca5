//! The neighbour table: (port, IP address) → MAC address, shared by all workers, written by one
//! thread. One type for both families ([`NeighborTable`] for IPv4, [`NeighborTable6`] for
//! IPv6); a slot holds a key of up to 128 bits. As the kernel's, the table keeps a neighbour
//! per port: the same address on two ports is two entries, and a lookup names the port the
//! route leaves by, so that a host on one port claiming a gateway's address (a spoofed ARP
//! request the kernel answers by making an entry on that port) cannot move the gateway off its
//! own. An IPv6 link-local address names a neighbour only together with its link ([`Key6`]
//! carries the port).
//!
//! # Structure, and the choices not taken
//!
//! Workers look neighbours up on every forwarded packet; only the ARP thread
//! ([`crate::resolve::thread`]) changes entries, a few times per second at most. That asymmetry decides
//! the design: buckets of eight slots (two candidate buckets per address, as in the FDB), each
//! slot a **seqlock** of four words (sequence, address in two, MAC + flags). The single writer bumps
//! the sequence to odd, writes, bumps it to even; a reader retries if it saw an odd or changed
//! sequence. Readers never write shared memory; the writer never waits. An address and its MAC
//! do not fit one 64-bit word, so the FDB's single-word slots cannot serve here: a reader could
//! pair one entry's address with another's MAC.
//!
//! Timers (reachable time, probes, expiry) live in the writer's own bookkeeping, not here.
//! Capacity is fixed at start (`limits.neighbors`): when both buckets of an address are full the
//! insertion is refused and the address stays unresolved, which bounds memory under an ARP flood.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use crate::keyed::{self, Key};
use crate::wire::MacAddr;
use crate::PortId;

const WAYS: usize = 8;
const VALID: u64 = 1 << 63;
const STATIC: u64 = 1 << 62;
const MAC_MASK: u64 = (1 << 48) - 1;
const PORT_SHIFT: u32 = 48;

#[derive(Default)]
struct Slot {
    seq: AtomicU32,
    ip: [AtomicU64; 2],
    val: AtomicU64,
}

/// An address family's addresses as neighbour table keys.
pub trait NeighborAddr: Copy + Ord + core::fmt::Debug {
    /// The address as 128 bits (an IPv4 address in the low 32).
    fn key(self) -> u128;
    /// The port the key is bound to, where the address alone does not name a neighbour.
    fn scope(self) -> Option<PortId> {
        None
    }
    /// The key of an entry holding address `k`, resolved on `port`.
    fn from_key(k: u128, port: PortId) -> Self;
}

impl NeighborAddr for Ipv4Addr {
    #[inline]
    fn key(self) -> u128 {
        u128::from(u32::from(self))
    }
    fn from_key(k: u128, _port: PortId) -> Self {
        Ipv4Addr::from(k as u32)
    }
}

/// The IPv6 neighbour table's key: an address, and for a link-local one the port it is on
/// (fe80::1 on eth4 and fe80::1 on eth5 are two routers). The address is kept whole: Linux
/// accepts link-local addresses whose bits 10–63 are not zero (`fe80:3::23`), and those name
/// other neighbours than `fe80::23`. Made by [`scope6`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key6 {
    /// The address.
    pub addr: Ipv6Addr,
    /// Its port, for a link-local address; `None` for the others, which name one neighbour
    /// wherever it is.
    pub port: Option<PortId>,
}

impl Key6 {
    /// The key of a global (not link-local) address, which names one neighbour wherever it is.
    pub fn global(addr: Ipv6Addr) -> Key6 {
        debug_assert!(!is_link_local6(&addr), "{addr} is link-local: use scope6");
        Key6 { addr, port: None }
    }
}

impl NeighborAddr for Key6 {
    #[inline]
    fn key(self) -> u128 {
        u128::from(self.addr)
    }
    #[inline]
    fn scope(self) -> Option<PortId> {
        self.port
    }
    fn from_key(k: u128, port: PortId) -> Self {
        scope6(Ipv6Addr::from(k), port)
    }
}

/// A resolved neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbor<A = Ipv4Addr> {
    /// Its address.
    pub ip: A,
    /// Its MAC address.
    pub mac: MacAddr,
    /// The port it was resolved on.
    pub port: PortId,
    /// Configured, never expires.
    pub is_static: bool,
}

/// Why an entry could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("neighbour table full")]
pub struct TableFull;

/// The shared neighbour table (see the module documentation).
pub struct NeighborTable<A = Ipv4Addr> {
    slots: Box<[Slot]>,
    nbuckets: usize,
    /// Bumped by the writer after every change: a reader's cached answers are valid while it
    /// stays the same.
    generation: AtomicU64,
    family: PhantomData<A>,
    /// The placement's secret ([`crate::keyed`]).
    key: Key,
}

/// The IPv6 neighbour table.
pub type NeighborTable6 = NeighborTable<Key6>;

impl<A> std::fmt::Debug for NeighborTable<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NeighborTable").field("capacity", &self.slots.len()).finish()
    }
}

/// A slot's key, word by word (consistent only inside the seqlock's read).
#[inline]
fn load_key(k: &[AtomicU64; 2]) -> u128 {
    (u128::from(k[0].load(Ordering::Relaxed)) << 64) | u128::from(k[1].load(Ordering::Relaxed))
}

impl NeighborTable {
    /// An IPv4 table for at least `capacity` entries (rounded up to whole 8-slot buckets).
    pub fn new(capacity: usize) -> NeighborTable {
        NeighborTable::with_capacity(capacity)
    }
}

impl NeighborTable6 {
    /// An IPv6 table for at least `capacity` entries (rounded up to whole 8-slot buckets).
    pub fn new6(capacity: usize) -> NeighborTable6 {
        NeighborTable::with_capacity(capacity)
    }
}

impl<A: NeighborAddr> NeighborTable<A> {
    /// A table for at least `capacity` entries (rounded up to whole 8-slot buckets), its
    /// placement keyed by a fresh secret ([`crate::keyed`]: a known placement lets 16 chosen
    /// addresses keep a gateway out on a large subnet).
    pub fn with_capacity(capacity: usize) -> NeighborTable<A> {
        NeighborTable::with_key(capacity, Key::random())
    }

    /// [`NeighborTable::with_capacity`] with a given secret: one placement every time.
    pub fn with_key(capacity: usize, key: Key) -> NeighborTable<A> {
        let nbuckets = capacity.div_ceil(WAYS).max(1);
        NeighborTable {
            slots: (0..nbuckets * WAYS).map(|_| Slot::default()).collect(),
            nbuckets,
            generation: AtomicU64::new(0),
            family: PhantomData,
            key,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The candidate buckets of `ip` on `port`: placed by address and port together, so that
    /// a host claiming an address on other ports fills other buckets than the address's own
    /// neighbour's (the address alone would let one claim per port take that neighbour's
    /// slots).
    #[inline]
    fn buckets_of(&self, ip: u128, port: PortId) -> [usize; 2] {
        let h = keyed::hash128(ip ^ (u128::from(port.0) << 120), self.key);
        let n = self.nbuckets as u64;
        [(((h >> 32) * n) >> 32) as usize, (((h & 0xffff_ffff) * n) >> 32) as usize]
    }

    /// Reads one slot consistently: `(ip, val)`, retrying while the writer is inside it.
    #[inline]
    fn read(&self, i: usize) -> (u128, u64) {
        let s = &self.slots[i];
        loop {
            let s1 = s.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let ip = load_key(&s.ip);
            let val = s.val.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if s.seq.load(Ordering::Relaxed) == s1 {
                return (ip, val);
            }
        }
    }

    /// Writes one slot. Only the single writer may call this.
    fn write(&self, i: usize, ip: u128, val: u64) {
        let s = &self.slots[i];
        let seq = s.seq.load(Ordering::Relaxed);
        s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        s.ip[0].store((ip >> 64) as u64, Ordering::Relaxed);
        s.ip[1].store(ip as u64, Ordering::Relaxed);
        s.val.store(val, Ordering::Relaxed);
        s.seq.store(seq.wrapping_add(2), Ordering::Release);
        // Single writer: a load and a store, no read-modify-write needed.
        self.generation.store(self.generation.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
    }

    /// The table's generation: it changes after every write.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn decode(ip: u128, val: u64) -> Neighbor<A> {
        let port = PortId(((val >> PORT_SHIFT) & 0xff) as u8);
        Neighbor {
            ip: A::from_key(ip, port),
            mac: MacAddr::from_u64(val & MAC_MASK),
            port,
            is_static: val & STATIC != 0,
        }
    }

    /// The slot holding `ip` on `port` and its value.
    fn find(&self, ip: u128, port: PortId) -> Option<(usize, u64)> {
        for b in self.buckets_of(ip, port) {
            for i in b * WAYS..(b + 1) * WAYS {
                // A plain look at the address first: only a slot that seems to hold `ip` pays
                // for the consistent read, which then decides (callgrind: the seqlock read on
                // every slot was 40 % of the router decision's instructions).
                if load_key(&self.slots[i].ip) != ip {
                    continue;
                }
                let (sip, val) = self.read(i);
                if val & VALID != 0 && sip == ip && (val >> PORT_SHIFT) & 0xff == u64::from(port.0) {
                    return Some((i, val));
                }
            }
        }
        None
    }

    /// The neighbour `ip` on `port`, if resolved there (a key bound to a port is looked up on
    /// its own).
    #[inline]
    pub fn lookup(&self, ip: A, port: PortId) -> Option<Neighbor<A>> {
        let key = ip.key();
        self.find(key, ip.scope().unwrap_or(port)).map(|(_, val)| Self::decode(key, val))
    }

    /// Stores or updates `ip` → `mac` on `port` (a key bound to a port is stored on that
    /// port); the same address on other ports is left as it is. A static entry is only
    /// replaced by another static one. Only the single writer (the ARP thread, or set-up before
    /// workers start) may call this.
    pub fn insert(&self, ip: A, mac: MacAddr, port: PortId, is_static: bool) -> Result<(), TableFull> {
        let key = ip.key();
        let port = ip.scope().unwrap_or(port);
        let val = VALID | if is_static { STATIC } else { 0 } | (u64::from(port.0) << PORT_SHIFT) | mac.to_u64();
        if let Some((i, old)) = self.find(key, port) {
            if old & STATIC != 0 && !is_static {
                return Ok(());
            }
            if old != val {
                self.write(i, key, val);
            }
            return Ok(());
        }
        let [b0, b1] = self.buckets_of(key, port);
        let free = |b: usize| (b * WAYS..(b + 1) * WAYS).filter(|&i| self.read(i).1 & VALID == 0).collect::<Vec<_>>();
        let (f0, f1) = (free(b0), free(b1));
        let slot = if f1.len() > f0.len() { f1.first() } else { f0.first() };
        let &i = slot.ok_or(TableFull)?;
        self.write(i, key, val);
        Ok(())
    }

    /// Removes `ip` on `port` (static entries included). Only the single writer may call this.
    pub fn remove(&self, ip: A, port: PortId) -> bool {
        match self.find(ip.key(), ip.scope().unwrap_or(port)) {
            Some((i, _)) => {
                self.write(i, 0, 0);
                true
            }
            None => false,
        }
    }

    /// Every entry (walks the table: for display and the writer's housekeeping).
    pub fn entries(&self) -> Vec<Neighbor<A>> {
        let mut out: Vec<Neighbor<A>> = (0..self.slots.len())
            .map(|i| self.read(i))
            .filter(|(_, val)| val & VALID != 0)
            .map(|(ip, val)| Self::decode(ip, val))
            .collect();
        out.sort_by_key(|n| (n.ip, n.port));
        out
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        (0..self.slots.len()).filter(|&i| self.read(i).1 & VALID != 0).count()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `a` is link-local unicast (fe80::/10).
#[inline]
pub fn is_link_local6(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The IPv6 neighbour table's key for `a` on `port`: a link-local address names a neighbour
/// only together with its link, so its key holds the port; other addresses are their own key.
#[inline]
pub fn scope6(a: Ipv6Addr, port: crate::PortId) -> Key6 {
    Key6 { addr: a, port: is_link_local6(&a).then_some(port) }
}

/// The address a neighbour table key stands for ([`scope6`] undone).
#[inline]
pub fn unscope6(k: Key6) -> Ipv6Addr {
    k.addr
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn ip(i: u32) -> Ipv4Addr {
        Ipv4Addr::from(0xc612_0000 | i)
    }
    fn mac(i: u32) -> MacAddr {
        MacAddr::from_u64(0x0200_0000_0000 | u64::from(i))
    }

    #[test]
    fn insert_lookup_update_remove() {
        let t = NeighborTable::new(64);
        let p = PortId(1);
        assert_eq!(t.lookup(ip(1), p), None);
        t.insert(ip(1), mac(1), p, false).unwrap();
        assert_eq!(t.lookup(ip(1), p), Some(Neighbor { ip: ip(1), mac: mac(1), port: p, is_static: false }));
        t.insert(ip(1), mac(2), p, false).unwrap();
        assert_eq!(t.lookup(ip(1), p).unwrap().mac, mac(2));
        assert_eq!(t.len(), 1);
        assert!(!t.remove(ip(1), PortId(0)), "not on that port");
        assert!(t.remove(ip(1), p));
        assert_eq!(t.lookup(ip(1), p), None);
        assert!(t.is_empty());
    }

    #[test]
    fn an_address_on_another_port_is_another_neighbour() {
        // As the kernel keeps them: a host on port 0 claiming the gateway of port 1 (a spoofed
        // ARP request) makes an entry on port 0; the gateway on port 1 stays where it is.
        let (t, t6) = (NeighborTable::new(64), NeighborTable6::new6(64));
        let g6 = Key6::global("2001:2::1".parse().unwrap());
        t.insert(ip(1), mac(1), PortId(1), false).unwrap();
        t6.insert(g6, mac(1), PortId(1), false).unwrap();
        t.insert(ip(1), mac(66), PortId(0), false).unwrap();
        t6.insert(g6, mac(66), PortId(0), false).unwrap();
        assert_eq!(t.lookup(ip(1), PortId(1)).map(|n| (n.mac, n.port)), Some((mac(1), PortId(1))));
        assert_eq!(t.lookup(ip(1), PortId(0)).map(|n| (n.mac, n.port)), Some((mac(66), PortId(0))));
        assert_eq!(t6.lookup(g6, PortId(1)).map(|n| (n.mac, n.port)), Some((mac(1), PortId(1))));
        assert_eq!(t6.lookup(g6, PortId(2)), None);
        let listed = |t: &NeighborTable| t.entries().iter().map(|n| (n.port, n.mac)).collect::<Vec<_>>();
        assert_eq!(listed(&t), vec![(PortId(0), mac(66)), (PortId(1), mac(1))]);
        // Removing one leaves the other.
        assert!(t.remove(ip(1), PortId(0)) && t6.remove(g6, PortId(0)));
        assert_eq!(t.lookup(ip(1), PortId(1)).map(|n| n.mac), Some(mac(1)));
        assert_eq!(t6.lookup(g6, PortId(1)).map(|n| n.mac), Some(mac(1)));
    }

    #[test]
    fn ipv6_entries_are_kept_apart_by_all_128_bits() {
        let t = NeighborTable6::new6(64);
        let a = Key6::global("2001:2::1".parse().unwrap());
        let b = Key6::global("2001:3::1".parse().unwrap());
        t.insert(a, mac(1), PortId(1), false).unwrap();
        assert_eq!(t.lookup(b, PortId(1)), None, "same low 64 bits, different high ones");
        t.insert(b, mac(2), PortId(0), true).unwrap();
        assert_eq!(t.lookup(a, PortId(1)), Some(Neighbor { ip: a, mac: mac(1), port: PortId(1), is_static: false }));
        assert_eq!(t.lookup(b, PortId(0)).unwrap().mac, mac(2));
        assert_eq!(t.entries().iter().map(|n| n.ip).collect::<Vec<_>>(), vec![a, b]);
        assert!(t.remove(a, PortId(1)));
        assert_eq!((t.lookup(a, PortId(1)), t.len()), (None, 1));
    }

    #[test]
    fn link_local_entries_match_on_their_port_and_every_bit_of_their_address() {
        let t = NeighborTable6::new6(64);
        let ll = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        // fe80::23 and fe80:3::23 on one port: two neighbours (Linux takes both as gateways).
        t.insert(scope6(ll("fe80::23"), PortId(1)), mac(1), PortId(1), false).unwrap();
        assert_eq!(t.lookup(scope6(ll("fe80:3::23"), PortId(1)), PortId(1)), None);
        t.insert(scope6(ll("fe80:3::23"), PortId(1)), mac(2), PortId(1), false).unwrap();
        // The same address on another port: a third.
        assert_eq!(t.lookup(scope6(ll("fe80::23"), PortId(0)), PortId(0)), None);
        t.insert(scope6(ll("fe80::23"), PortId(0)), mac(3), PortId(0), false).unwrap();
        let found = |s: &str, p: u8| t.lookup(scope6(ll(s), PortId(p)), PortId(p)).map(|n| (n.mac, n.port, n.ip.addr));
        assert_eq!(found("fe80::23", 1), Some((mac(1), PortId(1), ll("fe80::23"))));
        assert_eq!(found("fe80:3::23", 1), Some((mac(2), PortId(1), ll("fe80:3::23"))));
        assert_eq!(found("fe80::23", 0), Some((mac(3), PortId(0), ll("fe80::23"))));
        // The entries give back each key whole.
        let keys: Vec<Key6> = t.entries().iter().map(|n| n.ip).collect();
        assert!(keys.contains(&scope6(ll("fe80:3::23"), PortId(1))) && keys.len() == 3, "{keys:?}");
        assert!(t.remove(scope6(ll("fe80::23"), PortId(1)), PortId(1)));
        assert_eq!((found("fe80::23", 1), found("fe80::23", 0).is_some(), t.len()), (None, true, 2));
    }

    #[test]
    fn claims_of_an_address_on_every_other_port_leave_room_for_its_own_neighbour() {
        // One claim of G per port (a spoofed ARP request on each) used to take one slot each
        // in G's own two buckets, placed by the address alone: with 16 ports, G's own entry,
        // once gone, could not be stored again. Placed by address and port, they spread.
        let t = NeighborTable::new(64);
        let g = ip(1);
        for p in 1..=16u8 {
            t.insert(g, mac(0x66), PortId(p), false).unwrap();
        }
        assert!(t.insert(g, mac(1), PortId(0), false).is_ok(), "no room for G on its own port");
        assert_eq!(t.lookup(g, PortId(0)).map(|n| n.mac), Some(mac(1)));
    }

    #[test]
    fn static_entries_are_not_overwritten_by_learning() {
        let t = NeighborTable::new(64);
        t.insert(ip(1), mac(1), PortId(0), true).unwrap();
        t.insert(ip(1), mac(9), PortId(0), false).unwrap();
        assert_eq!(t.lookup(ip(1), PortId(0)).unwrap().mac, mac(1));
        assert!(t.lookup(ip(1), PortId(0)).unwrap().is_static);
    }

    #[test]
    fn bounded_under_a_flood() {
        let t = NeighborTable::new(256);
        let mut refused = 0;
        for i in 0..10_000 {
            if t.insert(ip(i), mac(i), PortId(0), false).is_err() {
                refused += 1;
            }
        }
        assert_eq!(t.len(), 256);
        assert_eq!(refused, 10_000 - 256);
    }

    #[test]
    fn readers_never_see_a_torn_entry() {
        // The writer flips one address between two MACs whose halves would betray mixing;
        // readers must always see one of the two, whole.
        let t = Arc::new(NeighborTable::new(8));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b) = (MacAddr::from_u64(0x0200_0000_0000), MacAddr::from_u64(0x02ff_ffff_ffff));
        t.insert(ip(1), a, PortId(0), false).unwrap();
        // Reads done by each reader: the writer goes on until every reader has read a while
        // beside it (on a loaded machine a reader may start only after 200,000 writes).
        let reads: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (t, stop, reads) = (t.clone(), stop.clone(), reads.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let e = t.lookup(ip(1), PortId(0)).expect("entry vanished");
                        assert!(e.mac == a || e.mac == b, "torn MAC {}", e.mac);
                        assert_eq!(e.port, PortId(0), "another port's entry");
                        n += 1;
                        reads[r].store(n, Ordering::Relaxed);
                    }
                    n
                })
            })
            .collect();
        let mut i = 0u64;
        while i < 200_000 || reads.iter().any(|n| n.load(Ordering::Relaxed) < 10_000) {
            i += 1;
            t.insert(ip(1), if i % 2 == 0 { b } else { a }, PortId(0), false).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    }

    #[test]
    fn addresses_chosen_against_a_known_placement_keep_a_gateway_out_only_under_that_key() {
        // As the FDB's test: 16 addresses of a large subnet whose candidate buckets are the
        // gateway's under key A fill them there; under key B the gateway is stored beside them.
        let (a, b) = (Key::from_words(0x1234, 0x5678), Key::from_words(0x9abc, 0xdef0));
        let gateway = ip(1);
        let target: NeighborTable = NeighborTable::with_key(512, a);
        let sorted = |mut p: [usize; 2]| {
            p.sort_unstable();
            p
        };
        let want = sorted(target.buckets_of(gateway.key(), PortId(0)));
        let attackers: Vec<Ipv4Addr> = (2..0xffff)
            .map(ip)
            .filter(|i| sorted(target.buckets_of(i.key(), PortId(1))) == want)
            .take(2 * WAYS)
            .collect();
        assert_eq!(attackers.len(), 2 * WAYS, "search too short");
        for (key, kept_out) in [(a, true), (b, false)] {
            let t: NeighborTable = NeighborTable::with_key(512, key);
            for (k, addr) in attackers.iter().enumerate() {
                t.insert(*addr, mac(k as u32), PortId(1), false).unwrap();
            }
            let stored = t.insert(gateway, mac(0xffff), PortId(0), false);
            assert_eq!(stored.is_err(), kept_out, "{key:?}");
            assert_eq!(t.lookup(gateway, PortId(0)).is_none(), kept_out, "{key:?}");
        }
    }
}
