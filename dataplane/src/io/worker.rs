//! The worker: RX rings → decision → TX rings, in batches, with frame accounting.
//!
//! One round: for each port, take up to [`BATCH`] frames off its RX ring, decide each, and
//! queue it for its egress port(s); put each port's queued frames on its TX ring and kick once;
//! reap completion rings into the free list; top the fill rings up from the free list. Nothing is
//! allocated per frame (every buffer is sized at start) and nothing is logged: every outcome is a
//! counter. Batch 64: large enough to amortise a kick and a ring index update over many frames,
//! small enough that a batch's descriptors and headers stay in L1.
//!
//! Fill and completion rings belong to a (port, queue), not to a worker: in the per-CPU layout
//! every worker's socket on a port shares them (see `io`). A worker takes their lock to reap or
//! refill, and leaves the work to a member already holding it, except where the work must be
//! done (at start, before sleeping, on the way out). Completions are the reaper's whoever sent
//! them, so a member's free list is bounded ([`super::xsk::Pool::spill`]) and the rest kept in
//! the pool's spare list, where refills and a member short of frames take from.
//!
//! Polling: `busy` spins on the rings (lowest latency, one core burnt per worker even when
//! idle); `adaptive` spins a short while after the last work, then sleeps in poll(2) on the RX
//! sockets with a bounded timeout, after topping up the fill rings so that the kernel never
//! waits on an empty one while the worker sleeps.
//!
//! Loop accounting ([`crate::load`]): each round is timed — two `CLOCK_MONOTONIC` reads, one
//! of which also gives the round's milliseconds, plus two around each kick and each sleep —
//! and the thread's run delay is read from `/proc/thread-self/schedstat` every 10 ms, so that
//! `xfwd show stats` can say how busy a spinning worker really is.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use xsk_rs::FrameDesc;

use super::glean::GleanSender;
use super::options::PollMode;
use super::start::plan::AqmPlan;
use super::start::sched;
use super::xdp::STAMP_LEN;
use super::xsk::{FrameRings, QueueSockets, RingSizes};
use crate::action::{Action, SCRATCH_LEN};
use crate::aqm::{flow_key, is_ect, mark_ce, Codel, EcnOutcome, Fate, FlowQueues, Verdict};
use crate::l2::{self, Fdb, Learn};
use crate::l3::{self, NeighborTable, NeighborTable6, RouterState, RouterTables, TokenBucket};
use crate::load::{parse_schedstat, LoopAccount};
use crate::stats::sojourn_bucket;
use crate::stats::{PortCounters, QueueCounters};
use crate::time::{Clock, Seconds};
use crate::PortId;

/// Frames taken off one RX ring per round.
pub const BATCH: usize = 64;
/// Idle rounds an adaptive worker spins before it sleeps.
const SPIN_ROUNDS: u32 = 128;
/// Longest sleep in poll(2): bounds how late a stop request or a retried kick is seen.
const POLL_TIMEOUT_MS: i32 = 10;
/// How often the kernel's socket statistics are copied into the counters.
const XSK_STATS_EVERY: Duration = Duration::from_millis(250);
/// How long a worker under SCHED_FIFO works without a pause before it steps down to a normal
/// thread's share until its next pause: the kernel's own budget for a softirq run before it
/// defers the rest to ksoftirqd, a normal thread. Light load keeps the latency of a real-time
/// thread; sustained load shares the core with everything else, as the kernel path does.
pub const YIELD_AFTER_MS: u64 = 2;
/// Rounds with work in a row before a worker counts as under sustained load (so that one slow
/// round, a first touch of memory, say, is not taken for it).
const YIELD_AFTER_ROUNDS: u32 = 32;
/// Most kicks per TX flush: a full TX ring at the kernel's 32 per kick, and some slack.
const fn max_kicks(tx_ring: u32) -> u32 {
    tx_ring / 32 + 8
}
/// With flow queues: batches taken off each RX ring per round, at most, against one batch
/// served to each TX ring. The worker empties its RX rings faster than it can send, so that
/// when it is the bottleneck the backlog waits in the flow queues, where it is scheduled
/// fairly and dropped from the fattest flow, and not in the RX rings' FIFO.
const RX_BATCHES_PER_ROUND: usize = 4;
/// With flow queues: the most frames left on a TX ring not yet taken by the kernel (a NIC
/// sending in zero-copy mode drains it at line rate). What waits beyond this waits in the flow
/// queues, where it is scheduled; a long TX ring would be another FIFO in front of the link.
const TX_QUEUE_LIMIT: u32 = 4 * BATCH as u32;

/// The decision a worker applies to each received frame.
pub trait Decide: Send {
    /// What to do with `frame`, received on `ingress` at `now_ms` (milliseconds of the
    /// worker's [`Clock`]). May rewrite the frame in place, or build an answer in `scratch`
    /// ([`Action::Reply`]). `counters` are the ingress port's, for outcomes that are not drops.
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action;

    /// Takes a copy of a frame, received on `ingress`, whose next hop `next_hop` on `port` is
    /// unresolved ([`Action::Glean`]). Returns false when it could not be queued (the frame is
    /// then dropped as [`crate::Reason::GleanQueueFull`]).
    fn glean(&mut self, _frame: &[u8], _ingress: PortId, _port: PortId, _next_hop: IpAddr) -> bool {
        false
    }

    /// Called once per round with the queue's counters, for state the decision keeps itself.
    fn publish(&mut self, _counters: &QueueCounters) {}

    /// Called before the worker sleeps: lets go of what others wait for while it sleeps (the
    /// router's tables, which the writer of the kernel's routes reuses once no reader holds
    /// them: see `l3::incremental`).
    fn sleeping(&mut self) {}

    /// How many frames ahead of the decision [`Decide::prefetch`] runs (0: never). Far enough
    /// for a table line to arrive from memory while the frames before it are decided, near
    /// enough not to overrun the CPU's outstanding-miss slots (64 at once measured worst).
    const PREFETCH_DISTANCE: usize = 0;

    /// Starts the table reads `decide` will make for `frame`, [`Decide::PREFETCH_DISTANCE`]
    /// frames before its decision (a hint: no effect on results).
    fn prefetch(&mut self, _frame: &[u8]) {}

    /// Whether a frame of `len` bytes may leave by `port` when flooded (a decision that
    /// checks sizes itself for what it forwards to one port; the router builds no floods).
    fn fits(&self, _len: usize, _port: usize) -> bool {
        true
    }
}

/// The learning bridge ([`crate::l2::bridge`]) as a worker decision. A frame longer than its
/// egress port's MTU allows (the MTU, an Ethernet header and one VLAN tag, as the kernel's
/// bridge checks) is not sent there: dropped as [`crate::Reason::TooBigToForward`].
#[derive(Debug, Clone)]
pub struct BridgeDecide {
    /// The FDB shared by all workers.
    pub fdb: Arc<Fdb>,
    /// The longest frame each port sends, by port: followed at run time
    /// ([`crate::io::Forwarder::port_changed`]).
    pub frame_max: Arc<[AtomicU32]>,
}

impl Decide for BridgeDecide {
    // Measured (benches/bridge.rs): 4 ahead gains a tenth over 64k stations and costs a
    // sixth over 4k, where the table is in cache and the prefetch's hashing is pure overhead.
    const PREFETCH_DISTANCE: usize = 4;

    #[inline]
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        counters: &PortCounters,
        _scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let v = l2::decide(frame, ingress, &self.fdb, Seconds::from_ms(now_ms));
        if v.learn == Some(Learn::Full) {
            counters.fdb_full.inc();
        }
        match v.action {
            Action::Forward(q) if !self.fits(frame.len(), q.index()) => Action::Drop(crate::Reason::TooBigToForward),
            a => a,
        }
    }

    #[inline]
    fn prefetch(&mut self, frame: &[u8]) {
        l2::prefetch(frame, &self.fdb);
    }

    #[inline]
    fn fits(&self, len: usize, port: usize) -> bool {
        self.frame_max.get(port).is_none_or(|m| len <= m.load(Relaxed) as usize)
    }
}

/// Whether an untagged frame says it carries IPv6 (the decision checks the rest).
#[inline(always)]
fn is_ipv6(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&crate::wire::ethernet::ETHERTYPE_IPV6.to_be_bytes()[..])
}

/// The router ([`crate::l3::router`] for IPv4, [`crate::l3::router6`] for IPv6, by EtherType)
/// as a worker decision.
pub struct RouterDecide {
    /// The current tables; a reload swaps them, and the next frame sees the new ones.
    pub tables: Arc<arc_swap::ArcSwap<RouterTables>>,
    /// The tables this worker holds (`None` while it sleeps).
    pub cache: Option<arc_swap::Cache<Arc<arc_swap::ArcSwap<RouterTables>>, Arc<RouterTables>>>,
    /// The neighbour table (read only: the ARP thread writes it).
    pub neighbors: Arc<NeighborTable>,
    /// The IPv6 neighbour table (read only: the ARP thread writes it).
    pub neighbors6: Arc<NeighborTable6>,
    /// This worker's ICMP rate limit and IP identification.
    pub state: RouterState,
    /// Where frames with unresolved next hops go.
    pub glean: GleanSender,
    /// Number of parts (workers and the ARP thread) the router's ICMP rate and burst are
    /// divided among ([`l3::icmp_share`]).
    pub icmp_parts: u32,
}

impl std::fmt::Debug for RouterDecide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterDecide").finish_non_exhaustive()
    }
}

impl Decide for RouterDecide {
    // Measured (benches/router.rs, 1M prefixes): 16 ahead, 42 Mpps over 1M random
    // destinations against 24 with the whole batch prefetched first and 11 without.
    const PREFETCH_DISTANCE: usize = 16;

    #[inline]
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        _counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let t = self.cache.get_or_insert_with(|| arc_swap::Cache::new(Arc::clone(&self.tables))).load();
        if is_ipv6(frame) {
            return l3::decide6(frame, ingress, t, &self.neighbors6, &mut self.state, now_ms, scratch);
        }
        l3::decide(frame, ingress, t, &self.neighbors, &self.neighbors6, &mut self.state, now_ms, scratch)
    }

    #[inline]
    fn prefetch(&mut self, frame: &[u8]) {
        let t = self.cache.get_or_insert_with(|| arc_swap::Cache::new(Arc::clone(&self.tables))).load();
        if is_ipv6(frame) {
            l3::prefetch6(frame, t);
        } else {
            l3::prefetch(frame, t);
        }
    }

    fn glean(&mut self, frame: &[u8], ingress: PortId, port: PortId, next_hop: IpAddr) -> bool {
        self.glean.send(frame, ingress, port, next_hop)
    }

    fn sleeping(&mut self) {
        self.cache = None;
    }

    fn publish(&mut self, counters: &QueueCounters) {
        counters.icmp_rate_limited.set(self.state.icmp_rate_limited);
        // A reload may carry new ICMP limits and more next hops: they travel with the tables,
        // and are taken in here, between batches, where the decision's state may allocate.
        let t = self.cache.get_or_insert_with(|| arc_swap::Cache::new(Arc::clone(&self.tables))).load();
        let share = l3::icmp_share(t.icmp_rate, t.icmp_burst, self.icmp_parts);
        if share != self.state.icmp_limit.config() {
            self.state.icmp_limit = TokenBucket::new(share.0, share.1);
        }
        self.state.fit(t);
    }
}

/// One queue's worker. Built on the control thread, run on its pinned thread.
pub struct Worker<D: Decide> {
    sockets: QueueSockets,
    decide: D,
    counters: Arc<QueueCounters>,
    stop: Arc<AtomicBool>,
    poll: PollMode,
    clock: Clock,
    /// Free frames, per UMEM (the only place the worker takes frames from).
    free: Vec<Vec<FrameDesc>>,
    /// What this worker moved, per UMEM (published with `free`: [`crate::stats::MemberFrames`]).
    flows: Vec<Flows>,
    /// Frames queued for each egress port during a round.
    tx_batch: Vec<Vec<FrameDesc>>,
    /// Scratch for RX and completion descriptors.
    scratch: Vec<FrameDesc>,
    /// Where decisions build answers (ICMP errors).
    answer: [u8; SCRATCH_LEN],
    /// Busy mode with preferred busy polling: drive the driver from idle rounds.
    busy_poll: bool,
    /// CoDel on this worker's RX ring of each port, by port (empty: not this kind of queue
    /// management).
    codel: Vec<Codel>,
    /// Flow queues in front of each egress port's TX ring, by port (empty: none).
    fq: Vec<FlowQueues<FrameDesc>>,
    /// Whether the XDP program stamps arrival times (queue management on).
    stamped: bool,
    /// The key of the XDP program's stamps (see [`take_stamp`]).
    stamp_key: u64,
    /// The sockets' ring sizes (the same for every port).
    rings: RingSizes,
    /// Frames taken off the RX rings in the current round (loop accounting).
    round_frames: u64,
    /// Nanoseconds spent in kicks since the accounting last took them.
    kick_ns: u64,
}

impl<D: Decide> std::fmt::Debug for Worker<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("queue", &self.counters.queue).finish()
    }
}

impl<D: Decide> Worker<D> {
    /// A worker over `sockets` applying `decide`, counting into `counters`, until `stop`. The
    /// fill rings are filled here, so the sockets can receive as soon as the XDP program is
    /// attached, before the worker thread runs.
    pub fn new(
        sockets: QueueSockets,
        decide: D,
        counters: Arc<QueueCounters>,
        stop: Arc<AtomicBool>,
        poll: PollMode,
        clock: Clock,
    ) -> Self {
        let nports = sockets.ports.len();
        let rings = sockets.pools.first().map_or_else(RingSizes::default, |s| s.pool.sizes);
        let mut sockets = sockets;
        // Room for every frame of each UMEM: in a shared pool frames move between members, and
        // no list may grow while frames flow.
        let free = sockets
            .pools
            .iter_mut()
            .map(|s| {
                let mut free = Vec::with_capacity(s.pool.gauges.total as usize);
                free.append(&mut s.frames);
                free
            })
            .collect();
        let flows = vec![Flows::default(); sockets.pools.len()];
        let mut w = Worker {
            sockets,
            decide,
            counters,
            stop,
            poll,
            clock,
            free,
            flows,
            tx_batch: (0..nports).map(|_| Vec::with_capacity(BATCH)).collect(),
            scratch: vec![FrameDesc::default(); BATCH.max(rings.completion as usize)],
            answer: [0; SCRATCH_LEN],
            busy_poll: false,
            codel: Vec::new(),
            fq: Vec::new(),
            stamped: false,
            stamp_key: 0,
            rings,
            round_frames: 0,
            kick_ns: 0,
        };
        for p in 0..nports {
            w.refill(p, Lock::Wait);
        }
        w.publish_frames();
        w
    }

    /// Busy mode on sockets set for preferred busy polling: whenever a port's RX ring gave
    /// less than a full batch, the worker asks its driver to poll (a zero-length `recvfrom`),
    /// since with preferred busy polling the driver waits for the application rather than for
    /// an interrupt.
    pub fn drive_busy_poll(mut self, on: bool) -> Self {
        self.busy_poll = on && self.poll == PollMode::Busy;
        self
    }

    /// Queue management (`Some`), by the arrival time the XDP program stamped on each frame
    /// with `key` (the stamp is removed at once). Either CoDel on this worker's RX ring of each
    /// port, judging each frame as it is taken off: a frame that waited beyond the target for
    /// long enough is dropped, or marked CE where it is ECN-capable; or flow queues in front of
    /// each egress port's TX ring, where frames wait by flow, are served by deficit round
    /// robin and judged by their flow's CoDel on leaving.
    pub fn manage_queues(mut self, aqm: Option<(AqmPlan, u64)>) -> Self {
        let Some((plan, key)) = aqm else {
            return self;
        };
        let nports = self.sockets.ports.len();
        match plan.flow_queues {
            // The flow hash is seeded with a secret of this start, so that no one outside can
            // aim flows at one set of the table.
            Some(fq) => {
                let fq = crate::aqm::FqParams { hash_seed: key.rotate_left(29) ^ 0x5851_f42d_4c95_7f2d, ..fq };
                self.fq = (0..nports).map(|_| FlowQueues::new(fq)).collect();
            }
            None => self.codel = (0..nports).map(|_| Codel::new(plan.codel)).collect(),
        }
        self.stamped = true;
        self.stamp_key = key;
        self
    }

    /// Runs until the stop flag is set, then publishes the final counters.
    pub fn run(mut self) {
        let nports = self.sockets.ports.len();
        let mut idle_rounds = 0u32;
        let mut last_xsk_ms = 0u64;
        // SCHED_FIFO, inherited from start-up: stepped down under sustained load, where the
        // worker may step up again afterwards.
        let mut realtime = sched::fifo_priority().filter(|&p| sched::may_step_up(p));
        let mut stepped_down = false;
        // When the current run of rounds with work began (a sleep does not count as work).
        let mut busy_since_ms = self.clock.now_ms();
        let mut busy_rounds = 0u32;
        // The round's start, read for the accounting, gives its milliseconds too: the clock's
        // origin on CLOCK_MONOTONIC (Instant's clock on Linux), between two reads around it.
        let origin_ns = {
            let before = monotonic_ns();
            let elapsed = self.clock.elapsed_ns();
            let after = monotonic_ns();
            (before / 2 + after / 2).saturating_sub(elapsed)
        };
        let mut acct = Accounting { acct: LoopAccount::new(monotonic_ns()), delay: RunDelay::open() };
        acct.after_round(acct.acct.round_start(), &self.counters.load, true);
        let acct = &mut acct;
        while !self.stop.load(Ordering::Relaxed) {
            let now_ms = acct.acct.round_start().saturating_sub(origin_ns) / 1_000_000;
            self.round_frames = 0;
            self.kick_ns = 0;
            let mut work = 0usize;
            if self.fq.is_empty() {
                for p in 0..nports {
                    work += self.pull(p, now_ms);
                }
            } else {
                work += self.serve_round(now_ms);
            }
            let rx_end = monotonic_ns();
            let tx_rx = std::mem::take(&mut self.kick_ns);
            for p in 0..nports {
                // Completions are work when they are this worker's own; in a shared pool they
                // may be another member's, which must not keep an idle worker awake.
                let reaped = self.reap(p, Lock::Try);
                if self.sockets.pools[self.sockets.ports[p].pool].pool.spill == usize::MAX {
                    work += reaped;
                }
                // Frames still in the TX ring were not sent by the last kick (busy device,
                // budget): kick again, every round, busy or idle.
                if self.tx_outstanding(p) > 0 {
                    work += self.kick(p);
                }
                self.refill(p, Lock::Try);
            }
            for u in 0..self.free.len() {
                if self.free[u].len() > self.sockets.pools[u].pool.spill {
                    self.spill(u);
                }
            }
            self.publish_frames();
            self.decide.publish(&self.counters);
            // The round's one clock read serves the statistics timer too.
            if now_ms.saturating_sub(last_xsk_ms) >= XSK_STATS_EVERY.as_millis() as u64 {
                self.read_xsk_stats(Lock::Try);
                last_xsk_ms = now_ms;
            }
            let end = monotonic_ns();
            if work > 0 {
                let tx_reap = std::mem::take(&mut self.kick_ns);
                acct.acct.work_round(rx_end, end, self.round_frames, tx_rx, tx_reap);
                // Every round with work: the frames counted here match those received.
                acct.after_round(end, &self.counters.load, true);
                idle_rounds = 0;
                if busy_rounds == 0 {
                    busy_since_ms = now_ms;
                }
                busy_rounds = busy_rounds.saturating_add(1);
                if realtime.is_some()
                    && !stepped_down
                    && busy_rounds >= YIELD_AFTER_ROUNDS
                    && now_ms.saturating_sub(busy_since_ms) > YIELD_AFTER_MS
                {
                    stepped_down = sched::step_down().is_ok();
                    if stepped_down {
                        self.counters.rt_yields.inc();
                    } else {
                        // Not allowed down (never seen): stay as started, without asking again.
                        realtime = None;
                    }
                }
                continue;
            }
            // A round without work: the load let up.
            busy_rounds = 0;
            if let (Some(p), true) = (realtime, stepped_down) {
                stepped_down = false;
                if sched::step_up(p).is_err() {
                    // Not allowed back (no real-time limit): a normal thread from now on.
                    realtime = None;
                }
            }
            match self.poll {
                PollMode::Busy => {
                    std::hint::spin_loop();
                    acct.acct.idle_round(end, 0);
                    acct.after_round(end, &self.counters.load, false);
                }
                PollMode::Adaptive => {
                    idle_rounds += 1;
                    if idle_rounds >= SPIN_ROUNDS {
                        // Reap and top every fill ring up before sleeping, waiting for a member
                        // that holds a lock, so that the kernel never waits on frames this
                        // worker could give.
                        for p in 0..nports {
                            self.reap(p, Lock::Wait);
                            self.refill(p, Lock::Wait);
                        }
                        self.publish_frames();
                        let asleep = monotonic_ns();
                        self.sleep();
                        let awake = monotonic_ns();
                        acct.acct.idle_round(awake, awake - asleep);
                        acct.after_round(awake, &self.counters.load, true);
                    } else {
                        acct.acct.idle_round(end, 0);
                        acct.after_round(end, &self.counters.load, false);
                    }
                }
            }
        }
        // Settling takes in what the rings still hold: one last round, so that the frames
        // counted still match those received.
        self.round_frames = 0;
        self.kick_ns = 0;
        self.settle();
        let end = monotonic_ns();
        if self.round_frames > 0 {
            acct.acct.work_round(end, end, self.round_frames, std::mem::take(&mut self.kick_ns), 0);
        } else {
            acct.acct.idle_round(end, 0);
        }
        self.counters.load.publish(acct.acct.totals());
        self.read_xsk_stats(Lock::Wait);
        self.publish_frames();
    }

    /// On the way out (the program is already detached, so nothing new arrives): lets the
    /// kernel finish what it holds — TX frames sent and completed, RX frames it took from a
    /// fill ring posted — for up to 100 ms, so that the final accounting finds every frame in
    /// a ring or a free list. Other members of the pool settle at the same time; what the
    /// kernel holds is judged over the whole pool, from what each member last published.
    fn settle(&mut self) {
        let nports = self.sockets.ports.len();
        let deadline = std::time::Instant::now() + Duration::from_millis(100);
        // What waits in the flow queues is sent (or dropped by CoDel), as it would have been.
        while self.fq.iter().any(|f| !f.is_empty()) && std::time::Instant::now() < deadline {
            self.serve_round(self.clock.now_ms());
            for p in 0..nports {
                self.reap(p, Lock::Wait);
            }
        }
        // What could not leave in time (an egress whose TX ring stays full: link down) is
        // dropped as such, so that every frame received is sent or dropped with a reason.
        for q in 0..self.fq.len() {
            let u = self.sockets.ports[q].pool;
            while let Some(d) = self.fq[q].dequeue(u64::MAX) {
                self.counters.ports[q].drop(crate::Reason::TxRingFull);
                self.free[u].push(d.item);
            }
        }
        while std::time::Instant::now() < deadline {
            for p in 0..nports {
                self.reap(p, Lock::Wait);
                if self.tx_outstanding(p) > 0 {
                    self.kick(p);
                }
            }
            // Completions were just reaped: what is not in a ring is still the kernel's.
            self.publish_frames();
            self.census(Lock::Wait);
            let held = |s: &super::xsk::PoolShare| {
                let f = s.pool.gauges.snapshot();
                f.rx_kernel + f.tx_kernel
            };
            if self.sockets.pools.iter().map(held).sum::<u64>() == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Takes a batch off port `p`'s RX ring, decides and transmits it. Returns frames received.
    fn receive(&mut self, p: usize, now_ms: u64) -> usize {
        let nports = self.sockets.ports.len();
        let ring = &mut self.sockets.ports[p];
        // SAFETY: descriptors come back from the RX ring of a socket on this UMEM; the frames
        // they name are now the worker's (see the ownership rule in `io`).
        let n = unsafe { ring.rx.consume(&mut self.scratch[..BATCH]) };
        if n == 0 {
            if let Some(c) = self.codel.get_mut(p) {
                c.on_empty();
            }
            return 0;
        }
        // The dequeue time of this batch for CoDel on the RX ring, and the frames still queued
        // behind it; with flow queues, the arrival time of frames that carry no stamp.
        let now_ns = if self.stamped { monotonic_ns() } else { 0 };
        let behind = if self.codel.is_empty() { 0 } else { ring.rx.nb_avail_exact() as usize };
        let u = ring.pool;
        self.sockets.pools[u].pool.in_flight[ring.ring].fill.fetch_sub(n as i64, Relaxed);
        self.flows[u].fill -= n as i64;
        self.counters.ports[p].rx_frames.add(n as u64);
        self.round_frames += n as u64;
        let ingress = PortId(p as u8);
        // A pipeline over the batch: each frame's table lines are asked for D frames before
        // its decision, and its header 2D before, so that cache misses overlap the work.
        let d = D::PREFETCH_DISTANCE;
        if d > 0 {
            for j in 0..2 * d {
                self.prefetch_frame(u, j, n, Stage::Header);
            }
            for j in 0..d {
                self.prefetch_frame(u, j, n, Stage::Tables);
            }
        }
        for i in 0..n {
            if d > 0 {
                self.prefetch_frame(u, i + 2 * d, n, Stage::Header);
                self.prefetch_frame(u, i + d, n, Stage::Tables);
            }
            let mut desc = self.scratch[i];
            // When the frame arrived (flow queues only).
            let mut at = now_ns;
            let action = {
                // SAFETY: the worker holds this frame (just received) and nothing aliases it.
                let mut data = unsafe { self.sockets.pools[u].umem.data_mut(&mut desc) };
                let verdict = match self.codel.get_mut(p) {
                    Some(codel) => {
                        judge(codel, &self.counters, &mut data, self.stamp_key, p, now_ns, n - i - 1 + behind)
                    }
                    None if self.stamped => {
                        match take_stamp(&mut data, self.stamp_key) {
                            Some(t) => at = t,
                            None => self.counters.unstamped.inc(),
                        }
                        Verdict::Pass
                    }
                    None => Verdict::Pass,
                };
                let frame = data.contents_mut();
                let pc = &self.counters.ports[p];
                pc.rx_bytes.add(frame.len() as u64);
                match verdict {
                    Verdict::Drop => Action::Drop(crate::Reason::AqmDrop),
                    Verdict::Mark | Verdict::Pass => self.decide.decide(frame, ingress, now_ms, pc, &mut self.answer),
                }
            };
            match action {
                Action::Forward(q) if q.index() < nports => self.queue_tx(desc, p, q.index(), at),
                Action::ForwardTrimmed { port, len } if port.index() < nports => {
                    // SAFETY: the worker still holds this frame; nothing aliases it.
                    let mut data = unsafe { self.sockets.pools[u].umem.data_mut(&mut desc) };
                    let mut cur = data.cursor();
                    if usize::from(len) < cur.pos() {
                        cur.set_pos(usize::from(len));
                    }
                    self.queue_tx(desc, p, port.index(), at);
                }
                Action::Flood => {
                    self.counters.ports[p].flooded.inc();
                    self.flood(desc, p, at);
                }
                Action::Drop(reason) => {
                    self.counters.ports[p].drop(reason);
                    self.free[u].push(desc);
                }
                Action::Reply { port, len, cause } if port.index() < nports => {
                    // The original is not forwarded (counted under its cause); its frame
                    // carries the answer instead.
                    let pc = &self.counters.ports[p];
                    pc.drop(cause);
                    pc.icmp_sent.inc();
                    // SAFETY: the worker still holds this frame; nothing aliases it.
                    let mut data = unsafe { self.sockets.pools[u].umem.data_mut(&mut desc) };
                    let mut cur = data.cursor();
                    cur.set_pos(0);
                    // An answer (at most SCRATCH_LEN bytes) always fits a UMEM frame.
                    let _ = io::Write::write_all(&mut cur, &self.answer[..usize::from(len)]);
                    self.queue_tx(desc, p, port.index(), at);
                }
                Action::Glean { port, next_hop } => {
                    let queued = {
                        // SAFETY: the worker still holds this frame; it is only read.
                        let data = unsafe { self.sockets.pools[u].umem.data(&desc) };
                        self.decide.glean(data.contents(), ingress, port, next_hop)
                    };
                    if queued {
                        self.counters.ports[p].gleaned.inc();
                    } else {
                        self.counters.ports[p].drop(crate::Reason::GleanQueueFull);
                    }
                    self.free[u].push(desc);
                }
                Action::Forward(_) | Action::ForwardTrimmed { .. } | Action::Reply { .. } => {
                    // A port index beyond the ports is a decision bug; never seen, but never a panic.
                    self.counters.ports[p].drop(crate::Reason::NoEgress);
                    self.free[u].push(desc);
                }
            }
        }
        for q in 0..nports {
            if !self.tx_batch[q].is_empty() {
                self.transmit(q);
            }
        }
        n
    }

    /// One prefetch of the receive pipeline for frame `j` of the `n` in `scratch` (none past
    /// the end; frames of UMEM `u`): its header, or the table lines its decision will read.
    #[inline(always)]
    fn prefetch_frame(&mut self, u: usize, j: usize, n: usize, stage: Stage) {
        let Some(desc) = self.scratch[..n].get(j) else {
            return;
        };
        // SAFETY: the worker holds this frame (just received); it is only read.
        let data = unsafe { self.sockets.pools[u].umem.data(desc) };
        match stage {
            Stage::Header => crate::prefetch::read(data.contents().as_ptr()),
            // A stamp in front is still there (the frame moves down when it is judged).
            // (Only with queue management on: without it nothing is stamped, and nothing read.)
            Stage::Tables if self.stamped => match read_stamp(data.contents(), self.stamp_key) {
                Some((_, Stamp::Front)) => self.decide.prefetch(&data.contents()[STAMP_LEN..]),
                _ => self.decide.prefetch(data.contents()),
            },
            Stage::Tables => self.decide.prefetch(data.contents()),
        }
    }

    /// Queues `desc` (received on `ingress`, arrived at `at`) for every other port: copies for
    /// all but the last, the original for the last.
    fn flood(&mut self, desc: FrameDesc, ingress: usize, at: u64) {
        let nports = self.sockets.ports.len();
        let u = self.sockets.ports[ingress].pool;
        let len = desc.lengths().data();
        // Ports the frame is too long for are left out, each counted.
        for _ in (0..nports).filter(|&q| q != ingress && !self.decide.fits(len, q)) {
            self.counters.ports[ingress].drop(crate::Reason::TooBigToForward);
        }
        let Some(last) = (0..nports).rev().find(|&q| q != ingress && self.decide.fits(len, q)) else {
            if (0..nports).all(|q| q == ingress) {
                self.counters.ports[ingress].drop(crate::Reason::NoEgress);
            }
            self.free[u].push(desc);
            return;
        };
        for q in 0..nports {
            if q == ingress || q == last || !self.decide.fits(len, q) {
                continue;
            }
            match self.copy_frame(&desc, u, self.sockets.ports[q].pool) {
                Some(copy) => self.push_tx(q, copy, at),
                None => self.counters.ports[q].drop(crate::Reason::NoFreeFrame),
            }
        }
        self.queue_tx(desc, ingress, last, at);
    }

    /// Queues `desc`, a frame received on port `from` (arrived at `at`), for port `to`: the
    /// frame itself where both ports' sockets share a UMEM; else (per-CPU layout, a UMEM per
    /// port) a copy in a free frame of `to`'s UMEM, the original going back to the free list,
    /// or a drop counted on `to` when that UMEM has no free frame.
    #[inline]
    fn queue_tx(&mut self, desc: FrameDesc, from: usize, to: usize, at: u64) {
        let (a, b) = (self.sockets.ports[from].pool, self.sockets.ports[to].pool);
        if a == b {
            self.push_tx(to, desc, at);
            return;
        }
        let copy = self.copy_frame(&desc, a, b);
        self.free[a].push(desc);
        match copy {
            Some(c) => self.push_tx(to, c, at),
            None => self.counters.ports[to].drop(crate::Reason::NoFreeFrame),
        }
    }

    /// Puts `desc`, a frame of port `q`'s UMEM that arrived at `at`, in line for `q`'s TX
    /// ring: in its flow's queue, or straight in the round's batch without flow queues. A full
    /// set of queues hands back the head of its fattest flow, dropped here.
    #[inline]
    fn push_tx(&mut self, q: usize, desc: FrameDesc, at: u64) {
        let Some(fq) = self.fq.get_mut(q) else {
            self.tx_batch[q].push(desc);
            return;
        };
        let u = self.sockets.ports[q].pool;
        let (key, ect) = {
            // SAFETY: the worker holds this frame; it is only read.
            let data = unsafe { self.sockets.pools[u].umem.data(&desc) };
            (flow_key(data.contents()), is_ect(data.contents()))
        };
        let len = desc.lengths().data() as u32;
        if let Some(head) = fq.enqueue(&key, desc, len, at, ect) {
            self.counters.ports[q].drop(crate::Reason::FqOverflow);
            self.free[u].push(head);
        }
    }

    /// Takes what port `p`'s RX ring holds, a batch at a time: one batch without flow queues,
    /// up to [`RX_BATCHES_PER_ROUND`] with them, topping the fill ring up after. Returns frames
    /// received.
    fn pull(&mut self, p: usize, now_ms: u64) -> usize {
        let mut last = self.receive(p, now_ms);
        let mut got = last;
        if !self.fq.is_empty() {
            let mut batches = 1;
            while last == BATCH && batches < RX_BATCHES_PER_ROUND {
                last = self.receive(p, now_ms);
                got += last;
                batches += 1;
            }
            // A round with flow queues pulls a ring up to three times (up to 768 frames, more
            // than a default fill ring holds) before the round's own refill: top the fill ring
            // up after each pull, or the kernel runs out of frames to receive into mid-round
            // and drops at the socket (`fill-ring-empty`; seen under 450 TCP flows).
            if got > 0 {
                self.refill(p, Lock::Try);
            }
        }
        // The ring gave less than a full batch (nothing at all included): drive the driver.
        if self.busy_poll && last < BATCH {
            busy_poll(self.sockets.ports[p].fd);
        }
        got
    }

    /// A round with flow queues: the RX rings are emptied into the flow queues; twice, every
    /// port's new flows are served and the RX rings emptied again; then each port is served
    /// ([`Worker::serve`]). Measured on the rig (router, 4 TCP flows, 8 alternating runs each):
    /// the ping's RTT under load p99 0.63 ms (median of runs) against 1.39 without the new-flow
    /// passes, 1.98 against 2.08 Gb/s (no difference proven). (Emptying the RX rings before
    /// each port's full turn instead made it worse: p99 3.3–4.0 ms against 1.3–2.1.)
    /// Publishes the queues' gauges. Returns frames received and served, or 1 if none were but
    /// some wait (so that the worker does not sleep on them).
    fn serve_round(&mut self, now_ms: u64) -> usize {
        let nports = self.sockets.ports.len();
        let mut work = 0;
        for p in 0..nports {
            work += self.pull(p, now_ms);
        }
        let now_ns = monotonic_ns();
        // New flows first across the ports, not only within each: a ping's request leaves
        // before another port's batch of bulk frames, and its answer (made by the receiving
        // host while the request was sent, on veth) is taken in and leaves in the same round.
        for _ in 0..2 {
            for q in 0..nports {
                work += self.serve(q, now_ns, true);
            }
            for p in 0..nports {
                work += self.pull(p, now_ms);
            }
        }
        for q in 0..nports {
            work += self.serve(q, now_ns, false);
        }
        let (mut backlog, mut flows, mut high, mut collisions) = (0u64, 0u64, 0u64, 0u64);
        for fq in &self.fq {
            let c = fq.counters();
            backlog += fq.len() as u64;
            flows += u64::from(c.active_flows);
            high = high.max(u64::from(c.backlog_high_water));
            collisions += c.collisions;
        }
        let qc = &self.counters;
        qc.fq_backlog.set(backlog);
        qc.fq_flows.set(flows);
        qc.fq_high_water.set(high);
        qc.fq_collisions.set(collisions);
        if work == 0 && backlog > 0 {
            1
        } else {
            work
        }
    }

    /// Moves up to a batch from port `q`'s flow queues (its new flows only, if `new_only`) to
    /// its TX ring, as far as the ring is
    /// under [`TX_QUEUE_LIMIT`], judging each frame by its flow's CoDel at `now_ns`: dropped,
    /// marked CE, or sent; the sojourn of each frame sent is counted here, as it is handed to
    /// the ring. Returns frames taken out of the queues (sent or dropped).
    fn serve(&mut self, q: usize, now_ns: u64, new_only: bool) -> usize {
        if self.fq[q].is_empty() {
            return 0;
        }
        let room = TX_QUEUE_LIMIT.min(self.rings.tx).saturating_sub(self.tx_outstanding(q)) as usize;
        let want = room.min(BATCH);
        let u = self.sockets.ports[q].pool;
        let mut taken = 0;
        while self.tx_batch[q].len() < want {
            let d = if new_only { self.fq[q].dequeue_new(now_ns) } else { self.fq[q].dequeue(now_ns) };
            let Some(d) = d else {
                break;
            };
            taken += 1;
            let mut desc = d.item;
            match d.fate {
                Fate::Dropped => {
                    self.counters.ports[q].drop(crate::Reason::AqmDrop);
                    self.free[u].push(desc);
                    continue;
                }
                Fate::SendMarked => {
                    // SAFETY: the worker holds this frame (it left the queues); nothing aliases it.
                    let mut data = unsafe { self.sockets.pools[u].umem.data_mut(&mut desc) };
                    if mark_ce(data.contents_mut()) == EcnOutcome::Marked {
                        self.counters.ports[q].ecn_marked.inc();
                    }
                }
                Fate::Send => {}
            }
            self.counters.sojourn[sojourn_bucket(d.sojourn_ns)].inc();
            self.counters.sojourn_ns.add(d.sojourn_ns);
            self.tx_batch[q].push(desc);
        }
        if !self.tx_batch[q].is_empty() {
            self.transmit(q);
        }
        taken
    }

    /// A copy of `desc`, a frame of UMEM `a`, in a free frame of UMEM `b` (`None`: none free).
    fn copy_frame(&mut self, desc: &FrameDesc, a: usize, b: usize) -> Option<FrameDesc> {
        if self.free[b].is_empty() && !self.restock(b) {
            return None;
        }
        let mut copy = self.free[b].pop()?;
        let (src, dst) = (&self.sockets.pools[a].umem, &self.sockets.pools[b].umem);
        // SAFETY: `desc` and `copy` are distinct frames, both held by the worker (the same
        // UMEM or two); the source is only read and the copy only written.
        unsafe {
            let src = src.data(desc);
            let mut dst = dst.data_mut(&mut copy);
            let mut cur = dst.cursor();
            cur.set_pos(0);
            // Every UMEM has frames of one size: a frame always fits another.
            let _ = io::Write::write_all(&mut cur, src.contents());
        }
        Some(copy)
    }

    /// Puts port `q`'s queued frames on its TX ring and kicks. When the ring lacks room, it
    /// first reaps and kicks to make some; what still does not fit is dropped and counted.
    fn transmit(&mut self, q: usize) {
        let want = self.tx_batch[q].len() as u32;
        if self.sockets.ports[q].tx.nb_free(want) < want {
            self.reap(q, Lock::Try);
            self.kick(q);
        }
        let ring = &mut self.sockets.ports[q];
        let batch = &mut self.tx_batch[q];
        let k = (ring.tx.nb_free(want) as usize).min(batch.len());
        // Counted before the kernel can complete them (see PoolGauges).
        let u = ring.pool;
        let in_tx = &self.sockets.pools[u].pool.in_flight[ring.ring].tx;
        in_tx.fetch_add(k as i64, Relaxed);
        // SAFETY: the worker holds every frame in `batch`; after this call the first `sent`
        // belong to the TX ring until they come back on the completion ring.
        let sent = unsafe { ring.tx.produce(&batch[..k]) };
        if sent < k {
            in_tx.fetch_sub((k - sent) as i64, Relaxed);
        }
        self.flows[u].tx += sent as i64;
        let pc = &self.counters.ports[q];
        pc.tx_frames.add(sent as u64);
        let bytes: usize = batch[..sent].iter().map(|d| d.lengths().data()).sum();
        pc.tx_bytes.add(bytes as u64);
        for d in batch.drain(..).skip(sent) {
            pc.drop(crate::Reason::TxRingFull);
            self.free[u].push(d);
        }
        self.kick(q);
    }

    /// Frames on this worker's TX ring of port `q` that the kernel has not taken yet.
    #[inline]
    fn tx_outstanding(&mut self, q: usize) -> u32 {
        self.rings.tx - self.sockets.ports[q].tx.nb_free_exact()
    }

    /// Asks the kernel to send what is on port `q`'s TX ring, if it wants asking, reaping the
    /// completions as it goes. In copy mode one kick sends a budget of frames (32) and answers
    /// EAGAIN while more remain or the completion ring is full, EBUSY when the device dropped
    /// one (no carrier): kick again while each kick makes progress (the ring drains, or frames
    /// complete); without progress, stop and let the next round retry. Returns the frames
    /// completed.
    fn kick(&mut self, q: usize) -> usize {
        let mut completed = 0;
        for _ in 0..max_kicks(self.rings.tx) {
            let before = self.tx_outstanding(q);
            if before == 0 || !self.sockets.ports[q].tx.needs_wakeup() {
                break;
            }
            self.counters.ports[q].kicks.inc();
            let t = monotonic_ns();
            let r = sendto_kick(self.sockets.ports[q].fd);
            self.kick_ns += monotonic_ns().saturating_sub(t);
            let reaped = self.reap(q, Lock::Try);
            completed += reaped;
            let pc = &self.counters.ports[q];
            match r {
                Ok(()) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => pc.kick_again.inc(),
                    Some(libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => pc.kick_busy.inc(),
                    _ => {
                        pc.kick_error.inc();
                        break;
                    }
                },
            }
            if reaped == 0 && self.tx_outstanding(q) >= before {
                break;
            }
        }
        completed
    }

    /// Moves port `q`'s completed frames to the free list. Returns how many. Under
    /// [`Lock::Try`], a member already reaping there is left to it.
    fn reap(&mut self, q: usize, lock: Lock) -> usize {
        let (u, r) = (self.sockets.ports[q].pool, self.sockets.ports[q].ring);
        let pool = &self.sockets.pools[u].pool;
        let in_tx = &pool.in_flight[r].tx;
        if in_tx.load(Relaxed) <= 0 {
            return 0;
        }
        let Some(mut rings) = lock.take(&pool.rings[r]) else {
            return 0;
        };
        let mut total = 0;
        loop {
            // SAFETY: completed descriptors name frames the kernel has finished with; they
            // become this worker's.
            let n = unsafe { rings.comp.consume(&mut self.scratch[..]) };
            if n == 0 {
                break;
            }
            in_tx.fetch_sub(n as i64, Relaxed);
            self.free[u].extend_from_slice(&self.scratch[..n]);
            total += n;
        }
        self.flows[u].tx -= total as i64;
        total
    }

    /// Puts this worker's free frames of UMEM `u` past half its spill mark in the pool's spare
    /// list (a member whose lock is taken tries again next round). Frames come to a member
    /// from completions and receives that other members started, so without this one member's
    /// free list would fill while another's ran dry.
    #[cold]
    fn spill(&mut self, u: usize) {
        let pool = &self.sockets.pools[u].pool;
        let Ok(mut spare) = pool.spare.try_lock() else {
            return;
        };
        let free = &mut self.free[u];
        let keep = pool.spill / 2;
        let moved = free.len().saturating_sub(keep);
        spare.extend(free.drain(keep..));
        pool.spare_len.store(spare.len(), Relaxed);
        self.flows[u].spare += moved as i64;
    }

    /// Moves up to `n` frames of UMEM `u` from the pool's spare list to this worker's free
    /// list. Returns how many.
    fn take_spare(&mut self, u: usize, n: usize, lock: Lock) -> usize {
        let pool = &self.sockets.pools[u].pool;
        if n == 0 || pool.spare_len.load(Relaxed) == 0 {
            return 0;
        }
        let mut spare = match lock {
            Lock::Try => match pool.spare.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return 0,
            },
            Lock::Wait => pool.spare.lock().unwrap_or_else(PoisonError::into_inner),
        };
        let k = n.min(spare.len());
        let from = spare.len() - k;
        self.free[u].extend(spare.drain(from..));
        pool.spare_len.store(spare.len(), Relaxed);
        self.flows[u].spare -= k as i64;
        k
    }

    /// Frames for a copy into UMEM `u` when this worker has none: some from the spare list.
    /// Returns whether it got any.
    #[cold]
    fn restock(&mut self, u: usize) -> bool {
        let n = (self.sockets.pools[u].pool.spill / 2).clamp(BATCH, 4 * BATCH);
        self.take_spare(u, n, Lock::Wait) > 0
    }

    /// Tops port `p`'s fill ring up to its target from the free list, taking from the pool's
    /// spare list what the free list lacks. Under [`Lock::Try`], a member already filling it
    /// is left to it.
    fn refill(&mut self, p: usize, lock: Lock) {
        let (u, r) = (self.sockets.ports[p].pool, self.sockets.ports[p].ring);
        let target = i64::from(self.sockets.pools[u].pool.fill_target);
        let want = (target - self.sockets.pools[u].pool.in_flight[r].fill.load(Relaxed)).max(0) as usize;
        if want == 0 {
            return;
        }
        if self.free[u].len() < want {
            self.take_spare(u, want - self.free[u].len(), lock);
        }
        let pool = &self.sockets.pools[u].pool;
        let free = &mut self.free[u];
        if free.is_empty() {
            return;
        }
        let Some(mut rings) = lock.take(&pool.rings[r]) else {
            return;
        };
        // Again under the lock: another member may have filled it meanwhile.
        let in_fill = &pool.in_flight[r].fill;
        let want = (target - in_fill.load(Relaxed)).max(0) as usize;
        let k = want.min(free.len());
        let k = (rings.fill.nb_free(k as u32) as usize).min(k);
        let from = free.len() - k;
        // Counted before the kernel can take them (see InFlight).
        in_fill.fetch_add(k as i64, Relaxed);
        // SAFETY: the worker holds these free frames; once produced they are the kernel's
        // until received on an RX ring of this port.
        let n = unsafe { rings.fill.produce(&free[from..]) };
        if n < k {
            in_fill.fetch_sub((k - n) as i64, Relaxed);
        }
        free.truncate(free.len() - n);
        self.flows[u].fill += n as i64;
        if n > 0 && rings.fill.needs_wakeup() {
            // SAFETY: the fd is this worker's open socket on the port; poll(2) with a zero
            // timeout only wakes it.
            let _ = unsafe { poll_in(&[self.sockets.ports[p].fd], 0) };
        }
    }

    /// Sleeps until an RX socket is readable or the timeout passes.
    fn sleep(&mut self) {
        self.decide.sleeping();
        let fds: [i32; crate::MAX_PORTS] = std::array::from_fn(|i| self.sockets.ports.get(i).map_or(-1, |r| r.fd));
        self.counters.sleeps.inc();
        // SAFETY: every non-negative fd is an open socket of this worker; -1 entries are ignored.
        let _ = unsafe { poll_in(&fds[..self.sockets.ports.len()], POLL_TIMEOUT_MS) };
    }

    /// Publishes, per UMEM, the frames this worker holds and what it moved, all together.
    fn publish_frames(&self) {
        let mut queued = [0u64; crate::MAX_PORTS];
        for (fq, port) in self.fq.iter().zip(&self.sockets.ports) {
            queued[port.pool] += fq.len() as u64;
        }
        for (((share, free), flows), queued) in self.sockets.pools.iter().zip(&self.free).zip(&self.flows).zip(queued) {
            let me = &share.pool.gauges.members[share.member];
            me.free.set(free.len() as u64);
            me.queued.set(queued);
            me.fill.set(flows.fill);
            me.tx.set(flows.tx);
            me.spare.set(flows.spare);
        }
    }

    /// Counts the frames in the rings: this worker's RX and TX rings (it owns the consumer
    /// side of one and the producer side of the other, so these reads are its own), and each
    /// port's shared fill and completion rings, read under their lock ([`Lock::Try`]: a port
    /// whose lock another member holds keeps its last count, which that member refreshes).
    fn census(&mut self, lock: Lock) {
        let mut rings = [(0u64, 0u64); crate::MAX_PORTS];
        for p in 0..self.sockets.ports.len() {
            let u = self.sockets.ports[p].pool;
            rings[u].0 += u64::from(self.sockets.ports[p].rx.nb_avail_exact());
            rings[u].1 += u64::from(self.tx_outstanding(p));
        }
        for (share, (rx_ring, tx_ring)) in self.sockets.pools.iter().zip(rings) {
            let me = &share.pool.gauges.members[share.member];
            me.rx_ring.set(rx_ring);
            me.tx_ring.set(tx_ring);
            for (m, g) in share.pool.rings.iter().zip(share.pool.gauges.ports.iter()) {
                if let Some(mut r) = lock.take(m) {
                    g.fill_ring.set(u64::from(share.pool.sizes.fill - r.fill.nb_free_exact()));
                    g.completion.set(u64::from(r.comp.nb_avail_exact()));
                }
            }
        }
    }

    /// Reads the socket statistics and the ring census into the counters.
    fn read_xsk_stats(&mut self, lock: Lock) {
        self.census(lock);
        for (p, ring) in self.sockets.ports.iter().enumerate() {
            if let Ok(s) = ring.rx.fd().xdp_statistics() {
                let x = &self.counters.ports[p].xsk;
                x.rx_dropped.set(s.rx_dropped());
                x.rx_ring_full.set(s.rx_ring_full());
                x.fill_ring_empty.set(s.rx_fill_ring_empty_descs());
                x.tx_ring_empty.set(s.tx_ring_empty_descs());
                x.rx_invalid.set(s.rx_invalid_descs());
                x.tx_invalid.set(s.tx_invalid_descs());
            }
        }
    }
}

/// Frames one worker moved for one UMEM: handed to the kernel less taken back, put in the spare
/// list less taken from it (signed: it may take back what another member handed over).
#[derive(Debug, Default, Clone, Copy)]
struct Flows {
    fill: i64,
    tx: i64,
    spare: i64,
}

/// Whether a worker waits for a pool lock another member holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lock {
    /// No: the holder is doing the same work; skip it this round.
    Try,
    /// Yes: at start, before sleeping and on the way out, where the work must be done.
    Wait,
}

impl Lock {
    /// The guard of `m`, unless it is held and this is [`Lock::Try`]. A lock poisoned by a
    /// member that panicked still guards rings in a sound state (each ring call is whole).
    #[inline]
    fn take(self, m: &Mutex<FrameRings>) -> Option<MutexGuard<'_, FrameRings>> {
        match self {
            Lock::Try => match m.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            },
            Lock::Wait => Some(m.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }
}

/// What a pipeline prefetch brings in for a frame.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// The frame's first line.
    Header,
    /// The table lines its decision reads.
    Tables,
}

/// `codel`'s verdict on a frame received on port `p` at `now_ns` with `queued` frames still
/// behind it (in the batch and the RX ring): from the arrival time the XDP program stamped with `key`,
/// which is removed here. A frame marked CE is marked here; an unstamped one passes, counted.
#[inline]
fn judge(
    codel: &mut Codel,
    counters: &QueueCounters,
    data: &mut xsk_rs::umem::frame::DataMut<'_>,
    key: u64,
    p: usize,
    now_ns: u64,
    queued: usize,
) -> Verdict {
    let Some(arrived) = take_stamp(data, key) else {
        counters.unstamped.inc();
        return Verdict::Pass;
    };
    let sojourn = now_ns.saturating_sub(arrived);
    counters.sojourn[sojourn_bucket(sojourn)].inc();
    counters.sojourn_ns.add(sojourn);
    let frame = data.contents_mut();
    // The ring's bytes are not known: its frames at this one's length stand in for them.
    let backlog = u32::try_from(queued.saturating_mul(frame.len())).unwrap_or(u32::MAX);
    let verdict = codel.on_dequeue(sojourn, now_ns, backlog, is_ect(frame));
    if verdict == Verdict::Mark && mark_ce(frame) == EcnOutcome::Marked {
        counters.ports[p].ecn_marked.inc();
    }
    verdict
}

/// The arrival time the XDP program stamped a frame with ([`STAMP_LEN`] bytes: the time, then
/// `key`), taken off the frame: from its end, or from its front by moving the frame down over
/// it. `None` where the frame carries none. The key is drawn for each start and never leaves the
/// box, so a frame from the wire cannot pass for a stamped one (it would have to end, or have
/// bytes 8 to 16, equal to 64 random bits).
fn take_stamp(data: &mut xsk_rs::umem::frame::DataMut<'_>, key: u64) -> Option<u64> {
    let (arrived, at) = read_stamp(data.contents(), key)?;
    let len = data.contents().len() - STAMP_LEN;
    if at == Stamp::Front {
        data.contents_mut().copy_within(STAMP_LEN.., 0);
    }
    data.cursor().set_pos(len);
    Some(arrived)
}

/// Where a frame's stamp is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamp {
    /// After the frame.
    End,
    /// In front of the frame.
    Front,
}

/// The arrival time a stamped frame `f` carries with `key`, and where.
fn read_stamp(f: &[u8], key: u64) -> Option<(u64, Stamp)> {
    let len = f.len();
    if len < STAMP_LEN + crate::wire::ethernet::HEADER_LEN {
        return None;
    }
    let word = |at: usize| f.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes);
    if word(len - 8)? == key {
        return Some((word(len - STAMP_LEN)?, Stamp::End));
    }
    if word(8)? == key {
        return Some((word(0)?, Stamp::Front));
    }
    None
}

/// A running worker's loop accounting and where its run delay is read.
struct Accounting {
    acct: LoopAccount,
    delay: RunDelay,
}

impl Accounting {
    /// After a round is counted up to `now`: reads the run delay when it is due (so that the
    /// slice it is shared over includes that round) and publishes the totals then, or
    /// `always`.
    #[inline]
    fn after_round(&mut self, now: u64, counters: &crate::stats::LoopCounters, always: bool) {
        let due = self.acct.delay_due(now);
        if due {
            self.acct.run_delay(now, self.delay.read());
        }
        if due || always {
            counters.publish(self.acct.totals());
        }
    }
}

/// The calling thread's run delay (time runnable but not running), from its
/// `/proc/thread-self/schedstat`, kept open (`None` where the kernel has no schedstat).
struct RunDelay(Option<std::fs::File>);

impl RunDelay {
    /// Opens the calling thread's schedstat: call it on the thread to be measured.
    fn open() -> RunDelay {
        RunDelay(std::fs::File::open("/proc/thread-self/schedstat").ok())
    }

    /// The run delay so far, in nanoseconds.
    fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        // A read at offset 0 makes the kernel print the file afresh.
        let n = self.0.as_ref()?.read_at(&mut buf, 0).ok()?;
        parse_schedstat(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock the XDP program stamps with (`bpf_ktime_get_ns`).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the valid timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// A zero-length non-blocking recvfrom: on a socket set for preferred busy polling, the kernel
/// runs the device's NAPI poll in this call.
fn busy_poll(fd: i32) {
    // SAFETY: `fd` is an open AF_XDP socket of the caller; a null buffer of length zero is
    // never written.
    let _ = unsafe {
        libc::recvfrom(fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut())
    };
}

/// A zero-length non-blocking sendto: the AF_XDP TX kick.
fn sendto_kick(fd: i32) -> io::Result<()> {
    // SAFETY: `fd` is an open AF_XDP socket owned by the caller's rings; a null buffer of length
    // zero and no address is the documented wakeup call.
    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// poll(2) for POLLIN on `fds`.
///
/// # Safety
/// Every non-negative entry must be an open file descriptor for the duration of the call.
unsafe fn poll_in(fds: &[i32], timeout_ms: i32) -> io::Result<usize> {
    let mut pfds: [libc::pollfd; crate::MAX_PORTS] = std::array::from_fn(|i| libc::pollfd {
        fd: fds.get(i).copied().unwrap_or(-1),
        events: libc::POLLIN,
        revents: 0,
    });
    let n = fds.len().min(crate::MAX_PORTS);
    // SAFETY: `pfds[..n]` is a valid, initialised array of pollfd; the caller vouches for the fds.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_read_from_the_frames_end_or_front_only_with_its_key() {
        let key: u64 = 0x5eed_1234_abcd_0042;
        let frame = vec![0xAB; 60];
        let mut end = frame.clone();
        end.extend_from_slice(&123_456_789u64.to_ne_bytes());
        end.extend_from_slice(&key.to_ne_bytes());
        assert_eq!(read_stamp(&end, key), Some((123_456_789, Stamp::End)));
        let mut front = 987u64.to_ne_bytes().to_vec();
        front.extend_from_slice(&key.to_ne_bytes());
        front.extend_from_slice(&frame);
        assert_eq!(read_stamp(&front, key), Some((987, Stamp::Front)));
        // Another key (a frame from the wire made to look stamped), or none: no stamp.
        assert_eq!(read_stamp(&end, key ^ 1), None);
        assert_eq!(read_stamp(&front, key ^ (1 << 63)), None);
        assert_eq!(read_stamp(&frame, key), None);
        // Too short to hold a header and a stamp.
        let mut short = vec![0u8; 10];
        short.extend_from_slice(&key.to_ne_bytes());
        assert_eq!(read_stamp(&short, key), None);
    }

    #[test]
    fn the_bridge_sends_no_frame_longer_than_its_egress_ports_mtu_allows_and_follows_a_new_mtu() {
        let mut d = BridgeDecide {
            fdb: Arc::new(Fdb::new(16, 300)),
            frame_max: vec![AtomicU32::new(1518), AtomicU32::new(1418)].into(),
        };
        let counters = PortCounters::default();
        let mut scratch = [0u8; SCRATCH_LEN];
        let (h1, h2) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let frame = |dst: [u8; 6], src: [u8; 6], len: usize| {
            let mut f = dst.to_vec();
            f.extend_from_slice(&src);
            f.extend_from_slice(&[0x88, 0xb5]);
            f.resize(len, 0xEE);
            f
        };
        // h2 is learnt on port 1 (MTU 1400: 1418-byte frames at most, tag included).
        let mut learn = frame(h1, h2, 60);
        assert_eq!(d.decide(&mut learn, PortId(1), 0, &counters, &mut scratch), Action::Flood);
        let mut at_limit = frame(h2, h1, 1418);
        assert_eq!(d.decide(&mut at_limit, PortId(0), 0, &counters, &mut scratch), Action::Forward(PortId(1)));
        let mut over = frame(h2, h1, 1419);
        assert_eq!(
            d.decide(&mut over, PortId(0), 0, &counters, &mut scratch),
            Action::Drop(crate::Reason::TooBigToForward)
        );
        // Port 0 takes 1518 bytes; floods are checked port by port.
        let mut back = frame(h1, h2, 1518);
        assert_eq!(d.decide(&mut back, PortId(1), 0, &counters, &mut scratch), Action::Forward(PortId(0)));
        assert!(d.fits(1518, 0) && !d.fits(1519, 0) && !d.fits(1419, 1));
        // The port's MTU raised at run time: the same frame now passes.
        d.frame_max[1].store(crate::io::frame_max(1500), Ordering::Relaxed);
        assert_eq!(d.decide(&mut over, PortId(0), 0, &counters, &mut scratch), Action::Forward(PortId(1)));
    }
}
