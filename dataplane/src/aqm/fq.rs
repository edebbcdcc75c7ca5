//! Flow queues in the style of RFC 8290 (FQ-CoDel): one FIFO per flow, served by deficit round
//! robin with new flows first, each judged by its own [`Codel`].
//!
//! # Memory: a slot pool and a flow table, both fixed at construction
//!
//! Items (the worker's frame descriptors) sit in a pool of slots allocated once by
//! [`FlowQueues::new`]; each flow queue is a singly linked FIFO threaded through the pool by slot
//! index, and free slots form a free list. Nothing is allocated afterwards. The pool is the hard
//! limit: an item arriving when no slot is free makes room by dropping the head of the *fattest*
//! queue (most bytes queued), whatever its ECN capability, and that item goes back to the caller
//! to be freed. Finding the fattest scans a dense array of per-queue byte counts (4 KiB for 1,024
//! queues), which stays in cache; a heap kept up to date on every enqueue and dequeue was not
//! taken, as it would cost on every packet to save work on overflow only. fq_codel drops a batch
//! on each overflow to spread the scan's cost; here every overflow drop is one item handed back.
//!
//! # Flow table: set-associative, keys kept
//!
//! Queues are grouped in sets of [`WAYS`]. A flow's key hashes to one set; the flow takes the way
//! whose stored key is its own, else a way no flow holds (one not on a DRR list, i.e. with nothing
//! queued and not waiting to be visited), storing its key there. Only when all ways of the set are
//! held by other flows does it share a queue: the way picked by the low bits of its hash, whose
//! DRR share and CoDel state it then shares with the flow that holds it. That is a collision, and
//! it is counted per item, as cake counts them. Plain hashing into queues, as fq_codel does,
//! cannot tell a collision from a flow's own traffic, since it keeps no key.
//!
//! # Scheduling (RFC 8290 section 4)
//!
//! A flow that becomes active joins the tail of the *new* list with one quantum of credit. A
//! dequeue serves the head of the new list, else of the old list; a queue whose credit is spent
//! gets another quantum and moves to the tail of the old list. A new-list queue found empty moves
//! to the old list (so a flow cannot stay "new" by sending one packet at a time); an old-list
//! queue found empty leaves the lists (and frees its way). Credit is charged for items sent, not
//! for items CoDel dropped.
//!
//! # CoDel's one-MTU rule looks at the flow's own queue
//!
//! RFC 8289 never drops from a queue holding at most one MTU behind the packet. Linux's
//! fq_codel applies that rule to the backlog of all queues together; here each queue's own
//! bytes are used. The difference shows with hundreds of TCP flows through a worker that is the
//! bottleneck: every flow holds one or two frames (a TCP sender never has fewer than two segments
//! in flight), so a frame waits one DRR round per frame ahead of it in its own queue, and a round
//! is as long as the number of flows makes it: at 450 flows and ~170 kpps, 2.6 ms, so the second
//! frame of every flow is past a 5 ms target. Judged on the shared backlog, CoDel drops those
//! frames, and a flow whose window is two segments cannot recover a loss by fast retransmit: it
//! waits out a retransmission timeout. Dropping cannot shorten a queue made of flows at their
//! smallest window; only a flow that keeps more than one MTU queued behind its head is standing
//! in its own queue, and only that flow is CoDel's to slow (the unit test
//! `flows_at_their_smallest_window_are_not_dropped_however_long_the_round`). cake reaches the
//! same place by another road: a packet is over target only once it has waited more than two
//! rounds of MTU-sized packets, computed from the configured rate; a worker has no configured
//! rate, and counting the bytes queued needs no clock. The slot pool stays the hard limit over
//! all flows. (On the rig, 450 TCP flows from 4 processes through one worker ran at the same
//! 0.43–0.51 Gb/s under either rule: there the cost lies elsewhere; see
//! docs/design/queues-and-scheduling.md.)
//!
//! # The caller's part
//!
//! The queues never see frame bytes. At enqueue the caller gives the flow key
//! ([`super::flow::flow_key`]), the length, the arrival time and whether the frame is ECN-capable
//! ([`super::flow::is_ect`]). [`FlowQueues::dequeue`] returns each item with its [`Fate`]: send,
//! set CE and send ([`super::flow::mark_ce`]), or free (CoDel dropped it; call again, with the
//! same `now`, for the next one).

use super::codel::{Codel, CodelParams, Verdict};
use super::flow::FlowKey;

/// Queues per set of the flow table.
pub const WAYS: usize = 8;
/// "No slot" and "no queue" in the linked lists.
const NIL: u32 = u32::MAX;

/// Sizes and settings of the flow queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FqParams {
    /// Item slots: the most items queued at once.
    pub slots: usize,
    /// Flow queues (rounded up to a multiple of [`WAYS`]).
    pub queues: usize,
    /// Bytes of credit a queue gets per round (RFC 8290: one MTU-sized frame, 1514).
    pub quantum: u32,
    /// CoDel's settings, the same for every queue.
    pub codel: CodelParams,
    /// Seed of the flow hash.
    pub hash_seed: u64,
}

impl Default for FqParams {
    fn default() -> Self {
        FqParams { slots: 4096, queues: 1024, quantum: 1514, codel: CodelParams::default(), hash_seed: 0 }
    }
}

/// What the queues have done since they were made. Every item given to
/// [`FlowQueues::enqueue`] is counted in `enqueued`, and leaves as exactly one of `dequeued`,
/// `codel_drops` or `overflow_drops`, or is still queued ([`FlowQueues::len`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FqCounters {
    /// Items taken in.
    pub enqueued: u64,
    /// Items handed out to be sent (marked or not).
    pub dequeued: u64,
    /// Items CoDel dropped at dequeue.
    pub codel_drops: u64,
    /// Items handed out to be sent with CE set (also counted in `dequeued`).
    pub ecn_marks: u64,
    /// Items dropped from the head of the fattest queue because no slot was free.
    pub overflow_drops: u64,
    /// Items whose flow found every way of its set held by other flows, and shared a queue.
    pub collisions: u64,
    /// Queues on the DRR lists now.
    pub active_flows: u32,
    /// The most items ever queued at once.
    pub backlog_high_water: u32,
}

/// What to do with an item [`FlowQueues::dequeue`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Send it.
    Send,
    /// Set CE in it, then send it.
    SendMarked,
    /// CoDel dropped it: free it.
    Dropped,
}

/// An item leaving the queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dequeued<T> {
    /// The item, as given to [`FlowQueues::enqueue`].
    pub item: T,
    /// What to do with it.
    pub fate: Fate,
    /// How long it waited, in nanoseconds.
    pub sojourn_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct Slot<T> {
    item: Option<T>,
    arrival_ns: u64,
    len: u32,
    ect: bool,
    /// Next slot in the same queue, or in the free list.
    next: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Debug, Clone)]
struct Queue {
    key: FlowKey,
    head: u32,
    tail: u32,
    deficit: i64,
    list: List,
    /// Next queue on the same DRR list.
    next: u32,
    codel: Codel,
}

/// A FIFO of queues, linked through [`Queue::next`].
#[derive(Debug, Clone, Copy)]
struct Fifo {
    head: u32,
    tail: u32,
}

/// Flow queues over a fixed pool of items of type `T`; see the module doc.
#[derive(Debug)]
pub struct FlowQueues<T: Copy> {
    params: FqParams,
    slots: Box<[Slot<T>]>,
    free: u32,
    queued: u32,
    queues: Box<[Queue]>,
    /// Bytes queued per queue, apart from [`Queue`] so the overflow scan reads a dense array.
    bytes: Box<[u32]>,
    backlog_bytes: u64,
    /// Where the next overflow scan starts ([`FlowQueues::drop_from_fattest`]).
    scan_from: usize,
    sets: u64,
    new: Fifo,
    old: Fifo,
    counters: FqCounters,
}

impl<T: Copy> FlowQueues<T> {
    /// Empty queues with every slot and queue allocated. `slots` must be at least 1 and below
    /// `u32::MAX`; `queues` is rounded up to a multiple of [`WAYS`] (at least one set).
    pub fn new(params: FqParams) -> Self {
        assert!(params.slots >= 1 && params.slots < NIL as usize, "slots: {}", params.slots);
        let n_queues = params.queues.max(1).div_ceil(WAYS) * WAYS;
        assert!(n_queues < NIL as usize, "queues: {}", params.queues);
        let slots = (0..params.slots)
            .map(|i| Slot {
                item: None,
                arrival_ns: 0,
                len: 0,
                ect: false,
                next: if i + 1 < params.slots { (i + 1) as u32 } else { NIL },
            })
            .collect();
        let queue = Queue {
            key: FlowKey::default(),
            head: NIL,
            tail: NIL,
            deficit: 0,
            list: List::None,
            next: NIL,
            codel: Codel::new(params.codel),
        };
        FlowQueues {
            params: FqParams { queues: n_queues, ..params },
            slots,
            free: 0,
            queued: 0,
            queues: vec![queue; n_queues].into_boxed_slice(),
            bytes: vec![0; n_queues].into_boxed_slice(),
            backlog_bytes: 0,
            scan_from: 0,
            sets: (n_queues / WAYS) as u64,
            new: Fifo { head: NIL, tail: NIL },
            old: Fifo { head: NIL, tail: NIL },
            counters: FqCounters::default(),
        }
    }

    /// The settings (with `queues` as rounded).
    pub fn params(&self) -> &FqParams {
        &self.params
    }

    /// Items queued now.
    pub fn len(&self) -> usize {
        self.queued as usize
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Bytes queued now, over all queues.
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    /// The counters.
    pub fn counters(&self) -> &FqCounters {
        &self.counters
    }

    /// Queues `item` (`len` bytes, counted as at least 1; arrived at `arrival_ns`; ECN-capable
    /// if `ect`) on its flow's queue. If no slot was free, the head item of the fattest queue was
    /// dropped to make room and is returned: the caller frees it.
    #[must_use = "an item dropped on overflow must be freed"]
    pub fn enqueue(&mut self, key: &FlowKey, item: T, len: u32, arrival_ns: u64, ect: bool) -> Option<T> {
        // A queue with items always has bytes, so the fattest queue is never an empty one.
        let len = len.max(1);
        let q = self.classify(key);
        let dropped = if self.free == NIL { self.drop_from_fattest() } else { None };
        let s = self.free;
        let slot = &mut self.slots[s as usize];
        self.free = slot.next;
        *slot = Slot { item: Some(item), arrival_ns, len, ect, next: NIL };
        let queue = &mut self.queues[q];
        match queue.tail {
            NIL => queue.head = s,
            t => self.slots[t as usize].next = s,
        }
        queue.tail = s;
        if queue.list == List::None {
            queue.deficit = i64::from(self.params.quantum);
            self.push(List::New, q as u32);
            self.counters.active_flows += 1;
        }
        self.bytes[q] = self.bytes[q].saturating_add(len);
        self.backlog_bytes += u64::from(len);
        self.queued += 1;
        self.counters.enqueued += 1;
        self.counters.backlog_high_water = self.counters.backlog_high_water.max(self.queued);
        dropped
    }

    /// The next item to leave, chosen by DRR and judged by its queue's CoDel at `now_ns`, or
    /// `None` when nothing is queued. After a [`Fate::Dropped`] item, call again with the same
    /// `now_ns`: CoDel may drop several in a row.
    pub fn dequeue(&mut self, now_ns: u64) -> Option<Dequeued<T>> {
        self.dequeue_from(now_ns, false)
    }

    /// As [`FlowQueues::dequeue`], from the queues on the new list only (flows that became
    /// active since they were last served, sparse flows among them): `None` once that list is
    /// empty, whatever the old list holds.
    pub fn dequeue_new(&mut self, now_ns: u64) -> Option<Dequeued<T>> {
        self.dequeue_from(now_ns, true)
    }

    fn dequeue_from(&mut self, now_ns: u64, new_only: bool) -> Option<Dequeued<T>> {
        loop {
            if new_only && self.new.head == NIL {
                return None;
            }
            let (list, q) = if self.new.head != NIL {
                (List::New, self.new.head)
            } else if self.old.head != NIL {
                (List::Old, self.old.head)
            } else {
                return None;
            };
            let qi = q as usize;
            if self.queues[qi].deficit <= 0 {
                self.queues[qi].deficit += i64::from(self.params.quantum);
                self.pop(list);
                self.push(List::Old, q);
                continue;
            }
            let Some(slot) = self.pop_item(qi) else {
                self.queues[qi].codel.on_empty();
                self.pop(list);
                if list == List::New {
                    self.push(List::Old, q);
                } else {
                    self.queues[qi].list = List::None;
                    self.counters.active_flows -= 1;
                }
                continue;
            };
            let item = slot.item.expect("a queued slot holds an item");
            let sojourn_ns = now_ns.saturating_sub(slot.arrival_ns);
            // The flow's own bytes behind this item (see the module doc).
            let behind = self.bytes[qi];
            let queue = &mut self.queues[qi];
            let fate = match queue.codel.on_dequeue(sojourn_ns, now_ns, behind, slot.ect) {
                Verdict::Drop => {
                    self.counters.codel_drops += 1;
                    Fate::Dropped
                }
                Verdict::Pass => Fate::Send,
                Verdict::Mark => {
                    self.counters.ecn_marks += 1;
                    Fate::SendMarked
                }
            };
            if fate != Fate::Dropped {
                queue.deficit -= i64::from(slot.len);
                self.counters.dequeued += 1;
            }
            return Some(Dequeued { item, fate, sojourn_ns });
        }
    }

    /// The queue `key`'s items go to, claiming a way if the flow holds none.
    #[inline]
    fn classify(&mut self, key: &FlowKey) -> usize {
        let h = key.hash(self.params.hash_seed);
        let base = ((u64::from(h) * self.sets) >> 32) as usize * WAYS;
        let ways = base..base + WAYS;
        if let Some(i) = ways.clone().find(|&i| self.queues[i].key == *key) {
            return i;
        }
        if let Some(i) = ways.clone().find(|&i| self.queues[i].list == List::None) {
            let queue = &mut self.queues[i];
            queue.key = *key;
            queue.codel.reset();
            return i;
        }
        self.counters.collisions += 1;
        base + h as usize % WAYS
    }

    /// Takes the head item off queue `q`, keeping the byte counts and returning its slot to the
    /// free list.
    #[inline]
    fn pop_item(&mut self, q: usize) -> Option<Slot<T>> {
        let queue = &mut self.queues[q];
        let s = queue.head;
        if s == NIL {
            return None;
        }
        let slot = self.slots[s as usize];
        queue.head = slot.next;
        if queue.head == NIL {
            queue.tail = NIL;
        }
        self.slots[s as usize] = Slot { item: None, next: self.free, ..slot };
        self.free = s;
        self.bytes[q] -= slot.len;
        self.backlog_bytes -= u64::from(slot.len);
        self.queued -= 1;
        Some(slot)
    }

    /// Drops the head item of the queue holding the most bytes. The queue stays on its DRR list
    /// (it is removed when a dequeue finds it empty).
    ///
    /// Ties are common (hundreds of TCP flows holding two full frames each): the scan starts
    /// after the last queue that lost, so tied queues take turns. A scan from a fixed place
    /// would drop from the same queue every time, and a TCP flow that loses every packet it
    /// sends waits out ever longer retransmission timeouts.
    fn drop_from_fattest(&mut self) -> Option<T> {
        let n = self.bytes.len();
        let start = self.scan_from % n;
        let mut fattest = start;
        for i in (start + 1..n).chain(0..start) {
            if self.bytes[i] > self.bytes[fattest] {
                fattest = i;
            }
        }
        self.scan_from = fattest + 1;
        let slot = self.pop_item(fattest)?;
        self.counters.overflow_drops += 1;
        slot.item
    }

    fn fifo(&mut self, list: List) -> &mut Fifo {
        match list {
            List::New => &mut self.new,
            List::Old => &mut self.old,
            List::None => unreachable!("no list"),
        }
    }

    fn push(&mut self, list: List, q: u32) {
        self.queues[q as usize].list = list;
        self.queues[q as usize].next = NIL;
        let tail = self.fifo(list).tail;
        match tail {
            NIL => self.fifo(list).head = q,
            t => self.queues[t as usize].next = q,
        }
        self.fifo(list).tail = q;
    }

    fn pop(&mut self, list: List) {
        let q = self.fifo(list).head;
        let next = self.queues[q as usize].next;
        let fifo = self.fifo(list);
        fifo.head = next;
        if next == NIL {
            fifo.tail = NIL;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    /// A distinct IPv4 UDP flow per `n`.
    fn key(n: u16) -> FlowKey {
        FlowKey {
            kind: super::super::flow::FlowKind::Ipv4,
            protocol: 17,
            src: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            dst: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            src_port: n,
            dst_port: 5201,
            vlan: 0,
        }
    }

    /// Items are (flow, sequence number).
    type Item = (u16, u32);

    fn fq(slots: usize, queues: usize) -> FlowQueues<Item> {
        FlowQueues::new(FqParams { slots, queues, hash_seed: 0x5eed, ..FqParams::default() })
    }

    fn put(q: &mut FlowQueues<Item>, flow: u16, seq: u32, len: u32) -> Option<Item> {
        q.enqueue(&key(flow), (flow, seq), len, 0, false)
    }

    #[test]
    fn a_new_flow_is_served_before_a_backlogged_one() {
        let mut q = fq(64, 1024);
        for i in 0..20 {
            assert_eq!(put(&mut q, 1, i, 1500), None);
        }
        // The bulk flow spends its first quantum on two frames (1514 - 1500 > 0 after one).
        assert_eq!(q.dequeue(0).unwrap().item, (1, 0));
        assert_eq!(q.dequeue(0).unwrap().item, (1, 1));
        // A sparse flow arrives: it is served next, ahead of the 18 frames waiting.
        assert_eq!(put(&mut q, 2, 0, 100), None);
        let d = q.dequeue(0).unwrap();
        assert_eq!((d.item, d.fate), ((2, 0), Fate::Send));
        // And the bulk flow carries on.
        assert_eq!(q.dequeue(0).unwrap().item, (1, 2));
        assert_eq!(q.counters().active_flows, 2, "the sparse flow waits on the old list until visited");
        // Once the sparse flow's empty queue has been visited twice (new list, then old list),
        // it leaves the lists, and its next frame is new again.
        for i in 3..6 {
            assert_eq!(q.dequeue(0).unwrap().item, (1, i));
        }
        assert_eq!(q.counters().active_flows, 1);
        assert_eq!(put(&mut q, 2, 1, 100), None);
        assert_eq!(q.dequeue(0).unwrap().item, (2, 1));
    }

    #[test]
    fn flows_of_big_and_small_frames_get_the_same_bytes() {
        let mut q = fq(256, 1024);
        let (mut seq_a, mut seq_b) = (0, 0);
        let mut bytes = [0u64; 2];
        let mut frames = [0u64; 2];
        for round in 0..20_000 {
            // Keep both flows backlogged: 20 big frames and 200 small ones waiting.
            while seq_a - frames[0] < 20 {
                assert_eq!(put(&mut q, 1, seq_a as u32, 1500), None);
                seq_a += 1;
            }
            while seq_b - frames[1] < 200 {
                assert_eq!(put(&mut q, 2, seq_b as u32, 64), None);
                seq_b += 1;
            }
            let d = q.dequeue(round).unwrap();
            assert_eq!(d.fate, Fate::Send);
            let f = usize::from(d.item.0 - 1);
            bytes[f] += if f == 0 { 1500 } else { 64 };
            frames[f] += 1;
        }
        let ratio = bytes[0] as f64 / bytes[1] as f64;
        assert!((0.95..=1.05).contains(&ratio), "bytes {bytes:?}, frames {frames:?}");
        assert!(frames[1] > 20 * frames[0], "the small-frame flow sends many more frames: {frames:?}");
    }

    #[test]
    fn the_fattest_queue_loses_on_overflow() {
        let mut q = fq(16, 1024);
        // Flow 1 has more items, flow 2 more bytes.
        for i in 0..12 {
            assert_eq!(put(&mut q, 1, i, 100), None);
        }
        for i in 0..4 {
            assert_eq!(put(&mut q, 2, i, 1500), None);
        }
        assert_eq!(q.len(), 16);
        // A third flow's frame pushes out flow 2's head, then its next.
        assert_eq!(put(&mut q, 3, 0, 64), Some((2, 0)));
        assert_eq!(put(&mut q, 3, 1, 64), Some((2, 1)));
        // Flow 2 still holds 3,000 bytes to flow 1's 1,200, then 1,500: two more from flow 2,
        // then flow 1's turn.
        assert_eq!(put(&mut q, 3, 2, 64), Some((2, 2)));
        assert_eq!(put(&mut q, 3, 3, 64), Some((2, 3)));
        assert_eq!(put(&mut q, 3, 4, 64), Some((1, 0)));
        assert_eq!(q.counters().overflow_drops, 5);
        assert_eq!(q.len(), 16);
        // Flow 2's queue is empty but still on the new list: dequeue moves past it.
        let mut out = Vec::new();
        while let Some(d) = q.dequeue(0) {
            out.push(d.item);
        }
        assert_eq!(out.len(), 16);
        assert!(!out.iter().any(|&(f, _)| f == 2));
        assert_eq!(q.counters().active_flows, 0);
    }

    #[test]
    fn dequeue_new_serves_the_new_list_only() {
        let mut q = fq(64, 1024);
        for i in 0..6 {
            assert_eq!(put(&mut q, 1, i, 1500), None);
        }
        // The bulk flow spends its first quantum (two frames) and moves to the old list.
        assert_eq!(q.dequeue_new(0).unwrap().item, (1, 0));
        assert_eq!(q.dequeue_new(0).unwrap().item, (1, 1));
        assert_eq!(q.dequeue_new(0), None, "only the old list holds frames");
        assert_eq!(put(&mut q, 2, 0, 100), None);
        assert_eq!(q.dequeue_new(0).unwrap().item, (2, 0));
        assert_eq!(q.dequeue_new(0), None);
        // A full dequeue still finds the bulk flow's frames.
        assert_eq!(q.dequeue(0).unwrap().item, (1, 2));
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn queues_tied_for_fattest_take_turns_losing() {
        // 32 flows of two equal frames each fill the slots; every overflow has 32 candidates.
        let mut q = fq(64, 1024);
        for f in 0..32 {
            for i in 0..2 {
                assert_eq!(put(&mut q, f, i, 1500), None);
            }
        }
        // Each flow that loses a frame sends it again (as TCP retransmits), which makes room by
        // another overflow: 256 drops among 32 tied flows must be spread over all of them, not
        // fall on one flow again and again.
        let mut losses = [0u32; 33];
        // A 33rd flow's frame starts it.
        let mut next = 32u16;
        for seq in 2..258 {
            let (f, _) = put(&mut q, next, seq, 1500).expect("full: something is dropped");
            losses[usize::from(f)] += 1;
            next = f;
        }
        let (least, most) = (losses[..32].iter().min().unwrap(), losses.iter().max().unwrap());
        assert!(most - least <= 1, "tied queues lose in turn: {losses:?}");
    }

    #[test]
    fn collisions_are_seen_and_counted() {
        // One set of eight ways: the ninth flow active at once collides.
        let mut q = fq(64, WAYS);
        for f in 0..8 {
            let _ = put(&mut q, f, 0, 100);
        }
        assert_eq!(q.counters().collisions, 0);
        let _ = put(&mut q, 8, 0, 100);
        let _ = put(&mut q, 8, 1, 100);
        assert_eq!(q.counters().collisions, 2, "counted per item");
        // The colliding flow shares another flow's queue: eight queues hold nine flows.
        assert_eq!(q.counters().active_flows, 8);
        // Drain everything; the ways become free and the ninth flow gets one of its own.
        while q.dequeue(0).is_some() {}
        assert_eq!(q.counters().active_flows, 0);
        let _ = put(&mut q, 8, 2, 100);
        assert_eq!(q.counters().collisions, 2);
        // A key kept: a flow that returns finds its way, others still fit.
        for f in 0..7 {
            let _ = put(&mut q, f, 1, 100);
        }
        assert_eq!(q.counters().collisions, 2);
        assert_eq!(q.counters().active_flows, 8);
    }

    #[test]
    fn codel_drops_and_marks_per_flow_queue() {
        let mut q = fq(64, 1024);
        let (slow, fresh) = (key(1), key(2));
        for i in 0..30 {
            let _ = q.enqueue(&slow, (1, i), 1500, 0, false);
        }
        // Sojourn above target from 10 ms: CoDel waits an interval, then drops.
        assert_eq!(q.dequeue(10 * MS).unwrap().fate, Fate::Send);
        assert_eq!(q.dequeue(50 * MS).unwrap().fate, Fate::Send);
        let d = q.dequeue(110 * MS).unwrap();
        assert_eq!((d.item, d.fate, d.sojourn_ns), ((1, 2), Fate::Dropped, 110 * MS));
        assert_eq!(q.dequeue(110 * MS).unwrap(), Dequeued { item: (1, 3), fate: Fate::Send, sojourn_ns: 110 * MS });
        // Another flow's frames have their own CoDel: fresh frames pass.
        let _ = q.enqueue(&fresh, (2, 0), 100, 110 * MS, true);
        assert_eq!(q.dequeue(111 * MS).unwrap(), Dequeued { item: (2, 0), fate: Fate::Send, sojourn_ns: MS });
        // ECN-capable frames of the slow flow are marked when the next drop is due.
        let mut q2 = fq(64, 1024);
        for i in 0..30 {
            let _ = q2.enqueue(&slow, (1, i), 1500, 0, true);
        }
        q2.dequeue(10 * MS);
        assert_eq!(q2.dequeue(110 * MS).unwrap().fate, Fate::SendMarked);
        let c = q2.counters();
        assert_eq!((c.ecn_marks, c.codel_drops, c.dequeued), (1, 0, 2));
        let c = q.counters();
        assert_eq!((c.ecn_marks, c.codel_drops, c.dequeued), (0, 1, 4));
    }

    #[test]
    fn flows_at_their_smallest_window_are_not_dropped_however_long_the_round() {
        // 450 flows keep two frames queued each, as TCP senders at a two-segment window do,
        // and a 451st keeps ten. The worker sends a frame every 6 µs: a round of 450 frames
        // takes 2.7 ms and every flow's second frame waits past the 5 ms target for the whole
        // simulated second. Dropping would not shorten such a queue, only stall the flows in
        // retransmission timeouts: CoDel drops from the fat flow alone.
        const THIN: u16 = 450;
        let fat = THIN;
        // Queues enough that no two flows share one (a shared queue holds four frames).
        let mut q = fq(8192, 8192);
        let mut seq = 0u32;
        let mut now = 0u64;
        for f in 0..THIN {
            for _ in 0..2 {
                assert_eq!(q.enqueue(&key(f), (f, seq), 1500, now, false), None);
                seq += 1;
            }
        }
        for _ in 0..10 {
            assert_eq!(q.enqueue(&key(fat), (fat, seq), 1500, now, false), None);
            seq += 1;
        }
        let mut drops = [0u32; 451];
        let mut late = 0u32;
        while now < 1_000 * MS {
            now += 6_000;
            let d = loop {
                let d = q.dequeue(now).expect("every flow keeps frames queued");
                if d.fate != Fate::Dropped {
                    break d;
                }
                drops[usize::from(d.item.0)] += 1;
                // The sender puts the lost frame's place back in the queue.
                assert_eq!(q.enqueue(&key(d.item.0), (d.item.0, seq), 1500, now, false), None);
                seq += 1;
            };
            late += u32::from(d.sojourn_ns > 5 * MS);
            // Sent: the flow's next frame arrives in its place.
            assert_eq!(q.enqueue(&key(d.item.0), (d.item.0, seq), 1500, now, false), None);
            seq += 1;
        }
        assert!(late > 100_000, "the round really was past the target: {late} late frames");
        let lost: Vec<_> = drops[..usize::from(THIN)].iter().enumerate().filter(|(_, &n)| n > 0).collect();
        assert!(
            lost.is_empty(),
            "{} two-frame flows lost frames, first (flow, drops): {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        assert!(drops[usize::from(fat)] > 0, "the ten-frame flow was never slowed");
        assert_eq!((q.counters().overflow_drops, q.counters().collisions), (0, 0));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Enqueue { flow: u16, len: u32, ect: bool },
        Dequeue,
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..24, 1u32..1600, any::<bool>()).prop_map(|(flow, len, ect)| Op::Enqueue { flow, len, ect }),
            3 => Just(Op::Dequeue),
            1 => (0u64..40 * MS).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn every_item_leaves_exactly_once_and_the_counters_agree(
            ops in prop::collection::vec(op(), 1..600),
            slots in 1usize..40,
            sets in 1usize..4,
        ) {
            let mut q: FlowQueues<u32> = FlowQueues::new(FqParams {
                slots,
                queues: sets * WAYS,
                codel: CodelParams { target_ns: MS, interval_ns: 10 * MS, ..CodelParams::default() },
                ..FqParams::default()
            });
            let mut now = 0u64;
            let mut given = Vec::new(); // (flow, ect) by item id
            let mut seen = Vec::new(); // times each item came out
            let (mut sent, mut marked, mut codel, mut overflow) = (0u64, 0u64, 0u64, 0u64);
            let mut out_order: Vec<Vec<u32>> = vec![Vec::new(); 24];
            let mut take = |d: Dequeued<u32>, given: &Vec<(u16, bool)>, seen: &mut Vec<u32>| {
                seen[d.item as usize] += 1;
                out_order[usize::from(given[d.item as usize].0)].push(d.item);
                match d.fate {
                    Fate::Send => sent += 1,
                    Fate::SendMarked => {
                        assert!(given[d.item as usize].1, "a frame that is not ECN-capable was marked");
                        sent += 1;
                        marked += 1;
                    }
                    Fate::Dropped => codel += 1,
                }
            };
            for op in ops {
                match op {
                    Op::Enqueue { flow, len, ect } => {
                        let id = given.len() as u32;
                        given.push((flow, ect));
                        seen.push(0);
                        if let Some(dropped) = q.enqueue(&key(flow), id, len, now, ect) {
                            seen[dropped as usize] += 1;
                            overflow += 1;
                        }
                    }
                    Op::Dequeue => {
                        if let Some(d) = q.dequeue(now) {
                            take(d, &given, &mut seen);
                        } else {
                            prop_assert!(q.is_empty());
                        }
                    }
                    Op::Advance(dt) => now += dt,
                }
                prop_assert!(q.len() <= slots);
                let bytes: u64 = q.bytes.iter().map(|&b| u64::from(b)).sum();
                prop_assert_eq!(bytes, q.backlog_bytes());
            }
            while let Some(d) = q.dequeue(now) {
                take(d, &given, &mut seen);
            }
            prop_assert!(seen.iter().all(|&n| n == 1), "lost or duplicated: {:?}", seen);
            let c = *q.counters();
            prop_assert_eq!(c.enqueued, given.len() as u64);
            prop_assert_eq!((c.dequeued, c.ecn_marks, c.codel_drops, c.overflow_drops), (sent, marked, codel, overflow));
            prop_assert_eq!(c.enqueued, c.dequeued + c.codel_drops + c.overflow_drops);
            prop_assert_eq!((q.len(), q.backlog_bytes(), c.active_flows), (0, 0, 0));
            prop_assert!(c.backlog_high_water as usize <= slots);
            // Without collisions each flow has one queue, a FIFO: its items leave in order.
            if c.collisions == 0 {
                for order in &out_order {
                    prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "out of order: {:?}", order);
                }
            }
        }
    }
}
