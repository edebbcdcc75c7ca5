//! Counters: what each worker did with every frame, readable live by the stats thread.
//!
//! Each counter has exactly one writer, the worker that owns it, which updates it with a relaxed
//! load and a relaxed store: no locked read-modify-write, no contention. Readers (the stats
//! printer, the control socket) load it relaxed and may see a value a few frames old. Each
//! worker's block is cache-line aligned and allocated on its own, so no two workers write the
//! same line. Plain `u64`s shared between threads would be a data race; atomics with relaxed
//! ordering compile to the same plain moves on x86-64 and aarch64. Frames in rings that several
//! workers share are counted per worker, for what each moved ([`PoolGauges`]).

use std::sync::atomic::{
    AtomicI64, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

use serde::{Deserialize, Serialize};

use crate::load::{LoopTotals, BATCH_BUCKETS};
use crate::reason::Reason;

/// When a thread last went round its loop, on `CLOCK_MONOTONIC` in milliseconds. Each
/// long-running thread beats at least every few hundred milliseconds while it works or waits;
/// one whose beat grows old is stuck, which `show stats`, `/metrics` and the service manager's
/// watchdog are told. A heartbeat is made beating (now), just before its thread starts: a
/// thread that never goes round grows old from then.
#[derive(Debug)]
pub struct Heartbeat(AtomicU64);

impl Default for Heartbeat {
    fn default() -> Heartbeat {
        let h = Heartbeat(AtomicU64::new(0));
        h.beat();
        h
    }
}

impl Heartbeat {
    /// The thread went round. Only the owning thread may call this.
    #[inline]
    pub fn beat(&self) {
        self.beat_at(monotonic_ms());
    }

    /// [`Heartbeat::beat`] with the time read already (ms on `CLOCK_MONOTONIC`).
    #[inline]
    pub fn beat_at(&self, now_ms: u64) {
        self.0.store(now_ms.max(1), Relaxed);
    }

    /// Milliseconds since the last beat at `now_ms`, `None` before the first.
    pub fn age_ms(&self, now_ms: u64) -> Option<u64> {
        let last = self.0.load(Relaxed);
        (last != 0).then(|| now_ms.saturating_sub(last))
    }
}

/// `CLOCK_MONOTONIC` in milliseconds, the clock of [`Heartbeat`].
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1000).saturating_add(ts.tv_nsec as u64 / 1_000_000)
}

/// A single-writer counter (see the module documentation).
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker may call this.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Adds one. Only the owning worker may call this.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Sets a gauge. Only the owning worker may call this.
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// Adds one, published with release ordering: a reader that sees the new value through
    /// [`Counter::get_acquire`] sees every counter the owner wrote before it at least as new.
    /// Only the owning worker may call this.
    #[inline]
    pub fn inc_release(&self) {
        self.0.store(self.0.load(Relaxed).wrapping_add(1), Release);
    }

    /// The current value, read with acquire ordering (pairs with [`Counter::inc_release`]).
    #[inline]
    pub fn get_acquire(&self) -> u64 {
        self.0.load(Acquire)
    }
}

/// One counter per drop [`Reason`], indexed by it (an array, wrapped: the standard library
/// derives `Default` for arrays of at most 32).
#[derive(Debug)]
pub struct Drops(pub [Counter; Reason::COUNT]);

impl Default for Drops {
    fn default() -> Self {
        Drops(std::array::from_fn(|_| Counter::default()))
    }
}

impl std::ops::Deref for Drops {
    type Target = [Counter; Reason::COUNT];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// What one worker counts for one port.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PortCounters {
    /// Frames taken off this port's RX ring.
    pub rx_frames: Counter,
    /// Bytes of those frames.
    pub rx_bytes: Counter,
    /// Frames placed on this port's TX ring.
    pub tx_frames: Counter,
    /// Bytes of those frames.
    pub tx_bytes: Counter,
    /// Received frames that were flooded (sent to every other port).
    pub flooded: Counter,
    /// Received frames whose source could not be learnt because the FDB was full.
    pub fdb_full: Counter,
    /// Router: ICMP errors sent about frames received on this port.
    pub icmp_sent: Counter,
    /// Frames that CoDel marked CE instead of dropping (ECN): counted on the port they came in
    /// on under `codel` (judged on the RX ring), on the egress port under `fq-codel` (judged in
    /// the flow queues, which are the egress port's).
    pub ecn_marked: Counter,
    /// Router: frames handed to the ARP thread to wait for their next hop's MAC.
    pub gleaned: Counter,
    /// Drops, indexed by [`Reason`]; counted on the port the frame came in on, except
    /// `tx-ring-full`, `no-free-frame`, `fq-overflow` and (under `fq-codel`) `aqm-drop`,
    /// counted on the egress port.
    pub drops: Drops,
    /// TX kicks (sendto) issued on this port's socket.
    pub kicks: Counter,
    /// Kicks answered EAGAIN (the kernel sent a budget and more remains): kicked again.
    pub kick_again: Counter,
    /// Kicks answered EBUSY, ENOBUFS or ENETDOWN (link down, device busy): retried next round.
    pub kick_busy: Counter,
    /// Kicks answered with any other error.
    pub kick_error: Counter,
    /// The kernel's statistics of this port's socket (`XDP_STATISTICS`), copied by the worker
    /// every 250 ms ([`QueueCounters::xsk_reads`] counts the copies).
    pub xsk: XskGauges,
}

/// The kernel's counters of one AF_XDP socket, as last read by its worker.
#[derive(Debug, Default)]
pub struct XskGauges {
    /// Frames dropped for lack of RX ring room or other reasons (`rx_dropped`).
    pub rx_dropped: Counter,
    /// Frames dropped because the RX ring was full (`rx_ring_full`).
    pub rx_ring_full: Counter,
    /// Times the kernel found the fill ring empty (`rx_fill_ring_empty_descs`).
    pub fill_ring_empty: Counter,
    /// Times the kernel found the TX ring empty when kicked (`tx_ring_empty_descs`).
    pub tx_ring_empty: Counter,
    /// Invalid RX descriptors (`rx_invalid_descs`).
    pub rx_invalid: Counter,
    /// Invalid TX descriptors (`tx_invalid_descs`): a frame sent with a bad length or address.
    pub tx_invalid: Counter,
}

/// Each of the socket's counters, in one place for reading and writing them.
macro_rules! xsk_fields {
    ($m:ident) => {
        $m!(rx_dropped, rx_ring_full, fill_ring_empty, tx_ring_empty, rx_invalid, tx_invalid)
    };
}

impl XskGauges {
    /// Sets every gauge to what the kernel last said. Only the owning worker may call this.
    pub fn set(&self, s: &XskSnapshot) {
        macro_rules! set {
            ($($f:ident),*) => { $(self.$f.set(s.$f);)* };
        }
        xsk_fields!(set);
    }

    /// A copy of the gauges.
    pub fn snapshot(&self) -> XskSnapshot {
        macro_rules! get {
            ($($f:ident),*) => { XskSnapshot { $($f: self.$f.get()),* } };
        }
        xsk_fields!(get)
    }
}

impl PortCounters {
    /// Counts one drop.
    #[inline]
    pub fn drop(&self, reason: Reason) {
        self.drops[reason as usize].inc();
    }
}

/// Where the frames of one UMEM are. A UMEM is one worker's in the per-queue layout and one
/// port's, for every worker, in the per-CPU layout, so its frames are counted by each member
/// worker for what it moved: frames it holds, frames it handed to the kernel through a fill or
/// TX ring less those it took back from an RX or completion ring (which may be another
/// member's), and frames it put in the pool's spare list less those it took. Each member
/// publishes all of these together, between batches, so that they add up to `total`
/// ([`PoolGauges::snapshot`]) whenever the members are between batches (see `io` for the rule).
///
/// What the rings hold is read from the rings: each member's RX and TX rings by that member,
/// each port's shared fill and completion rings by whichever member holds their lock.
#[derive(Debug)]
pub struct PoolGauges {
    /// The workers (by queue number) whose sockets use this UMEM.
    pub workers: Vec<u32>,
    /// The names of the ports whose sockets use it.
    pub port_names: Vec<String>,
    /// Frames in the UMEM.
    pub total: u64,
    /// Frames put in the spare list at start, before any member ran.
    pub spare_at_start: u64,
    /// Per port, in `port_names` order.
    pub ports: Box<[PortFrames]>,
    /// Per member, in `workers` order.
    pub members: Box<[MemberFrames]>,
}

/// One port's share of a [`PoolGauges`]: what its shared rings hold.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PortFrames {
    /// Still in the fill ring (read under the rings' lock, every statistics period and at exit).
    pub fill_ring: Counter,
    /// Sent and waiting in the completion ring (read likewise).
    pub completion: Counter,
}

/// One member worker's share of a [`PoolGauges`], written by that worker only. The flows are
/// signed: a member may take back more frames than it handed over, when another handed them.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct MemberFrames {
    /// In its free list.
    pub free: Counter,
    /// Handed to fill rings less taken off its RX rings.
    pub fill: SignedCounter,
    /// Handed to its TX rings less reaped from completion rings.
    pub tx: SignedCounter,
    /// Put in the spare list less taken from it.
    pub spare: SignedCounter,
    /// Received and waiting in its RX rings (summed over the ports).
    pub rx_ring: Counter,
    /// Still in its TX rings, not yet taken by the kernel.
    pub tx_ring: Counter,
    /// Waiting in its flow queues for a TX ring.
    pub queued: Counter,
}

/// A single-writer gauge that may go below zero (see [`MemberFrames`]).
#[derive(Debug, Default)]
pub struct SignedCounter(AtomicI64);

impl SignedCounter {
    /// Sets it. Only the owning worker may call this.
    #[inline]
    pub fn set(&self, v: i64) {
        self.0.store(v, Relaxed);
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

impl PoolGauges {
    /// Zeroed gauges for `workers` sharing a UMEM of `total` frames over the ports
    /// `port_names`, `spare_at_start` of them in its spare list.
    pub fn new(workers: Vec<u32>, port_names: Vec<String>, total: u64, spare_at_start: u64) -> PoolGauges {
        let members = workers.iter().map(|_| MemberFrames::default()).collect();
        let ports = port_names.iter().map(|_| PortFrames::default()).collect();
        PoolGauges { workers, port_names, total, spare_at_start, ports, members }
    }

    /// Where the frames are, summed; what no ring holds, the kernel does.
    pub fn snapshot(&self) -> FrameSnapshot {
        let sum = |f: fn(&MemberFrames) -> i64| self.members.iter().map(f).sum::<i64>().max(0) as u64;
        let fill = sum(|m| m.fill.get());
        let tx = sum(|m| m.tx.get());
        let spare = self.spare_at_start as i64 + self.members.iter().map(|m| m.spare.get()).sum::<i64>();
        let fill_ring: u64 = self.ports.iter().map(|p| p.fill_ring.get()).sum();
        let completion: u64 = self.ports.iter().map(|p| p.completion.get()).sum();
        let (rx_ring, tx_ring) = (sum(|m| m.rx_ring.get() as i64), sum(|m| m.tx_ring.get() as i64));
        FrameSnapshot {
            total: self.total,
            free: sum(|m| m.free.get() as i64) + spare.max(0) as u64,
            queued: sum(|m| m.queued.get() as i64),
            fill,
            tx,
            fill_ring,
            rx_ring,
            rx_kernel: fill.saturating_sub(fill_ring + rx_ring),
            tx_ring,
            completion,
            tx_kernel: tx.saturating_sub(tx_ring + completion),
        }
    }
}

/// Buckets of the sojourn histogram: two per power of two from 1 ns up to about 18 minutes.
pub const SOJOURN_BUCKETS: usize = 82;

/// The histogram bucket of a sojourn of `ns` nanoseconds: two per power of two (the power,
/// and whether the next bit is set), so a bucket's values are within a factor 1.5 of its floor.
#[inline]
pub fn sojourn_bucket(ns: u64) -> usize {
    if ns < 2 {
        return ns as usize;
    }
    let log = 63 - ns.leading_zeros() as usize;
    let half = ((ns >> (log - 1)) & 1) as usize;
    (2 * log + half).min(SOJOURN_BUCKETS - 1)
}

/// The smallest sojourn (ns) that falls in `bucket`.
pub fn sojourn_floor(bucket: usize) -> u64 {
    if bucket < 2 {
        return bucket as u64;
    }
    let (log, half) = (bucket / 2, bucket % 2);
    (1u64 << log) | ((half as u64) << (log - 1))
}

/// The `q` quantile (0 < q ≤ 1) of a sojourn histogram, as its bucket's floor: the value at or
/// below which at least that share of the samples fall. `None` for an empty histogram.
pub fn sojourn_quantile(hist: &[u64], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    hist.iter()
        .position(|&n| {
            seen += n;
            seen >= rank
        })
        .map(sojourn_floor)
}

/// Everything one worker (one queue) counts.
#[derive(Debug)]
pub struct QueueCounters {
    /// The queue this worker serves on every port.
    pub queue: u32,
    /// The core it is pinned to, if any.
    pub core: Option<usize>,
    /// Per port, in port order.
    pub ports: Box<[PortCounters]>,
    /// Times the worker slept in poll(2) for lack of work (adaptive mode).
    pub sleeps: Counter,
    /// Times the worker, running under SCHED_FIFO, went back to a normal thread's share after
    /// working without a pause for [`crate::io::worker::YIELD_AFTER_MS`].
    pub rt_yields: Counter,
    /// How long frames waited since the XDP program stamped them, by [`sojourn_bucket`]: until
    /// the worker took them off the RX ring (`codel`), or until it handed them to a TX ring
    /// (`fq-codel`, where the flow queues are the wait).
    pub sojourn: Box<[Counter]>,
    /// The sum of those sojourns, ns.
    pub sojourn_ns: Counter,
    /// Received frames without a stamp (stamping off, or a driver without metadata room).
    pub unstamped: Counter,
    /// Flow queues (`fq-codel`), summed over the worker's egress ports: frames queued now.
    pub fq_backlog: Counter,
    /// The most frames one port's flow queues ever held at once (the highest of the ports).
    pub fq_high_water: Counter,
    /// Flows queued now (on a round-robin list).
    pub fq_flows: Counter,
    /// Frames whose flow found its set of the flow table full and shared another's queue.
    pub fq_collisions: Counter,
    /// Router: ICMP errors not sent because of the rate limit.
    pub icmp_rate_limited: Counter,
    /// Times the worker copied its sockets' statistics ([`PortCounters::xsk`]) and counted the
    /// frames in its rings ([`PoolGauges`]), every 250 ms: between two copies those are up to
    /// that old, while the kernel counts on. Published last ([`Counter::inc_release`]): a
    /// reader that sees it move twice since a first look has copies taken after that look.
    pub xsk_reads: Counter,
    /// Where the worker's time goes ([`crate::load`]).
    pub load: LoopCounters,
    /// The worker's loop, beating every [`crate::io::worker::BEAT_EVERY`] at most.
    pub beat: Heartbeat,
}

/// A worker's loop accounting ([`LoopTotals`]) as counters, published by the worker.
#[derive(Debug, Default)]
#[allow(missing_docs, reason = "fields mirror LoopTotals")]
pub struct LoopCounters {
    pub wall_ns: Counter,
    pub work_ns: Counter,
    pub idle_ns: Counter,
    pub sleep_ns: Counter,
    pub preempted_work_ns: Counter,
    pub preempted_idle_ns: Counter,
    pub decide_ns: Counter,
    pub tx_ns: Counter,
    pub reap_ns: Counter,
    pub rounds_work: Counter,
    pub rounds_idle: Counter,
    pub frames: Counter,
    pub batches: [Counter; BATCH_BUCKETS],
    pub schedstat: Counter,
}

impl LoopCounters {
    /// Publishes `t`. Only the owning worker may call this.
    pub fn publish(&self, t: &LoopTotals) {
        self.wall_ns.set(t.wall_ns);
        self.work_ns.set(t.work_ns);
        self.idle_ns.set(t.idle_ns);
        self.sleep_ns.set(t.sleep_ns);
        self.preempted_work_ns.set(t.preempted_work_ns);
        self.preempted_idle_ns.set(t.preempted_idle_ns);
        self.decide_ns.set(t.decide_ns);
        self.tx_ns.set(t.tx_ns);
        self.reap_ns.set(t.reap_ns);
        self.rounds_work.set(t.rounds_work);
        self.rounds_idle.set(t.rounds_idle);
        self.frames.set(t.frames);
        for (c, n) in self.batches.iter().zip(t.batches) {
            c.set(n);
        }
        self.schedstat.set(u64::from(t.schedstat));
    }

    /// A plain copy.
    pub fn snapshot(&self) -> LoopTotals {
        LoopTotals {
            wall_ns: self.wall_ns.get(),
            work_ns: self.work_ns.get(),
            idle_ns: self.idle_ns.get(),
            sleep_ns: self.sleep_ns.get(),
            preempted_work_ns: self.preempted_work_ns.get(),
            preempted_idle_ns: self.preempted_idle_ns.get(),
            decide_ns: self.decide_ns.get(),
            tx_ns: self.tx_ns.get(),
            reap_ns: self.reap_ns.get(),
            rounds_work: self.rounds_work.get(),
            rounds_idle: self.rounds_idle.get(),
            frames: self.frames.get(),
            batches: std::array::from_fn(|i| self.batches[i].get()),
            schedstat: self.schedstat.get() != 0,
        }
    }
}

impl QueueCounters {
    /// Zeroed counters for a worker on `queue` serving `nports` ports.
    pub fn new(queue: u32, core: Option<usize>, nports: usize) -> QueueCounters {
        QueueCounters {
            queue,
            core,
            ports: (0..nports).map(|_| PortCounters::default()).collect(),
            sleeps: Counter::default(),
            rt_yields: Counter::default(),
            sojourn: (0..SOJOURN_BUCKETS).map(|_| Counter::default()).collect(),
            sojourn_ns: Counter::default(),
            unstamped: Counter::default(),
            fq_backlog: Counter::default(),
            fq_high_water: Counter::default(),
            fq_flows: Counter::default(),
            fq_collisions: Counter::default(),
            icmp_rate_limited: Counter::default(),
            xsk_reads: Counter::default(),
            load: LoopCounters::default(),
            beat: Heartbeat::default(),
        }
    }

    /// A plain copy of the counters, for reporting. The copies of the socket statistics and
    /// the ring census in it (and in the pools, read after it) are at least as new as
    /// `xsk_reads` says: it is read first, with acquire ordering.
    pub fn snapshot(&self) -> QueueSnapshot {
        let xsk_reads = self.xsk_reads.get_acquire();
        QueueSnapshot {
            queue: self.queue,
            core: self.core,
            ports: self.ports.iter().map(PortCounters::snapshot).collect(),
            sleeps: self.sleeps.get(),
            rt_yields: self.rt_yields.get(),
            sojourn: self.sojourn.iter().map(Counter::get).collect(),
            sojourn_ns: self.sojourn_ns.get(),
            unstamped: self.unstamped.get(),
            fq_backlog: self.fq_backlog.get(),
            fq_high_water: self.fq_high_water.get(),
            fq_flows: self.fq_flows.get(),
            fq_collisions: self.fq_collisions.get(),
            icmp_rate_limited: self.icmp_rate_limited.get(),
            xsk_reads,
            load: self.load.snapshot(),
        }
    }
}

impl PortCounters {
    /// A plain copy, for reporting.
    pub fn snapshot(&self) -> PortSnapshot {
        PortSnapshot {
            rx_frames: self.rx_frames.get(),
            rx_bytes: self.rx_bytes.get(),
            tx_frames: self.tx_frames.get(),
            tx_bytes: self.tx_bytes.get(),
            flooded: self.flooded.get(),
            fdb_full: self.fdb_full.get(),
            icmp_sent: self.icmp_sent.get(),
            ecn_marked: self.ecn_marked.get(),
            gleaned: self.gleaned.get(),
            drops: Reason::ALL.iter().map(|r| (r.name().to_owned(), self.drops[*r as usize].get())).collect(),
            kicks: self.kicks.get(),
            kick_again: self.kick_again.get(),
            kick_busy: self.kick_busy.get(),
            kick_error: self.kick_error.get(),
            xsk: self.xsk.snapshot(),
        }
    }
}

/// A copy of [`PortCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror PortCounters")]
pub struct PortSnapshot {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub flooded: u64,
    pub fdb_full: u64,
    pub icmp_sent: u64,
    #[serde(default)]
    pub ecn_marked: u64,
    pub gleaned: u64,
    /// (reason name, count), in [`Reason::ALL`] order; in JSON an object (see [`named`]).
    #[serde(with = "named")]
    pub drops: Vec<(String, u64)>,
    pub kicks: u64,
    pub kick_again: u64,
    pub kick_busy: u64,
    pub kick_error: u64,
    pub xsk: XskSnapshot,
}

/// A copy of [`XskGauges`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror XskGauges")]
pub struct XskSnapshot {
    pub rx_dropped: u64,
    pub rx_ring_full: u64,
    pub fill_ring_empty: u64,
    pub tx_ring_empty: u64,
    pub rx_invalid: u64,
    pub tx_invalid: u64,
}

impl PortSnapshot {
    /// Sum of all drops.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }

    /// Adds `other` into `self` (to total a port over its queues).
    pub fn accumulate(&mut self, other: &PortSnapshot) {
        self.rx_frames += other.rx_frames;
        self.rx_bytes += other.rx_bytes;
        self.tx_frames += other.tx_frames;
        self.tx_bytes += other.tx_bytes;
        self.flooded += other.flooded;
        self.fdb_full += other.fdb_full;
        self.icmp_sent += other.icmp_sent;
        self.ecn_marked += other.ecn_marked;
        self.gleaned += other.gleaned;
        if self.drops.is_empty() {
            self.drops = other.drops.iter().map(|(n, _)| (n.clone(), 0)).collect();
        }
        for ((_, a), (_, b)) in self.drops.iter_mut().zip(&other.drops) {
            *a += b;
        }
        self.kicks += other.kicks;
        self.kick_again += other.kick_again;
        self.kick_busy += other.kick_busy;
        self.kick_error += other.kick_error;
        self.xsk.rx_dropped += other.xsk.rx_dropped;
        self.xsk.rx_ring_full += other.xsk.rx_ring_full;
        self.xsk.fill_ring_empty += other.xsk.fill_ring_empty;
        self.xsk.tx_ring_empty += other.xsk.tx_ring_empty;
        self.xsk.rx_invalid += other.xsk.rx_invalid;
        self.xsk.tx_invalid += other.xsk.tx_invalid;
    }
}

impl PortSnapshot {
    /// What was counted since `base`, an earlier snapshot of the same counters (each count
    /// less its value in `base`; never below zero).
    pub fn since(&self, base: &PortSnapshot) -> PortSnapshot {
        let x = &self.xsk;
        let b = &base.xsk;
        PortSnapshot {
            rx_frames: self.rx_frames.saturating_sub(base.rx_frames),
            rx_bytes: self.rx_bytes.saturating_sub(base.rx_bytes),
            tx_frames: self.tx_frames.saturating_sub(base.tx_frames),
            tx_bytes: self.tx_bytes.saturating_sub(base.tx_bytes),
            flooded: self.flooded.saturating_sub(base.flooded),
            fdb_full: self.fdb_full.saturating_sub(base.fdb_full),
            icmp_sent: self.icmp_sent.saturating_sub(base.icmp_sent),
            ecn_marked: self.ecn_marked.saturating_sub(base.ecn_marked),
            gleaned: self.gleaned.saturating_sub(base.gleaned),
            drops: named_since(&self.drops, &base.drops),
            kicks: self.kicks.saturating_sub(base.kicks),
            kick_again: self.kick_again.saturating_sub(base.kick_again),
            kick_busy: self.kick_busy.saturating_sub(base.kick_busy),
            kick_error: self.kick_error.saturating_sub(base.kick_error),
            xsk: XskSnapshot {
                rx_dropped: x.rx_dropped.saturating_sub(b.rx_dropped),
                rx_ring_full: x.rx_ring_full.saturating_sub(b.rx_ring_full),
                fill_ring_empty: x.fill_ring_empty.saturating_sub(b.fill_ring_empty),
                tx_ring_empty: x.tx_ring_empty.saturating_sub(b.tx_ring_empty),
                rx_invalid: x.rx_invalid.saturating_sub(b.rx_invalid),
                tx_invalid: x.tx_invalid.saturating_sub(b.tx_invalid),
            },
        }
    }
}

/// (name, count) lists: each count less the count of the same name in `base` (absent: 0).
pub fn named_since(now: &[(String, u64)], base: &[(String, u64)]) -> Vec<(String, u64)> {
    now.iter()
        .map(|(n, v)| (n.clone(), v.saturating_sub(base.iter().find(|(m, _)| m == n).map_or(0, |b| b.1))))
        .collect()
}

impl QueueSnapshot {
    /// What the worker counted since `base`, an earlier snapshot of it: its counters less
    /// their values then; its gauges (FQ backlog, high water, flows) and its time accounting
    /// as they are now.
    pub fn since(&self, base: &QueueSnapshot) -> QueueSnapshot {
        let mut q = self.clone();
        for (p, b) in q.ports.iter_mut().zip(&base.ports) {
            *p = p.since(b);
        }
        q.sleeps = q.sleeps.saturating_sub(base.sleeps);
        q.rt_yields = q.rt_yields.saturating_sub(base.rt_yields);
        for (s, b) in q.sojourn.iter_mut().zip(&base.sojourn) {
            *s = s.saturating_sub(*b);
        }
        q.sojourn_ns = q.sojourn_ns.saturating_sub(base.sojourn_ns);
        q.unstamped = q.unstamped.saturating_sub(base.unstamped);
        q.fq_collisions = q.fq_collisions.saturating_sub(base.fq_collisions);
        q.icmp_rate_limited = q.icmp_rate_limited.saturating_sub(base.icmp_rate_limited);
        q.xsk_reads = q.xsk_reads.saturating_sub(base.xsk_reads);
        q
    }
}

/// Where one pool's frames are ([`PoolGauges::snapshot`]): `fill` split into `fill_ring`,
/// `rx_ring` and `rx_kernel`, `tx` into `tx_ring`, `completion` and `tx_kernel`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror PoolGauges")]
pub struct FrameSnapshot {
    pub total: u64,
    pub free: u64,
    #[serde(default)]
    pub queued: u64,
    pub fill: u64,
    pub tx: u64,
    #[serde(default)]
    pub fill_ring: u64,
    #[serde(default)]
    pub rx_ring: u64,
    #[serde(default)]
    pub rx_kernel: u64,
    #[serde(default)]
    pub tx_ring: u64,
    #[serde(default)]
    pub completion: u64,
    #[serde(default)]
    pub tx_kernel: u64,
}

impl FrameSnapshot {
    /// Frames not found in any place: must be zero.
    pub fn unaccounted(&self) -> i64 {
        self.total as i64 - (self.free + self.queued + self.fill + self.tx) as i64
    }
}

/// A copy of [`QueueCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror QueueCounters")]
pub struct QueueSnapshot {
    pub queue: u32,
    pub core: Option<usize>,
    pub ports: Vec<PortSnapshot>,
    pub sleeps: u64,
    #[serde(default)]
    pub rt_yields: u64,
    /// By [`sojourn_bucket`].
    #[serde(default)]
    pub sojourn: Vec<u64>,
    /// The sum of the sojourns counted in `sojourn`, ns.
    #[serde(default)]
    pub sojourn_ns: u64,
    #[serde(default)]
    pub unstamped: u64,
    #[serde(default)]
    pub fq_backlog: u64,
    #[serde(default)]
    pub fq_high_water: u64,
    #[serde(default)]
    pub fq_flows: u64,
    #[serde(default)]
    pub fq_collisions: u64,
    pub icmp_rate_limited: u64,
    /// [`QueueCounters::xsk_reads`] (0 in reports from before xfwd counted them).
    #[serde(default)]
    pub xsk_reads: u64,
    /// Where the worker's time went, since it started ([`crate::load`]).
    #[serde(default)]
    pub load: LoopTotals,
}

/// (name, count) lists in JSON as an object, `{"runt": 0, "ttl-exceeded": 3, …}`, in their
/// order, so a script reads a count by its name (`.drops["runt"]`); read back from such an
/// object or from the list of `[name, count]` pairs that reports written before held.
pub mod named {
    use std::fmt;

    use serde::de::{MapAccess, SeqAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    /// Writes `counts` as an object.
    pub fn serialize<S: Serializer>(counts: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(counts.len()))?;
        for (name, n) in counts {
            map.serialize_entry(name, n)?;
        }
        map.end()
    }

    /// Reads an object, or a list of pairs.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, u64)>, D::Error> {
        struct Counts;
        impl<'de> Visitor<'de> for Counts {
            type Value = Vec<(String, u64)>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of counts by name, or a list of [name, count] pairs")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(entry) = a.next_entry::<String, u64>()? {
                    v.push(entry);
                }
                Ok(v)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(entry) = a.next_element::<(String, u64)>()? {
                    v.push(entry);
                }
                Ok(v)
            }
        }
        d.deserialize_any(Counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_since_a_base_subtract_by_name_and_never_go_below_zero() {
        let base = PortSnapshot {
            rx_frames: 10,
            drops: vec![("runt".into(), 2), ("no-route".into(), 5)],
            ..Default::default()
        };
        let now = PortSnapshot {
            rx_frames: 14,
            drops: vec![("runt".into(), 3), ("no-route".into(), 5)],
            ..Default::default()
        };
        let d = now.since(&base);
        assert_eq!((d.rx_frames, d.drops.clone()), (4, vec![("runt".into(), 1), ("no-route".into(), 0)]));
        assert_eq!(base.since(&now).rx_frames, 0);
        assert_eq!(named_since(&[("a".into(), 3)], &[]), [("a".to_owned(), 3)]);
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Counts {
        #[serde(with = "named")]
        c: Vec<(String, u64)>,
    }

    #[test]
    fn counts_are_an_object_in_their_order_and_the_old_pairs_still_read() {
        let v = Counts { c: vec![("runt".into(), 2), ("bad-checksum".into(), 0), ("no-route".into(), 7)] };
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(text, r#"{"c":{"runt":2,"bad-checksum":0,"no-route":7}}"#);
        assert_eq!(serde_json::from_str::<Counts>(&text).unwrap(), v);
        let old = r#"{"c":[["runt",2],["bad-checksum",0],["no-route",7]]}"#;
        assert_eq!(serde_json::from_str::<Counts>(old).unwrap(), v);
        assert!(serde_json::from_str::<Counts>(r#"{"c":{"runt":-1}}"#).is_err());
    }

    #[test]
    fn a_pool_snapshot_sums_its_members_flows_and_splits_what_the_kernel_holds() {
        let g = PoolGauges::new(vec![0, 1], vec!["eth4".into()], 200, 40);
        // Member 0 filled 80 and sent 20 of which it reaped 5; member 1 received 30 of those 80
        // and reaped 10 of member 0's 20, and put 5 frames in the spare list.
        let (m0, m1) = (&g.members[0], &g.members[1]);
        m0.free.set(40);
        m0.fill.set(80);
        m0.tx.set(15);
        m1.free.set(35);
        m1.fill.set(-30);
        m1.tx.set(-10);
        m1.spare.set(5);
        m0.rx_ring.set(0);
        m1.rx_ring.set(6);
        m0.tx_ring.set(2);
        g.ports[0].fill_ring.set(40);
        g.ports[0].completion.set(1);
        let f = g.snapshot();
        // Spare: 40 at start + 5 = 45, free 40 + 35 + 45 = 120; fill 50; tx 5.
        assert_eq!((f.total, f.free, f.fill, f.tx), (200, 120, 50, 5));
        assert_eq!(f.unaccounted(), 25, "200 - 120 - 50 - 5");
        assert_eq!((f.fill_ring, f.rx_ring, f.rx_kernel), (40, 6, 4));
        assert_eq!((f.tx_ring, f.completion, f.tx_kernel), (2, 1, 2));
        // Flows that sum below zero (never, between batches) read as none, not as 2^64.
        m1.tx.set(-100);
        assert_eq!(g.snapshot().tx, 0);
    }

    #[test]
    fn sojourn_buckets_are_two_per_power_of_two_and_quantiles_read_their_floor() {
        assert_eq!((sojourn_bucket(0), sojourn_bucket(1)), (0, 1));
        assert_eq!((sojourn_bucket(2), sojourn_bucket(3), sojourn_bucket(4)), (2, 3, 4));
        assert_eq!((sojourn_bucket(5), sojourn_bucket(6), sojourn_bucket(7)), (4, 5, 5));
        for b in 0..SOJOURN_BUCKETS - 1 {
            let f = sojourn_floor(b);
            assert_eq!(sojourn_bucket(f), b, "floor of {b}");
            if b > 0 {
                assert_eq!(sojourn_bucket(f - 1), b - 1, "just below {b}");
            }
        }
        assert_eq!(sojourn_bucket(u64::MAX), SOJOURN_BUCKETS - 1);
        // 5 ms is bucket floor 4,194,304 ns (2^22), its next bucket starts at 6,291,456.
        assert_eq!(sojourn_floor(sojourn_bucket(5_000_000)), 4_194_304);
        let mut hist = vec![0u64; SOJOURN_BUCKETS];
        assert_eq!(sojourn_quantile(&hist, 0.5), None);
        hist[sojourn_bucket(1_000)] = 98;
        hist[sojourn_bucket(5_000_000)] = 2;
        assert_eq!(sojourn_quantile(&hist, 0.5), Some(sojourn_floor(sojourn_bucket(1_000))));
        assert_eq!(sojourn_quantile(&hist, 0.98), Some(sojourn_floor(sojourn_bucket(1_000))));
        assert_eq!(sojourn_quantile(&hist, 0.99), Some(4_194_304));
        assert_eq!(sojourn_quantile(&hist, 1.0), Some(4_194_304));
    }

    #[test]
    fn counters_add_and_snapshot() {
        let q = QueueCounters::new(1, Some(0), 2);
        q.ports[1].rx_frames.add(3);
        q.ports[1].drop(Reason::SameSegment);
        q.ports[1].drop(Reason::SameSegment);
        let s = q.snapshot();
        assert_eq!(s.ports[1].rx_frames, 3);
        assert_eq!(s.ports[1].dropped(), 2);
        assert_eq!(s.ports[1].drops[Reason::SameSegment as usize], ("same-segment".to_owned(), 2));
        let mut total = PortSnapshot::default();
        total.accumulate(&s.ports[1]);
        total.accumulate(&s.ports[1]);
        assert_eq!(total.dropped(), 4);
        assert_eq!(total.rx_frames, 6);
    }
}
