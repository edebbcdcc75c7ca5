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

/// Buckets of [`Delays`]: bucket *i* counts delays below 2^*i* µs (the last, the rest).
const DELAY_BUCKETS: usize = 24;

/// Delays by log2 µs bucket, and the longest: a change's way from the kernel to the workers'
/// tables (`routes::kernel`) or to the XDP program's (`io::program::fast`).
#[derive(Debug, Default)]
pub struct Delays {
    buckets: [AtomicU64; DELAY_BUCKETS],
    max_us: AtomicU64,
}

impl Delays {
    /// Counts one delay.
    pub fn record(&self, d: std::time::Duration) {
        let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
        let b = (64 - us.leading_zeros() as usize).min(DELAY_BUCKETS - 1);
        self.buckets[b].fetch_add(1, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    /// The delays counted so far ([`DelaySnapshot`]).
    pub fn snapshot(&self) -> DelaySnapshot {
        let hist: Vec<u64> = self.buckets.iter().map(|c| c.load(Relaxed)).collect();
        let total: u64 = hist.iter().sum();
        let max = self.max_us.load(Relaxed);
        let quantile = |q: f64| -> u64 {
            let want = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (b, n) in hist.iter().enumerate() {
                seen += n;
                if seen >= want {
                    return (1u64 << b).min(max.max(1));
                }
            }
            max
        };
        DelaySnapshot {
            quantiles: (total > 0).then(|| (quantile(0.5), quantile(0.99), max)),
            counted: hist.iter().enumerate().filter(|(_, n)| **n > 0).map(|(b, n)| (1u64 << b, *n)).collect(),
        }
    }
}

/// [`Delays`] at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelaySnapshot {
    /// The median, 99th percentile and longest, µs (`None`: none counted yet), each quantile a
    /// bucket's upper bound capped at the longest.
    pub quantiles: Option<(u64, u64, u64)>,
    /// The buckets counted: `(upper bound µs, count)`.
    pub counted: Vec<(u64, u64)>,
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

/// One counter of a table made by `counters!`: the word `show stats` and the reports name it
/// by, whether it is a gauge, its Prometheus family (name and help) if it has one of its own,
/// and its place in a snapshot of type `S`.
#[derive(Clone, Copy)]
pub struct CounterRow<S: 'static> {
    /// The word, hyphenated (`ecn-marked`).
    pub word: &'static str,
    /// A gauge (a value now, kept as it is by `since`) rather than a count.
    pub gauge: bool,
    /// Its Prometheus family, `(name, help)`; `None` for one shown in another's family.
    pub metric: Option<(&'static str, &'static str)>,
    /// Its value in a snapshot.
    pub get: fn(&S) -> u64,
    /// Its place in a snapshot, to write.
    pub get_mut: fn(&mut S) -> &mut u64,
}

impl<S> std::fmt::Debug for CounterRow<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterRow").field("word", &self.word).field("metric", &self.metric).finish()
    }
}

/// Declares a block of single-writer counters once. In `counters { … }` each row is its
/// documentation, then `field: "word"`, `gauge` for a value rather than a count, and, for one
/// with a Prometheus family of its own, `=> "metric_name", "help"`; `both { … }` lists the
/// fields that are not plain counters, with their type in the copy after `=>`, and `live { … }`
/// those the copy has not. It makes the block of [`Counter`]s, the plain copy (`snapshot`,
/// with the derives given; every counter `#[serde(default)]`, so reports written before a
/// counter existed still read), the copying, and the table of [`CounterRow`]s that
/// `show stats`, `/metrics`, totals and differences walk. Adding a counter is one row here and
/// its use.
macro_rules! counters {
    (@metric) => { None };
    (@metric $m:literal, $h:literal) => { Some(($m, $h)) };
    (@gauge) => { false };
    (@gauge gauge) => { true };
    (
        $(#[$sdoc:meta])* struct $live:ident;
        $(#[$cdoc:meta])* snapshot $snap:ident;
        $(#[$tdoc:meta])* table $table:ident;
        counters {
            $( $(#[$doc:meta])* $field:ident: $word:literal $($gauge:ident)? $(=> $metric:literal, $help:literal)?; )+
        }
        $( both { $( $(#[$xdoc:meta])* $xfield:ident: $xlive:ty => $(#[$xsattr:meta])* $xsnap:ty, )+ } )?
        $( live { $( $(#[$ldoc:meta])* $lfield:ident: $llive:ty, )+ } )?
    ) => {
        $(#[$sdoc])*
        pub struct $live {
            $( $( $(#[$xdoc])* pub $xfield: $xlive, )+ )?
            $( $(#[$doc])* pub $field: Counter, )+
            $( $( $(#[$ldoc])* pub $lfield: $llive, )+ )?
        }

        $(#[$cdoc])*
        pub struct $snap {
            $( $( $(#[$xdoc])* $(#[$xsattr])* pub $xfield: $xsnap, )+ )?
            $( $(#[$doc])* #[serde(default)] pub $field: u64, )+
        }

        $(#[$tdoc])*
        pub const $table: &[CounterRow<$snap>] = &[
            $( CounterRow {
                word: $word,
                gauge: counters!(@gauge $($gauge)?),
                metric: counters!(@metric $($metric, $help)?),
                get: |s| s.$field,
                get_mut: |s| &mut s.$field,
            }, )+
        ];

        #[allow(dead_code, reason = "each block uses what it needs of these")]
        impl $live {
            /// Copies every counter of the table into `to` (the other fields are the caller's).
            fn copy_counters(&self, to: &mut $snap) {
                $( to.$field = self.$field.get(); )+
            }

            /// Sets every counter of the table to its value in `from`. Only the owning worker
            /// may call this.
            fn set_counters(&self, from: &$snap) {
                $( self.$field.set(from.$field); )+
            }
        }
    };
}

/// Each of `rows` in `to`: its count since `base` (never below zero), or a gauge as in `now`.
fn rows_since<S>(rows: &[CounterRow<S>], now: &S, base: &S, to: &mut S) {
    for c in rows {
        let v = if c.gauge { (c.get)(now) } else { (c.get)(now).saturating_sub((c.get)(base)) };
        *(c.get_mut)(to) = v;
    }
}

counters! {
    /// What one worker counts for one port.
    #[derive(Debug, Default)]
    #[repr(align(64))]
    struct PortCounters;
    /// A copy of [`PortCounters`].
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    snapshot PortSnapshot;
    /// [`PortCounters`]' counters, in declaration order.
    table PORT_COUNTERS;
    counters {
        /// Frames taken off this port's RX ring.
        rx_frames: "rx-frames" => "xfwd_port_rx_frames_total", "Frames a worker took off the port's RX ring.";
        /// Bytes of those frames.
        rx_bytes: "rx-bytes" => "xfwd_port_rx_bytes_total", "Bytes of those frames.";
        /// Frames placed on this port's TX ring.
        tx_frames: "tx-frames" => "xfwd_port_tx_frames_total", "Frames a worker put on the port's TX ring.";
        /// Bytes of those frames.
        tx_bytes: "tx-bytes" => "xfwd_port_tx_bytes_total", "Bytes of those frames.";
        /// Received frames that were flooded (sent to every other port).
        flooded: "flooded" => "xfwd_port_flooded_frames_total", "Bridge: frames received on the port and flooded.";
        /// Received frames whose source could not be learnt because the FDB was full.
        fdb_full: "fdb-full" => "xfwd_port_fdb_full_total", "Bridge: sources not learnt on the port because the FDB was full.";
        /// Router: ICMP errors sent about frames received on this port.
        icmp_sent: "icmp-sent" => "xfwd_port_icmp_errors_sent_total", "Router: ICMP errors answering frames received on the port.";
        /// Frames that CoDel marked CE instead of dropping (ECN): counted on the port they came in
        /// on under `codel` (judged on the RX ring), on the egress port under `fq-codel` (judged in
        /// the flow queues, which are the egress port's).
        ecn_marked: "ecn-marked" => "xfwd_port_ecn_marked_frames_total", "Frames for the port marked CE by queue management instead of dropped.";
        /// Router: frames handed to the ARP thread to wait for their next hop's MAC.
        gleaned: "gleaned" => "xfwd_port_gleaned_frames_total", "Router: frames handed to the neighbour resolver, waiting for an answer.";
        /// TX kicks (sendto) issued on this port's socket.
        kicks: "kicks" => "xfwd_port_kicks_total", "Kicks (sendto) of the port's TX ring.";
        /// Kicks answered EAGAIN (the kernel sent a budget and more remains): kicked again
        /// (`xfwd_port_kick_failures_total{outcome="again"}`).
        kick_again: "kick-again";
        /// Kicks answered EBUSY, ENOBUFS or ENETDOWN (link down, device busy): retried next round.
        kick_busy: "kick-busy";
        /// Kicks answered with any other error.
        kick_error: "kick-error";
    }
    both {
        /// Drops, indexed by [`Reason`]; counted on the port the frame came in on, except
        /// `tx-ring-full`, `no-free-frame`, `fq-overflow` and (under `fq-codel`) `aqm-drop`,
        /// counted on the egress port. In a snapshot (reason name, count), in [`Reason::ALL`]
        /// order; in JSON an object (see [`named`]).
        drops: Drops => #[serde(with = "named")] Vec<(String, u64)>,
        /// The kernel's statistics of this port's socket (`XDP_STATISTICS`), copied by the
        /// worker every 250 ms ([`QueueCounters::xsk_reads`] counts the copies).
        xsk: XskGauges => XskSnapshot,
    }
}

counters! {
    /// The kernel's counters of one AF_XDP socket, as last read by its worker.
    #[derive(Debug, Default)]
    struct XskGauges;
    /// A copy of [`XskGauges`].
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    snapshot XskSnapshot;
    /// [`XskGauges`]' counters, in declaration order.
    table XSK_COUNTERS;
    counters {
        /// Frames dropped for lack of RX ring room or other reasons (`rx_dropped`).
        rx_dropped: "rx-dropped" => "xfwd_xsk_rx_dropped_total", "AF_XDP: frames the kernel dropped at the socket.";
        /// Frames dropped because the RX ring was full (`rx_ring_full`).
        rx_ring_full: "rx-ring-full" => "xfwd_xsk_rx_ring_full_total", "AF_XDP: times the RX ring was full.";
        /// Times the kernel found the fill ring empty (`rx_fill_ring_empty_descs`).
        fill_ring_empty: "fill-ring-empty" => "xfwd_xsk_fill_ring_empty_total", "AF_XDP: times the fill ring was empty.";
        /// Times the kernel found the TX ring empty when kicked (`tx_ring_empty_descs`).
        tx_ring_empty: "tx-ring-empty" => "xfwd_xsk_tx_ring_empty_total", "AF_XDP: times the TX ring was empty.";
        /// Invalid RX descriptors (`rx_invalid_descs`).
        rx_invalid: "rx-invalid" => "xfwd_xsk_rx_invalid_total", "AF_XDP: invalid RX descriptors.";
        /// Invalid TX descriptors (`tx_invalid_descs`): a frame sent with a bad length or address.
        tx_invalid: "tx-invalid" => "xfwd_xsk_tx_invalid_total", "AF_XDP: invalid TX descriptors.";
    }
}

impl XskGauges {
    /// Sets every gauge to what the kernel last said. Only the owning worker may call this.
    pub fn set(&self, s: &XskSnapshot) {
        self.set_counters(s);
    }

    /// A copy of the gauges.
    pub fn snapshot(&self) -> XskSnapshot {
        let mut s = XskSnapshot::default();
        self.copy_counters(&mut s);
        s
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

counters! {
    /// Everything one worker (one queue) counts.
    #[derive(Debug, Default)]
    struct QueueCounters;
    /// A copy of [`QueueCounters`].
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    snapshot QueueSnapshot;
    /// [`QueueCounters`]' own counters and gauges, in declaration order.
    table WORKER_COUNTERS;
    counters {
        /// Times the worker slept in poll(2) for lack of work (adaptive mode).
        sleeps: "sleeps" => "xfwd_worker_sleeps_total", "Times the worker slept in poll(2).";
        /// Times the worker, running under SCHED_FIFO, went back to a normal thread's share after
        /// working without a pause for [`crate::io::frames::worker::YIELD_AFTER_MS`].
        rt_yields: "rt-yields" => "xfwd_worker_rt_yields_total", "Times a real-time worker stepped down to a normal thread's share under sustained load.";
        /// The sum of the sojourns counted in `sojourn`, ns.
        sojourn_ns: "sojourn-ns";
        /// Received frames without a stamp (stamping off, or a driver without metadata room).
        unstamped: "unstamped" => "xfwd_worker_unstamped_frames_total", "Frames that reached the worker without an arrival time.";
        /// Frames whose flow found its set of the flow table full and shared another's queue.
        fq_collisions: "fq-collisions" => "xfwd_worker_fq_collisions_total", "Flow queues: frames whose flow shared another's queue.";
        /// Router: ICMP errors not sent because of the rate limit.
        icmp_rate_limited: "icmp-rate-limited" => "xfwd_worker_icmp_rate_limited_total", "Router: ICMP errors not sent for the rate limit.";
        /// Flow queues (`fq-codel`), summed over the worker's egress ports: frames queued now.
        fq_backlog: "fq-backlog" gauge => "xfwd_worker_fq_backlog_frames", "Flow queues: frames queued now.";
        /// Flows queued now (on a round-robin list).
        fq_flows: "fq-flows" gauge => "xfwd_worker_fq_flows", "Flow queues: flows queued now.";
        /// The most frames one port's flow queues ever held at once (the highest of the ports).
        fq_high_water: "fq-high-water" gauge => "xfwd_worker_fq_high_water_frames", "Flow queues: the most frames one port's queues held at once.";
    }
    both {
        /// The queue this worker serves on every port.
        queue: u32 => u32,
        /// The core it is pinned to, if any.
        core: Option<usize> => Option<usize>,
        /// Per port, in port order.
        ports: Box<[PortCounters]> => Vec<PortSnapshot>,
        /// How long frames waited since the XDP program stamped them, by [`sojourn_bucket`]:
        /// until the worker took them off the RX ring (`codel`), or until it handed them to a
        /// TX ring (`fq-codel`, where the flow queues are the wait).
        sojourn: Box<[Counter]> => #[serde(default)] Vec<u64>,
        /// Times the worker copied its sockets' statistics ([`PortCounters::xsk`]) and counted
        /// the frames in its rings ([`PoolGauges`]), every 250 ms: between two copies those are
        /// up to that old, while the kernel counts on. Published last ([`Counter::inc_release`]):
        /// a reader that sees it move twice since a first look has copies taken after that look.
        xsk_reads: Counter => #[serde(default)] u64,
        /// Where the worker's time goes ([`crate::load`]).
        load: LoopCounters => #[serde(default)] LoopTotals,
    }
    live {
        /// The worker's loop, beating every [`crate::io::frames::worker::BEAT_EVERY`] at most.
        beat: Heartbeat,
    }
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
            sojourn: (0..SOJOURN_BUCKETS).map(|_| Counter::default()).collect(),
            ..QueueCounters::default()
        }
    }

    /// A plain copy of the counters, for reporting. The copies of the socket statistics and
    /// the ring census in it (and in the pools, read after it) are at least as new as
    /// `xsk_reads` says: it is read first, with acquire ordering.
    pub fn snapshot(&self) -> QueueSnapshot {
        let xsk_reads = self.xsk_reads.get_acquire();
        let mut q = QueueSnapshot {
            queue: self.queue,
            core: self.core,
            ports: self.ports.iter().map(PortCounters::snapshot).collect(),
            sojourn: self.sojourn.iter().map(Counter::get).collect(),
            xsk_reads,
            load: self.load.snapshot(),
            ..QueueSnapshot::default()
        };
        self.copy_counters(&mut q);
        q
    }
}

impl PortCounters {
    /// A plain copy, for reporting.
    pub fn snapshot(&self) -> PortSnapshot {
        let mut s = PortSnapshot {
            drops: Reason::ALL.iter().map(|r| (r.name().to_owned(), self.drops[*r as usize].get())).collect(),
            xsk: self.xsk.snapshot(),
            ..PortSnapshot::default()
        };
        self.copy_counters(&mut s);
        s
    }
}

impl PortSnapshot {
    /// Sum of all drops.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }

    /// Adds `other` into `self` (to total a port over its queues).
    pub fn accumulate(&mut self, other: &PortSnapshot) {
        for c in PORT_COUNTERS {
            *(c.get_mut)(self) += (c.get)(other);
        }
        if self.drops.is_empty() {
            self.drops = other.drops.iter().map(|(n, _)| (n.clone(), 0)).collect();
        }
        for ((_, a), (_, b)) in self.drops.iter_mut().zip(&other.drops) {
            *a += b;
        }
        for c in XSK_COUNTERS {
            *(c.get_mut)(&mut self.xsk) += (c.get)(&other.xsk);
        }
    }

    /// What was counted since `base`, an earlier snapshot of the same counters (each count
    /// less its value in `base`; never below zero).
    pub fn since(&self, base: &PortSnapshot) -> PortSnapshot {
        let mut d = PortSnapshot { drops: named_since(&self.drops, &base.drops), ..PortSnapshot::default() };
        rows_since(PORT_COUNTERS, self, base, &mut d);
        rows_since(XSK_COUNTERS, &self.xsk, &base.xsk, &mut d.xsk);
        d
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
        rows_since(WORKER_COUNTERS, self, base, &mut q);
        for (s, b) in q.sojourn.iter_mut().zip(&base.sojourn) {
            *s = s.saturating_sub(*b);
        }
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

    #[test]
    fn delays_give_their_median_p99_and_longest_by_bucket() {
        let d = Delays::default();
        assert_eq!(d.snapshot().quantiles, None, "none yet: no figure");
        for us in [3u64, 5, 6, 7, 100, 100, 100, 100, 100, 40_000] {
            d.record(std::time::Duration::from_micros(us));
        }
        let s = d.snapshot();
        // 100 µs falls in the bucket below 128; the longest is kept exactly.
        assert_eq!(s.quantiles, Some((128, 40_000, 40_000)));
        assert_eq!(s.counted, vec![(4, 1), (8, 3), (128, 5), (65536, 1)]);
    }
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

    /// Every declared counter is copied, totalled and differenced by its own row: numbered
    /// counters come back each under its own name, and the words and families are unique.
    #[test]
    fn each_declared_counter_is_copied_totalled_and_differenced() {
        let live = PortCounters::default();
        for c in PORT_COUNTERS {
            let mut want = PortSnapshot::default();
            *(c.get_mut)(&mut want) = 1;
            live.set_counters(&want);
            let got = live.snapshot();
            for d in PORT_COUNTERS {
                assert_eq!((d.get)(&got), u64::from(d.word == c.word), "{} read for {}", d.word, c.word);
            }
        }
        let numbered = |k: u64| {
            let mut s = PortSnapshot::default();
            for (i, c) in PORT_COUNTERS.iter().enumerate() {
                *(c.get_mut)(&mut s) = k * (i as u64 + 1);
            }
            for (i, c) in XSK_COUNTERS.iter().enumerate() {
                *(c.get_mut)(&mut s.xsk) = k * (i as u64 + 100);
            }
            s
        };
        let (one, three) = (numbered(1), numbered(3));
        let mut total = one.clone();
        total.accumulate(&numbered(2));
        assert_eq!(total, three);
        assert_eq!(three.since(&one), numbered(2));
        assert_eq!(one.since(&three), PortSnapshot::default());
        let x = XskGauges::default();
        x.set(&three.xsk);
        assert_eq!(x.snapshot(), three.xsk);

        let rows = PORT_COUNTERS.iter().map(|c| (c.word, c.metric, c.gauge));
        let rows = rows.chain(XSK_COUNTERS.iter().map(|c| (c.word, c.metric, c.gauge)));
        let rows: Vec<_> = rows.chain(WORKER_COUNTERS.iter().map(|c| (c.word, c.metric, c.gauge))).collect();
        let mut words: Vec<_> = rows.iter().map(|r| r.0).collect();
        let mut metrics: Vec<_> = rows.iter().filter_map(|r| r.1.map(|m| m.0)).collect();
        for (word, metric, gauge) in &rows {
            if let Some((m, _)) = metric {
                assert!(m.starts_with("xfwd_") && m.ends_with("_total") != *gauge, "{word}: {m}");
            }
        }
        let n = (words.len(), metrics.len());
        words.sort_unstable();
        words.dedup();
        metrics.sort_unstable();
        metrics.dedup();
        assert_eq!(n, (words.len(), metrics.len()), "a word or a family declared twice");
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
