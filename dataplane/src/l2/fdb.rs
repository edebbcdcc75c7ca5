//! The forwarding database: which port each learnt MAC address sits behind.
//!
//! # Structure, and the choices not taken
//!
//! One table shared by every worker (a MAC learnt on queue 0 is known on queue 1 from the next
//! frame that queue processes: there is no copy to refresh, only cache coherence between cores).
//! It is a fixed array of buckets, each one cache line of eight 64-bit keys
//! (`valid | port << 48 | mac`) and a second line with a one-byte tag per slot (eight bits of
//! the MAC's hash) and each slot's last-seen second. A lookup loads the tag word, finds the
//! slots whose tag matches with a few word operations (no branch per slot: where a MAC sits in
//! its bucket is unpredictable, and a mispredicted scan cost more than the whole compare), and
//! compares those keys only — usually one. Scanning all eight keys with an early exit ran at
//! 23 M decisions/s over 4,096 stations; branch-free over the keys 29; with the tags 33.
//! A MAC hashes to two candidate buckets (two-choice hashing) and is stored in the emptier one,
//! so a lookup reads one or two cache lines. With one bucket per MAC, sequential MACs into a
//! 65,536-entry table met their first full bucket at about 20 % of capacity (Poisson tails);
//! first-fit over two buckets at 47 %; the emptier of two at 78 %, and it then keeps filling
//! until 65,536 distinct MACs occupy over 95 % of the slots (`fills_most_of_capacity`).
//!
//! - **No lock, no per-packet shared write.** Lookups are relaxed atomic loads. Learning writes
//!   only when something changes: a new MAC, a MAC that moved, or a last-seen second that
//!   differs from the stored one (at most one store per MAC per second). A steady flow therefore
//!   touches shared cache lines read-only, and workers do not bounce lines between cores.
//!   A `RwLock<HashMap>` was not taken: its reader count is a shared write on every packet.
//!   Per-worker copies refreshed from a master were not taken either: they delay learning across
//!   queues and multiply memory by the worker count.
//! - **Bounded, with a defined behaviour when full.** The capacity is fixed at start
//!   (`--fdb-size`, rounded up to a whole number of 8-slot buckets). A new MAC whose two buckets
//!   hold eight live entries each is not learnt ([`Learn::Full`], counted by the worker); frames
//!   to it are flooded, as to any unknown destination. Like a hardware switch's hash CAM, the
//!   buckets can fill a little before the whole table does.
//! - **Ageing is lazy.** An entry older than the ageing time counts as absent for lookups and
//!   its slot is reused by the next MAC that hashes there; nothing scans the table.
//!
//! Races are benign by construction. Every write is a compare-exchange from the key the writer
//! read, so no worker overwrites a slot another one reclaimed meanwhile; a lookup re-reads the key
//! after the last-seen second and answers "unknown" (flood) if it changed. Two workers learning the
//! same new MAC at once may claim two slots, possibly with different ports if the station really
//! appears on two ports at once; lookups and refreshes use the first found, the other ages out. A
//! reader that sees a freshly claimed key before its last-seen store treats it as absent once and
//! floods that frame.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::keyed::{self, Key};
use crate::time::Seconds;
use crate::wire::MacAddr;
use crate::PortId;

const WAYS: usize = 8;
const VALID: u64 = 1 << 63;
const MAC_MASK: u64 = (1 << 48) - 1;
const PORT_SHIFT: u32 = 48;
const PORT_MASK: u64 = 0xff;
/// The last-seen second of a static entry ([`Fdb::pin`]): never ages, never moves.
const STATIC: u32 = u32::MAX;

#[repr(C, align(64))]
struct Bucket {
    keys: [AtomicU64; WAYS],
}

/// What learning a source address did to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learn {
    /// The address was already known on this port (its age may have been refreshed).
    Known,
    /// A new entry was made.
    New,
    /// The address was known on another port and now points to this one.
    Moved,
    /// The address is new and its bucket is full of live entries: not learnt.
    Full,
    /// The address is a static entry on another port: not moved.
    Pinned,
}

/// One live entry, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbEntry {
    /// The station's address.
    pub mac: MacAddr,
    /// The port it was last seen on.
    pub port: PortId,
    /// Seconds since it was last seen (0 for a static entry).
    pub age: u32,
    /// A static entry ([`Fdb::pin`]): never ages, never moves.
    pub is_static: bool,
}

/// The shared forwarding database. See the module documentation.
pub struct Fdb {
    buckets: Box<[Bucket]>,
    meta: Box<[Meta]>,
    ageing: u32,
    /// The placement's secret ([`crate::keyed`]).
    key: Key,
}

/// A bucket's other line: a one-byte tag per slot (from the MAC's hash; 0 for never used), so
/// that a lookup finds its candidate slot with one load and a few word operations, and the
/// last-seen second of each slot.
#[repr(C, align(64))]
#[derive(Default)]
struct Meta {
    tags: AtomicU64,
    seen: [AtomicU32; WAYS],
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Bit 8*i+7 set for each byte *i* of `tags` equal to `tag` (and possibly a few more just
/// above a match, which the key comparison that follows rules out).
#[inline(always)]
fn tag_matches(tags: u64, tag: u8) -> u64 {
    let x = tags ^ (LOW_BITS * u64::from(tag));
    x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS
}

/// Where a MAC may sit: its two candidate buckets and its tag.
#[derive(Debug, Clone, Copy)]
struct Place {
    buckets: [usize; 2],
    tag: u8,
}

impl std::fmt::Debug for Fdb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fdb").field("capacity", &self.capacity()).field("ageing", &self.ageing).finish()
    }
}

impl Fdb {
    /// A table for at least `capacity` entries (rounded up to a multiple of 8, at least 8)
    /// whose entries age out after `ageing_s` seconds without a frame from that address, its
    /// placement keyed by a fresh secret ([`crate::keyed`]: MACs are placed by a keyed hash, as
    /// the low bits of MACs are sequential in practice and the high bits shared by a vendor,
    /// and as a known placement lets 16 chosen MACs keep a victim out).
    pub fn new(capacity: usize, ageing_s: u32) -> Fdb {
        Fdb::with_key(capacity, ageing_s, Key::random())
    }

    /// [`Fdb::new`] with a given secret: one placement every time (tests, benchmarks).
    pub fn with_key(capacity: usize, ageing_s: u32, key: Key) -> Fdb {
        let nbuckets = capacity.div_ceil(WAYS).max(1);
        let buckets = (0..nbuckets).map(|_| Bucket { keys: Default::default() }).collect();
        let meta = (0..nbuckets).map(|_| Meta::default()).collect();
        Fdb { buckets, meta, ageing: ageing_s, key }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// The ageing time in seconds.
    pub fn ageing(&self) -> u32 {
        self.ageing
    }

    /// The two candidate buckets of `mac` (multiply-shift reduction: any bucket count, no
    /// modulo) and its tag (never 0), all from one hash.
    #[inline(always)]
    fn place(&self, mac: u64) -> Place {
        let h = keyed::hash64(mac, self.key);
        let n = self.buckets.len() as u64;
        let buckets = [(((h >> 32) * n) >> 32) as usize, (((h & 0xffff_ffff) * n) >> 32) as usize];
        // The tag from the hash's lowest byte: the bucket indices come from the top bits of
        // each half, so a tag from bits 24..31 would be the same for every MAC of a second
        // bucket and tell them apart no better than the bucket does.
        Place { buckets, tag: (h as u8).max(1) }
    }

    /// Sets slot `i`'s tag in bucket `b`, after its key was claimed. A reader that sees the key
    /// before the tag misses the entry and floods; a tag write that lands after another worker
    /// reclaimed the slot for a second MAC leaves that MAC unfound (flooded to) until it sends
    /// again and learning, which compares keys, sets its tag back. Neither gives a wrong port.
    fn set_tag(&self, b: usize, i: usize, tag: u8) {
        let shift = 8 * i;
        let tags = &self.meta[b].tags;
        let _ = tags.fetch_update(Relaxed, Relaxed, |t| Some((t & !(0xff << shift)) | (u64::from(tag) << shift)));
    }

    #[inline]
    fn live(&self, seen: u32, now: Seconds) -> bool {
        seen == STATIC || (seen != 0 && now.since(Seconds(seen)) <= self.ageing)
    }

    /// Brings the table lines `mac` may sit in towards the cache, for a decision to come.
    #[inline]
    pub fn prefetch(&self, mac: MacAddr) {
        let p = self.place(mac.to_u64());
        for b in p.buckets {
            crate::prefetch::read(&self.meta[b]);
        }
        crate::prefetch::read(&self.buckets[p.buckets[0]]);
    }

    /// The slot holding `m`, as (bucket, slot, key read), first bucket first: the tag word
    /// names the candidate slots (usually one), whose keys are then compared.
    #[inline(always)]
    fn find(&self, m: u64) -> Option<(usize, usize, u64)> {
        let p = self.place(m);
        let want = VALID | m;
        for b in p.buckets {
            let mut cand = tag_matches(self.meta[b].tags.load(Relaxed), p.tag);
            while cand != 0 {
                let i = (cand.trailing_zeros() / 8) as usize;
                let k = self.buckets[b].keys[i].load(Relaxed);
                if k & !(PORT_MASK << PORT_SHIFT) == want {
                    return Some((b, i, k));
                }
                cand &= cand - 1;
            }
        }
        None
    }

    /// The port `mac` was last seen on, if it is known and has not aged out.
    #[inline(always)]
    pub fn lookup(&self, mac: MacAddr, now: Seconds) -> Option<PortId> {
        let (b, i, k) = self.find(mac.to_u64())?;
        let seen = self.meta[b].seen[i].load(Relaxed);
        // The slot may have been reclaimed for another MAC since it was matched: only an
        // unchanged key vouches for the last-seen second just read.
        if self.buckets[b].keys[i].load(Relaxed) != k || !self.live(seen, now) {
            return None;
        }
        Some(PortId(((k >> PORT_SHIFT) & PORT_MASK) as u8))
    }

    /// The slot of bucket `b` holding `m`, if any, with the key read from it: every key
    /// compared, tags not trusted (for the learning path, which must not miss a claimed slot).
    fn find_in(&self, b: usize, m: u64) -> Option<(usize, u64)> {
        self.buckets[b].keys.iter().enumerate().find_map(|(i, key)| {
            let k = key.load(Relaxed);
            (k & !(PORT_MASK << PORT_SHIFT) == VALID | m).then_some((i, k))
        })
    }

    /// A slot of bucket `b` that is empty or aged out, with the key it holds, and how many such
    /// slots the bucket has.
    #[inline]
    fn reusable_in(&self, b: usize, now: Seconds) -> (Option<(usize, u64)>, usize) {
        let keys = &self.buckets[b].keys;
        let mut first = None;
        let mut count = 0;
        for (i, key) in keys.iter().enumerate() {
            let k = key.load(Relaxed);
            if k & VALID == 0 || !self.live(self.meta[b].seen[i].load(Relaxed), now) {
                first = first.or(Some((i, k)));
                count += 1;
            }
        }
        (first, count)
    }

    /// Records that `mac` was seen on `port` at `now`. The caller passes unicast addresses
    /// only (the bridge decision checks).
    #[inline(always)]
    pub fn learn(&self, mac: MacAddr, port: PortId, now: Seconds) -> Learn {
        let m = mac.to_u64();
        let want = VALID | (u64::from(port.0) << PORT_SHIFT) | m;
        // The common case, a known station on its port: read-only unless the second changed.
        if let Some((b, i, k)) = self.find(m) {
            if k == want {
                let seen = &self.meta[b].seen[i];
                let last = seen.load(Relaxed);
                if last != now.0 && last != STATIC {
                    seen.store(now.0, Relaxed);
                }
                return Learn::Known;
            }
        }
        self.learn_change(m, want, now)
    }

    /// Records that `mac` was seen on `port` at `now` if the table has it there, and changes
    /// nothing otherwise (never learns, never moves): for what saw the station elsewhere, such
    /// as the XDP path's program, whose word may be older than the table's. Whether it did.
    pub fn refresh(&self, mac: MacAddr, port: PortId, now: Seconds) -> bool {
        let m = mac.to_u64();
        let want = VALID | (u64::from(port.0) << PORT_SHIFT) | m;
        let Some((b, i, k)) = self.find(m) else {
            return false;
        };
        let seen = &self.meta[b].seen[i];
        let last = seen.load(Relaxed);
        if k != want || !self.live(last, now) {
            return false;
        }
        if last < now.0 {
            seen.store(now.0, Relaxed);
        }
        true
    }

    /// [`Fdb::learn`] for a station that is new or moved.
    #[cold]
    #[inline(never)]
    fn learn_change(&self, m: u64, want: u64, now: Seconds) -> Learn {
        let place = self.place(m);
        let candidates = place.buckets;
        // Every write is a compare-exchange from the key this call read, so a slot that another
        // worker reclaimed meanwhile is never overwritten; a lost race is retried.
        for _ in 0..4 {
            if let Some((b, i, k)) = candidates.iter().find_map(|&b| self.find_in(b, m).map(|(i, k)| (b, i, k))) {
                let key = &self.buckets[b].keys[i];
                let seen = &self.meta[b].seen[i];
                if seen.load(Relaxed) == STATIC {
                    return if k == want { Learn::Known } else { Learn::Pinned };
                }
                if k != want && key.compare_exchange(k, want, Relaxed, Relaxed).is_err() {
                    continue;
                }
                if seen.load(Relaxed) != now.0 {
                    seen.store(now.0, Relaxed);
                }
                // Found by its key: make sure its tag says so too (a racing claim may not
                // have set it yet).
                self.set_tag(b, i, place.tag);
                return if k == want { Learn::Known } else { Learn::Moved };
            }
            // Into the emptier of the two buckets (ties to the first, which lookups read first).
            let (slot0, free0) = self.reusable_in(candidates[0], now);
            let (slot1, free1) = self.reusable_in(candidates[1], now);
            let (b, slot) = if free1 > free0 { (candidates[1], slot1) } else { (candidates[0], slot0) };
            let Some((i, old)) = slot else {
                return Learn::Full;
            };
            if self.buckets[b].keys[i].compare_exchange(old, want, Relaxed, Relaxed).is_ok() {
                self.meta[b].seen[i].store(now.0, Relaxed);
                self.set_tag(b, i, place.tag);
                return Learn::New;
            }
        }
        // Four lost races in a row: give up on this frame; the next one from the station learns.
        Learn::Known
    }

    /// Puts `mac` on `port` for good (a static entry, given at start): it never ages and
    /// learning never moves it. False when both its buckets are full of static entries and live
    /// ones (so pin before traffic flows).
    pub fn pin(&self, mac: MacAddr, port: PortId) -> bool {
        let m = mac.to_u64();
        let want = VALID | (u64::from(port.0) << PORT_SHIFT) | m;
        let place = self.place(m);
        let found = place.buckets.iter().find_map(|&b| self.find_in(b, m).map(|(i, _)| (b, i)));
        let slot = found.or_else(|| {
            place.buckets.iter().find_map(|&b| self.reusable_in(b, Seconds(STATIC - 1)).0.map(|(i, _)| (b, i)))
        });
        let Some((b, i)) = slot else {
            return false;
        };
        self.buckets[b].keys[i].store(want, Relaxed);
        self.meta[b].seen[i].store(STATIC, Relaxed);
        self.set_tag(b, i, place.tag);
        true
    }

    /// Number of live entries (walks the table: for display, not the packet path).
    pub fn len(&self, now: Seconds) -> usize {
        self.entries(now).len()
    }

    /// True when no live entry exists.
    pub fn is_empty(&self, now: Seconds) -> bool {
        self.len(now) == 0
    }

    /// Every live entry (walks the table: for display, not the packet path).
    pub fn entries(&self, now: Seconds) -> Vec<FdbEntry> {
        let mut out = Vec::new();
        for (b, bucket) in self.buckets.iter().enumerate() {
            for (i, key) in bucket.keys.iter().enumerate() {
                let k = key.load(Relaxed);
                let s = self.meta[b].seen[i].load(Relaxed);
                if k & VALID != 0 && self.live(s, now) {
                    out.push(FdbEntry {
                        mac: MacAddr::from_u64(k & MAC_MASK),
                        port: PortId(((k >> PORT_SHIFT) & PORT_MASK) as u8),
                        age: if s == STATIC { 0 } else { now.since(Seconds(s)) },
                        is_static: s == STATIC,
                    });
                }
            }
        }
        out.sort_by_key(|e| e.mac);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn mac(i: u32) -> MacAddr {
        let b = i.to_be_bytes();
        MacAddr([0x02, 0x00, b[0], b[1], b[2], b[3]])
    }

    #[test]
    fn a_static_entry_never_ages_and_never_moves() {
        let fdb = Fdb::new(64, 300);
        assert_eq!(fdb.learn(mac(1), PortId(0), Seconds(1)), Learn::New);
        assert!(fdb.pin(mac(1), PortId(2)), "a learnt entry becomes static where it is pinned");
        assert!(fdb.pin(mac(3), PortId(1)));
        assert_eq!(fdb.learn(mac(1), PortId(0), Seconds(5)), Learn::Pinned);
        assert_eq!(fdb.learn(mac(1), PortId(2), Seconds(6)), Learn::Known);
        let far = Seconds(1_000_000);
        assert_eq!(fdb.lookup(mac(1), far), Some(PortId(2)));
        assert_eq!(fdb.lookup(mac(3), far), Some(PortId(1)));
        assert!(!fdb.refresh(mac(3), PortId(0), far));
        let e = fdb.entries(far);
        assert_eq!(e.len(), 2);
        assert!(e.iter().all(|e| e.is_static && e.age == 0), "{e:?}");
        // Static entries are never reused for new stations: a full bucket stays theirs.
        let small = Fdb::new(8, 300);
        let mut pinned = 0;
        for i in 0..100 {
            pinned += usize::from(small.pin(mac(i), PortId(0)));
        }
        assert_eq!(pinned, 8, "one bucket of eight, two choices of the same one");
        assert_eq!(small.learn(mac(1000), PortId(1), far), Learn::Full);
    }

    #[test]
    fn tags_tell_apart_the_macs_of_one_bucket() {
        // Tags must not be a function of either bucket index, or a lookup compares every key
        // of a bucket whose MACs share it.
        let fdb = Fdb::new(65536, 300);
        for which in 0..2 {
            let mut by_bucket: std::collections::HashMap<usize, Vec<u8>> = Default::default();
            for i in 0..100_000 {
                let p = fdb.place(mac(i).to_u64());
                by_bucket.entry(p.buckets[which]).or_default().push(p.tag);
            }
            let (mut groups, mut shared) = (0, 0);
            for tags in by_bucket.values().filter(|t| t.len() >= 8) {
                groups += 1;
                let mut t = tags.clone();
                t.sort_unstable();
                t.dedup();
                if t.len() < tags.len() / 2 {
                    shared += 1;
                }
            }
            assert!(groups > 100, "bucket {which}: {groups} buckets with 8 or more MACs");
            assert!(shared * 100 < groups, "bucket {which}: {shared} of {groups} buckets mostly share tags");
        }
    }

    #[test]
    fn learn_then_lookup() {
        let fdb = Fdb::new(64, 300);
        let t = Seconds(10);
        assert_eq!(fdb.lookup(mac(1), t), None);
        assert_eq!(fdb.learn(mac(1), PortId(1), t), Learn::New);
        assert_eq!(fdb.lookup(mac(1), t), Some(PortId(1)));
        assert_eq!(fdb.learn(mac(1), PortId(1), t), Learn::Known);
        assert_eq!(fdb.len(t), 1);
    }

    #[test]
    fn a_moved_station_follows_its_new_port() {
        let fdb = Fdb::new(64, 300);
        fdb.learn(mac(7), PortId(0), Seconds(1));
        assert_eq!(fdb.learn(mac(7), PortId(2), Seconds(2)), Learn::Moved);
        assert_eq!(fdb.lookup(mac(7), Seconds(2)), Some(PortId(2)));
        assert_eq!(fdb.len(Seconds(2)), 1);
    }

    #[test]
    fn refresh_keeps_a_station_where_it_is_and_never_learns_or_moves_one() {
        let fdb = Fdb::new(64, 300);
        fdb.learn(mac(1), PortId(0), Seconds(1));
        assert!(fdb.refresh(mac(1), PortId(0), Seconds(200)));
        assert_eq!(fdb.lookup(mac(1), Seconds(450)), Some(PortId(0)), "refreshed at 200");
        assert!(!fdb.refresh(mac(1), PortId(1), Seconds(460)), "not on port 1");
        assert_eq!(fdb.lookup(mac(1), Seconds(460)), Some(PortId(0)), "not moved");
        assert!(!fdb.refresh(mac(2), PortId(0), Seconds(460)), "not learnt");
        assert_eq!(fdb.lookup(mac(2), Seconds(460)), None);
        assert!(!fdb.refresh(mac(1), PortId(0), Seconds(600)), "aged out (last seen 200) stays out");
        assert_eq!(fdb.lookup(mac(1), Seconds(600)), None);
    }

    #[test]
    fn entries_age_out_and_refresh_keeps_them() {
        let fdb = Fdb::new(64, 300);
        fdb.learn(mac(1), PortId(0), Seconds(1));
        fdb.learn(mac(2), PortId(1), Seconds(1));
        // mac(2) keeps talking; mac(1) falls silent.
        fdb.learn(mac(2), PortId(1), Seconds(250));
        assert_eq!(fdb.lookup(mac(1), Seconds(301)), Some(PortId(0)), "300 s old is still live");
        assert_eq!(fdb.lookup(mac(1), Seconds(302)), None, "301 s old has aged out");
        assert_eq!(fdb.lookup(mac(2), Seconds(302)), Some(PortId(1)));
        let e = fdb.entries(Seconds(302));
        assert_eq!(e, vec![FdbEntry { mac: mac(2), port: PortId(1), age: 52, is_static: false }]);
    }

    #[test]
    fn aged_slots_are_reused() {
        // One bucket of 8: fill it, let it age, learn 8 more.
        let fdb = Fdb::new(8, 10);
        for i in 0..8 {
            assert_eq!(fdb.learn(mac(i), PortId(0), Seconds(1)), Learn::New);
        }
        assert_eq!(fdb.learn(mac(100), PortId(0), Seconds(5)), Learn::Full);
        for i in 100..108 {
            assert_eq!(fdb.learn(mac(i), PortId(1), Seconds(20)), Learn::New);
        }
        assert_eq!(fdb.len(Seconds(20)), 8);
        assert_eq!(fdb.lookup(mac(0), Seconds(20)), None);
    }

    #[test]
    fn stays_at_its_bound_when_flooded_with_sources() {
        let fdb = Fdb::new(1024, 300);
        let mut full = 0;
        for i in 0..100_000 {
            if fdb.learn(mac(i), PortId(0), Seconds(1)) == Learn::Full {
                full += 1;
            }
        }
        assert_eq!(fdb.capacity(), 1024);
        assert_eq!(fdb.len(Seconds(1)), 1024, "every slot used, none beyond");
        assert_eq!(full, 100_000 - 1024);
        // An address learnt before the flood is still there.
        let fdb = Fdb::new(1024, 300);
        fdb.learn(mac(u32::MAX), PortId(3), Seconds(1));
        for i in 0..100_000 {
            fdb.learn(mac(i), PortId(0), Seconds(1));
        }
        assert_eq!(fdb.lookup(mac(u32::MAX), Seconds(1)), Some(PortId(3)));
    }

    #[test]
    fn fills_most_of_capacity() {
        // Sequential MACs (as a vendor allocates them) until the first refusal.
        let fdb = Fdb::new(65536, 300);
        let mut learnt = 0;
        for i in 0..65536 {
            if fdb.learn(mac(i), PortId(0), Seconds(1)) == Learn::Full {
                break;
            }
            learnt += 1;
        }
        // The placement is keyed, so as good as random: two-choice buckets of eight then
        // refuse first at 69-79 % of capacity (400 simulated tables, median 75 %). A hash
        // that kept sequential MACs together would refuse far sooner.
        assert!(learnt > 65536 * 6 / 10, "first bucket overflow after only {learnt} entries");
        // And all of them, inserted regardless of refusals, occupy most of the table.
        for i in 0..65536 {
            fdb.learn(mac(i), PortId(0), Seconds(1));
        }
        assert!(fdb.len(Seconds(1)) > 65536 * 95 / 100, "only {} of 65536 slots used", fdb.len(Seconds(1)));
    }

    #[test]
    fn capacity_rounds_up_to_whole_buckets() {
        assert_eq!(Fdb::new(1, 300).capacity(), 8);
        assert_eq!(Fdb::new(65536, 300).capacity(), 65536);
        assert_eq!(Fdb::new(1000, 300).capacity(), 1000);
        assert_eq!(Fdb::new(1001, 300).capacity(), 1008);
    }

    #[test]
    fn learnt_on_one_thread_is_known_on_another() {
        // Queue 0 learns while queue 1 looks up, at the same time: once queue 1 has seen an
        // address, it must keep seeing it, on the right port.
        let fdb = Arc::new(Fdb::new(4096, 300));
        let writer = {
            let fdb = Arc::clone(&fdb);
            std::thread::spawn(move || {
                for i in 0..2000 {
                    fdb.learn(mac(i), PortId((i % 4) as u8), Seconds(1));
                }
            })
        };
        let mut found = vec![false; 2000];
        while found.iter().any(|f| !f) {
            for (i, f) in found.iter_mut().enumerate() {
                match fdb.lookup(mac(i as u32), Seconds(1)) {
                    Some(p) => {
                        assert_eq!(p, PortId((i % 4) as u8), "wrong port for {i}");
                        *f = true;
                    }
                    None => assert!(!*f, "{i} was known, then vanished"),
                }
            }
            if writer.is_finished() && found.iter().any(|f| !f) {
                // One more pass after the writer is done must find everything.
                for (i, f) in found.iter_mut().enumerate() {
                    assert_eq!(fdb.lookup(mac(i as u32), Seconds(1)), Some(PortId((i % 4) as u8)));
                    *f = true;
                }
            }
        }
        writer.join().unwrap();
    }

    #[test]
    fn racing_moves_and_reclaims_never_give_another_macs_port() {
        // One bucket: workers learn 16 MACs that keep aging out and reclaiming each other's
        // slots; a MAC is only ever learnt on port (mac % 4), so any other answer is a wrong port.
        let fdb = Arc::new(Fdb::new(8, 1));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (fdb, stop) = (fdb.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut t = 1;
                    while !stop.load(Relaxed) {
                        for i in 0..16u32 {
                            fdb.learn(mac(i), PortId((i % 4) as u8), Seconds(t));
                        }
                        t += 1 + w;
                    }
                })
            })
            .collect();
        for round in 0..200_000u32 {
            let i = round % 16;
            if let Some(p) = fdb.lookup(mac(i), Seconds(round / 1000 + 1)) {
                assert_eq!(p, PortId((i % 4) as u8), "mac {i} answered with another MAC's port");
            }
        }
        stop.store(true, Relaxed);
        for w in writers {
            w.join().unwrap();
        }
    }

    #[test]
    fn macs_chosen_against_a_known_placement_keep_a_victim_out_only_under_that_key() {
        // 64 buckets. Against key A (as if it were known, as the unkeyed mixer was to anyone),
        // search 16 MACs whose two candidate buckets are the victim's two: learnt first, they
        // fill both, and the victim cannot be learnt. Under any other key the same MACs are
        // as good as random ones, and the victim is learnt beside them.
        let (a, b) = (Key::from_words(0x1234, 0x5678), Key::from_words(0x9abc, 0xdef0));
        let now = Seconds(1);
        let victim = mac(0xfffff);
        let target = Fdb::with_key(512, 300, a);
        let mut want = target.place(victim.to_u64()).buckets;
        want.sort_unstable();
        let attackers: Vec<MacAddr> = (0..2_000_000)
            .map(mac)
            .filter(|m| {
                let mut p = target.place(m.to_u64()).buckets;
                p.sort_unstable();
                p == want
            })
            .take(2 * WAYS)
            .collect();
        assert_eq!(attackers.len(), 2 * WAYS, "search too short");
        for (key, kept_out) in [(a, true), (b, false)] {
            let fdb = Fdb::with_key(512, 300, key);
            for m in &attackers {
                fdb.learn(*m, PortId(1), now);
            }
            let learnt = fdb.learn(victim, PortId(0), now);
            assert_eq!(fdb.lookup(victim, now).is_none(), kept_out, "{key:?}: {learnt:?}");
        }
    }
}
