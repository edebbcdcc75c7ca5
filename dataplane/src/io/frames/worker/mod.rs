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

//!
//! # Where each part lives
//!
//! - this file: the worker, its construction and its loop ([`Worker::run`]), one round at a
//!   time (`Worker::round`), and the settling on the way out;
//! - `decide`: the decision trait and the bridge's and router's decisions behind it;
//! - `receive`: RX rings → decision → the egress ports' batches (floods and copies included);
//! - `transmit`: batches → TX rings, kicks, and completions reaped;
//! - `frames`: the free lists, the pool's spare list, the fill rings, and the frame
//!   accounting each member publishes ([`crate::stats::PoolGauges`]);
//! - `queues`: queue management: CoDel on the RX rings, flow queues in front of the TX rings,
//!   the XDP program's arrival stamps;
//! - `step_down`: when a real-time worker steps down to a normal thread's share, as a pure
//!   state machine;
//! - `account`: the loop accounting's clock and run delay.
//!
//! The worker reaches AF_XDP only through [`Xsk`] ([`crate::io::frames::ring`]), so the same code runs
//! over an in-memory kernel in tests, where the frame accounting is checked after every step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::ring::{AfXdp, Xsk};
use super::xsk::{QueueSockets, RingSizes};
use crate::action::SCRATCH_LEN;
use crate::aqm::{Codel, FlowQueues};
use crate::io::setup::options::PollMode;
use crate::io::setup::start::plan::AqmPlan;
use crate::io::setup::start::sched;
use crate::load::LoopAccount;
use crate::stats::QueueCounters;
use crate::time::Clock;

mod account;
mod decide;
mod frames;
mod queues;
mod receive;
mod step_down;
mod transmit;

#[cfg(test)]
mod tests;

use account::{monotonic_ns, Accounting, RunDelay};
pub use decide::{BridgeDecide, Decide, RouterDecide};
use frames::{Lock, Moved};
use step_down::{Step, StepDown};

/// Frames taken off one RX ring per round.
pub const BATCH: usize = 64;
/// Idle rounds an adaptive worker spins before it sleeps.
const SPIN_ROUNDS: u32 = 128;
/// Longest sleep in poll(2): bounds how late a stop request or a retried kick is seen.
const POLL_TIMEOUT_MS: i32 = 10;
/// How often the kernel's socket statistics are copied into the counters, and the worker's
/// heartbeat at most as old.
const XSK_STATS_EVERY: Duration = Duration::from_millis(250);
/// How old a worker's heartbeat gets while it runs: its loop beats with each statistics copy.
pub const BEAT_EVERY: Duration = XSK_STATS_EVERY;
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

/// One queue's worker over the sockets of `X` (the kernel's AF_XDP sockets unless tested).
/// Built on the control thread, run on its pinned thread.
pub struct Worker<D: Decide, X: Xsk = AfXdp> {
    sockets: QueueSockets<X>,
    decide: D,
    counters: Arc<QueueCounters>,
    stop: Arc<AtomicBool>,
    poll: PollMode,
    clock: Clock,
    /// Free frames, per UMEM (the only place the worker takes frames from).
    free: Vec<Vec<X::Desc>>,
    /// What this worker moved, per UMEM (published with `free`: [`crate::stats::MemberFrames`]).
    moved: Vec<Moved>,
    /// Frames queued for each egress port during a round.
    tx_batch: Vec<Vec<X::Desc>>,
    /// Scratch for RX and completion descriptors.
    scratch: Vec<X::Desc>,
    /// Where decisions build answers (ICMP errors).
    answer: [u8; SCRATCH_LEN],
    /// Busy mode with preferred busy polling: drive the driver from idle rounds.
    busy_poll: bool,
    /// CoDel on this worker's RX ring of each port, by port (empty: not this kind of queue
    /// management).
    codel: Vec<Codel>,
    /// Flow queues in front of each egress port's TX ring, by port (empty: none).
    fq: Vec<FlowQueues<X::Desc>>,
    /// Whether the XDP program stamps arrival times (queue management on).
    stamped: bool,
    /// The key of the XDP program's stamps (see `queues::take_stamp`).
    stamp_key: u64,
    /// The sockets' ring sizes (the same for every port).
    rings: RingSizes,
    /// Frames taken off the RX rings in the current round (loop accounting).
    round_frames: u64,
    /// Nanoseconds spent in kicks since the accounting last took them.
    kick_ns: u64,
}

impl<D: Decide, X: Xsk> std::fmt::Debug for Worker<D, X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("queue", &self.counters.queue).finish()
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Round {
    /// Frames received, served, reaped (its own) or kicked out: 0 for an idle round.
    pub work: usize,
    /// When receiving (and serving) ended, on `CLOCK_MONOTONIC`.
    pub rx_end_ns: u64,
    /// Nanoseconds spent in kicks while receiving.
    pub rx_kick_ns: u64,
}

impl<D: Decide, X: Xsk> Worker<D, X> {
    /// A worker over `sockets` applying `decide`, counting into `counters`, until `stop`. The
    /// fill rings are filled here, so the sockets can receive as soon as the XDP program is
    /// attached, before the worker thread runs.
    pub fn new(
        sockets: QueueSockets<X>,
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
        let moved = vec![Moved::default(); sockets.pools.len()];
        let mut w = Worker {
            sockets,
            decide,
            counters,
            stop,
            poll,
            clock,
            free,
            moved,
            tx_batch: (0..nports).map(|_| Vec::with_capacity(BATCH)).collect(),
            scratch: vec![X::Desc::default(); BATCH.max(rings.completion as usize)],
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

    /// Runs until the stop flag is set, then settles and publishes the final counters.
    pub fn run(mut self) {
        let mut idle_rounds = 0u32;
        let mut last_xsk_ms = 0u64;
        // SCHED_FIFO, inherited from start-up: stepped down under sustained load, where the
        // worker may step up again afterwards.
        let mut rt = StepDown::new(sched::fifo_priority().filter(|&p| sched::may_step_up(p)));
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
            let round = self.round(now_ms);
            // The round's one clock read serves the statistics timer too.
            if now_ms.saturating_sub(last_xsk_ms) >= XSK_STATS_EVERY.as_millis() as u64 {
                self.read_xsk_stats(Lock::Try);
                last_xsk_ms = now_ms;
                self.counters.beat.beat();
            }
            let end = monotonic_ns();
            if round.work > 0 {
                let tx_reap = std::mem::take(&mut self.kick_ns);
                acct.acct.work_round(round.rx_end_ns, end, self.round_frames, round.rx_kick_ns, tx_reap);
                // Every round with work: the frames counted here match those received.
                acct.after_round(end, &self.counters.load, true);
                idle_rounds = 0;
                if let Some(step) = rt.on_work(now_ms) {
                    self.take_step(&mut rt, step);
                }
                continue;
            }
            // A round without work: the load let up.
            if let Some(step) = rt.on_idle() {
                self.take_step(&mut rt, step);
            }
            let slept = match self.poll {
                PollMode::Busy => {
                    std::hint::spin_loop();
                    None
                }
                PollMode::Adaptive => {
                    idle_rounds += 1;
                    (idle_rounds >= SPIN_ROUNDS).then(|| self.sleep())
                }
            };
            match slept {
                Some((asleep, awake)) => {
                    acct.acct.idle_round(awake, awake - asleep);
                    acct.after_round(awake, &self.counters.load, true);
                }
                None => {
                    acct.acct.idle_round(end, 0);
                    acct.after_round(end, &self.counters.load, false);
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

    /// One round at `now_ms`: takes a batch off each RX ring, decides and transmits it (with
    /// flow queues: pulls and serves them, [`Worker::serve_round`]); then for each port reaps
    /// completions, kicks what its TX ring still holds and tops its fill ring up; hands surplus
    /// free frames to the pool; publishes the frame accounting and the decision's state.
    pub(crate) fn round(&mut self, now_ms: u64) -> Round {
        let nports = self.sockets.ports.len();
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
        let rx_end_ns = monotonic_ns();
        let rx_kick_ns = std::mem::take(&mut self.kick_ns);
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
        Round { work, rx_end_ns, rx_kick_ns }
    }

    /// Steps down to a normal thread's share, or back up, as `rt` asked; tells it how it went.
    fn take_step(&mut self, rt: &mut StepDown, step: Step) {
        let ok = match step {
            Step::Down => sched::step_down().is_ok(),
            Step::Up(p) => sched::step_up(p).is_ok(),
        };
        if ok && step == Step::Down {
            self.counters.rt_yields.inc();
        }
        rt.taken(step, ok);
    }

    /// Reaps and tops every fill ring up, waiting for a member that holds a lock, so that the
    /// kernel never waits on frames this worker could give; then sleeps until an RX socket is
    /// readable or the timeout passes. Returns when it fell asleep and woke.
    fn sleep(&mut self) -> (u64, u64) {
        self.before_sleep();
        self.decide.sleeping();
        self.counters.sleeps.inc();
        let asleep = monotonic_ns();
        X::sleep(&mut self.sockets.ports, POLL_TIMEOUT_MS);
        (asleep, monotonic_ns())
    }

    /// What must be done before sleeping: every completion ring reaped and every fill ring
    /// topped up, waiting for the locks, and the accounting published.
    pub(crate) fn before_sleep(&mut self) {
        for p in 0..self.sockets.ports.len() {
            self.reap(p, Lock::Wait);
            self.refill(p, Lock::Wait);
        }
        self.publish_frames();
    }

    /// On the way out (the program is already detached, so nothing new arrives): lets the
    /// kernel finish what it holds — TX frames sent and completed, RX frames it took from a
    /// fill ring posted — for up to 100 ms, so that the final accounting finds every frame in
    /// a ring or a free list. Other members of the pool settle at the same time; what the
    /// kernel holds is judged over the whole pool, from what each member last published.
    pub(crate) fn settle(&mut self) {
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
        for out in 0..self.fq.len() {
            let u = self.sockets.ports[out].pool;
            while let Some(d) = self.fq[out].dequeue(u64::MAX) {
                self.counters.ports[out].drop(crate::Reason::TxRingFull);
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
            let held = |s: &super::xsk::PoolShare<X>| {
                let f = s.pool.gauges.snapshot();
                f.rx_kernel + f.tx_kernel
            };
            if self.sockets.pools.iter().map(held).sum::<u64>() == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
