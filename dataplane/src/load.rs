//! Loop accounting: where a worker's time goes, the real load of a core that may spin.
//!
//! `top` shows a busy-polling worker at 100 % whatever it forwards, and an adaptive one hides
//! the rounds it spins before sleeping. A worker's loop is a sequence of rounds; each round
//! either did work (took frames off an RX ring, sent, reaped its own completions) or did not.
//! Timing the rounds splits the worker's wall time into
//!
//! - **busy**: rounds with work — receiving and deciding, transmitting (the kicks, system
//!   calls that on veth run the receiving side too), reaping and refilling;
//! - **idle**: rounds without work — spinning, and sleeping in poll(2);
//! - **preempted**: time the thread was runnable but another ran on its CPU (the kernel's
//!   `schedstat` run delay), taken out of busy and idle, not counted as work.
//!
//! busy + idle + preempted = wall. From them: the busy fraction (the core's headroom is the
//! rest), nanoseconds of busy time per frame received, frames per round with work (VPP's
//! vectors per call) and a histogram of them.
//!
//! Pure: times (nanoseconds of `CLOCK_MONOTONIC`) and the run delay are passed in; the worker
//! reads them ([`crate::io::frames::worker`]). Preempted time is read every
//! [`SCHEDSTAT_EVERY_NS`] and shared between the busy and idle time of that slice in
//! proportion to their wall time: the kernel says how long the thread waited, not during what.

use serde::{Deserialize, Serialize};

/// Buckets of the frames-per-round histogram: 0 (work, but no frame received), 1, 2–3, 4–7,
/// …, 128–255, 256 and more.
pub const BATCH_BUCKETS: usize = 10;

/// How often the worker reads its run delay (10 ms: a hundred reads a second).
pub const SCHEDSTAT_EVERY_NS: u64 = 10_000_000;

/// The histogram bucket of a round that received `frames`.
#[inline]
pub fn batch_bucket(frames: u64) -> usize {
    ((u64::BITS - frames.leading_zeros()) as usize).min(BATCH_BUCKETS - 1)
}

/// The smallest frame count of bucket `b`.
pub fn batch_floor(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1 << (b - 1)
    }
}

/// A worker's accounting since it started (plain numbers: a snapshot, or the worker's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopTotals {
    /// Wall time covered by the rounds so far.
    pub wall_ns: u64,
    /// Rounds with work, wall time (preempted time inside them included).
    pub work_ns: u64,
    /// Rounds without work, wall time (sleeping and preempted time included).
    pub idle_ns: u64,
    /// Of `idle_ns`: in poll(2), waiting for frames.
    pub sleep_ns: u64,
    /// Run delay attributed to the rounds with work.
    pub preempted_work_ns: u64,
    /// Run delay attributed to the rounds without work.
    pub preempted_idle_ns: u64,
    /// Of `work_ns`: taking frames off the RX rings, deciding, queueing (kicks excluded).
    pub decide_ns: u64,
    /// Of `work_ns`: kicking the TX rings (`sendto`).
    pub tx_ns: u64,
    /// Of `work_ns`: reaping completions, refilling the fill rings, publishing (kicks excluded).
    pub reap_ns: u64,
    /// Rounds with work.
    pub rounds_work: u64,
    /// Rounds without work.
    pub rounds_idle: u64,
    /// Frames taken off the RX rings.
    pub frames: u64,
    /// Rounds with work by frames received, by [`batch_bucket`].
    pub batches: [u64; BATCH_BUCKETS],
    /// Whether the run delay could be read (no schedstat: preempted time stays in busy/idle).
    pub schedstat: bool,
}

impl LoopTotals {
    /// Busy time: rounds with work, less the time the thread was preempted in them.
    pub fn busy_ns(&self) -> u64 {
        self.work_ns.saturating_sub(self.preempted_work_ns)
    }

    /// Idle time: rounds without work, less the time the thread was preempted in them.
    pub fn idle_net_ns(&self) -> u64 {
        self.idle_ns.saturating_sub(self.preempted_idle_ns)
    }

    /// Time runnable but not running.
    pub fn preempted_ns(&self) -> u64 {
        self.preempted_work_ns + self.preempted_idle_ns
    }

    /// What happened between `earlier` and `self` (counts that went back read as zero).
    pub fn since(&self, earlier: &LoopTotals) -> LoopTotals {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let mut batches = [0; BATCH_BUCKETS];
        for (i, b) in batches.iter_mut().enumerate() {
            *b = d(self.batches[i], earlier.batches[i]);
        }
        LoopTotals {
            wall_ns: d(self.wall_ns, earlier.wall_ns),
            work_ns: d(self.work_ns, earlier.work_ns),
            idle_ns: d(self.idle_ns, earlier.idle_ns),
            sleep_ns: d(self.sleep_ns, earlier.sleep_ns),
            preempted_work_ns: d(self.preempted_work_ns, earlier.preempted_work_ns),
            preempted_idle_ns: d(self.preempted_idle_ns, earlier.preempted_idle_ns),
            decide_ns: d(self.decide_ns, earlier.decide_ns),
            tx_ns: d(self.tx_ns, earlier.tx_ns),
            reap_ns: d(self.reap_ns, earlier.reap_ns),
            rounds_work: d(self.rounds_work, earlier.rounds_work),
            rounds_idle: d(self.rounds_idle, earlier.rounds_idle),
            frames: d(self.frames, earlier.frames),
            batches,
            schedstat: self.schedstat,
        }
    }

    /// Adds `other` (to total several workers).
    pub fn accumulate(&mut self, other: &LoopTotals) {
        self.wall_ns += other.wall_ns;
        self.work_ns += other.work_ns;
        self.idle_ns += other.idle_ns;
        self.sleep_ns += other.sleep_ns;
        self.preempted_work_ns += other.preempted_work_ns;
        self.preempted_idle_ns += other.preempted_idle_ns;
        self.decide_ns += other.decide_ns;
        self.tx_ns += other.tx_ns;
        self.reap_ns += other.reap_ns;
        self.rounds_work += other.rounds_work;
        self.rounds_idle += other.rounds_idle;
        self.frames += other.frames;
        for (a, b) in self.batches.iter_mut().zip(other.batches) {
            *a += b;
        }
        self.schedstat |= other.schedstat;
    }

    /// The fraction of the wall time the worker was busy (`None`: no time covered).
    pub fn busy_fraction(&self) -> Option<f64> {
        (self.wall_ns > 0).then(|| self.busy_ns() as f64 / self.wall_ns as f64)
    }

    /// The fraction of the wall time the worker was preempted (`None`: no time covered, or
    /// the run delay could not be read).
    pub fn preempted_fraction(&self) -> Option<f64> {
        (self.wall_ns > 0 && self.schedstat).then(|| self.preempted_ns() as f64 / self.wall_ns as f64)
    }

    /// Busy nanoseconds per frame received (`None`: no frame).
    pub fn ns_per_frame(&self) -> Option<f64> {
        (self.frames > 0).then(|| self.busy_ns() as f64 / self.frames as f64)
    }

    /// Frames received per round with work (`None`: no such round).
    pub fn frames_per_round(&self) -> Option<f64> {
        (self.rounds_work > 0).then(|| self.frames as f64 / self.rounds_work as f64)
    }
}

/// A worker's running accounting: it reports each round's boundaries, this adds them up.
#[derive(Debug, Clone)]
pub struct LoopAccount {
    totals: LoopTotals,
    /// The end of the last round (the start of the next).
    last: u64,
    /// The run delay at the last read (`None`: not read yet).
    delay: Option<u64>,
    /// Work and wall time at the last read: the slice the next read's delay is shared over.
    slice_work: u64,
    slice_wall: u64,
    /// When the run delay is next due.
    delay_due: u64,
}

impl LoopAccount {
    /// Accounting whose first round starts at `now`.
    pub fn new(now: u64) -> LoopAccount {
        LoopAccount {
            totals: LoopTotals::default(),
            last: now,
            delay: None,
            slice_work: 0,
            slice_wall: 0,
            delay_due: now,
        }
    }

    /// When the current round began.
    #[inline]
    pub fn round_start(&self) -> u64 {
        self.last
    }

    /// A round with work that received `frames`: from its start to `rx_end` the RX rings were
    /// taken and decided, from there to `end` the rings reaped and refilled; kicks took
    /// `tx_rx` of the first part and `tx_reap` of the second.
    #[inline]
    pub fn work_round(&mut self, rx_end: u64, end: u64, frames: u64, tx_rx: u64, tx_reap: u64) {
        let t = &mut self.totals;
        let first = rx_end.saturating_sub(self.last);
        let second = end.saturating_sub(rx_end);
        t.decide_ns += first.saturating_sub(tx_rx);
        t.reap_ns += second.saturating_sub(tx_reap);
        t.tx_ns += tx_rx.min(first) + tx_reap.min(second);
        t.work_ns += first + second;
        t.wall_ns += first + second;
        t.rounds_work += 1;
        t.frames += frames;
        t.batches[batch_bucket(frames)] += 1;
        self.last = self.last.max(end);
    }

    /// A round without work, ending at `end`, of which `slept` in poll(2).
    #[inline]
    pub fn idle_round(&mut self, end: u64, slept: u64) {
        let t = &mut self.totals;
        let d = end.saturating_sub(self.last);
        t.idle_ns += d;
        t.wall_ns += d;
        t.sleep_ns += slept.min(d);
        t.rounds_idle += 1;
        self.last = self.last.max(end);
    }

    /// Whether the run delay is due to be read at `now`.
    #[inline]
    pub fn delay_due(&self, now: u64) -> bool {
        now >= self.delay_due
    }

    /// The thread's run delay so far (`None`: it cannot be read), read at `now`: what it grew
    /// by since the last read is shared between the busy and idle time of the slice since
    /// then, in proportion to their wall time.
    pub fn run_delay(&mut self, now: u64, delay: Option<u64>) {
        self.delay_due = now.saturating_add(SCHEDSTAT_EVERY_NS);
        let Some(delay) = delay else {
            return;
        };
        let t = &mut self.totals;
        t.schedstat = true;
        let (work, wall) = (t.work_ns - self.slice_work, t.wall_ns - self.slice_wall);
        (self.slice_work, self.slice_wall) = (t.work_ns, t.wall_ns);
        let Some(before) = self.delay.replace(delay) else {
            return;
        };
        // Never more than the slice held: a delay read late (or a slice without rounds) cannot
        // make busy or idle time negative.
        let grew = delay.saturating_sub(before).min(wall);
        let to_work = if wall == 0 { 0 } else { (u128::from(grew) * u128::from(work) / u128::from(wall)) as u64 };
        t.preempted_work_ns += to_work;
        t.preempted_idle_ns += grew - to_work;
    }

    /// The totals so far.
    #[inline]
    pub fn totals(&self) -> &LoopTotals {
        &self.totals
    }
}

/// The run delay in nanoseconds from the text of `/proc/thread-self/schedstat` (time on the
/// CPU, time waiting on a run queue, timeslices).
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_buckets_are_powers_of_two() {
        let cases = [(0, 0), (1, 1), (2, 2), (3, 2), (4, 3), (63, 6), (64, 7), (255, 8), (256, 9), (u64::MAX, 9)];
        for (frames, bucket) in cases {
            assert_eq!(batch_bucket(frames), bucket, "{frames} frames");
        }
        for b in 0..BATCH_BUCKETS {
            assert_eq!(batch_bucket(batch_floor(b)), b);
        }
    }

    #[test]
    fn rounds_add_up_to_the_wall_time_and_split_into_phases() {
        let mut a = LoopAccount::new(1_000);
        // Work: 1,000..1,600 receiving (100 of it a kick), 1,600..2,000 reaping (50 a kick).
        a.work_round(1_600, 2_000, 64, 100, 50);
        // Idle: 2,000..2,300 spinning; then 2,300..10,300 of which 7,900 asleep.
        a.idle_round(2_300, 0);
        a.idle_round(10_300, 7_900);
        a.work_round(10_500, 10_600, 1, 0, 0);
        let t = a.totals();
        assert_eq!(t.wall_ns, 9_600);
        assert_eq!(t.work_ns + t.idle_ns, t.wall_ns);
        assert_eq!((t.decide_ns, t.tx_ns, t.reap_ns), (500 + 200, 150, 350 + 100));
        assert_eq!(t.decide_ns + t.tx_ns + t.reap_ns, t.work_ns);
        assert_eq!((t.sleep_ns, t.rounds_work, t.rounds_idle, t.frames), (7_900, 2, 2, 65));
        assert_eq!(t.batches[batch_bucket(64)], 1);
        assert_eq!(t.batches[batch_bucket(1)], 1);
        assert_eq!(t.busy_fraction(), Some(1_300.0 / 9_600.0));
        assert_eq!(t.ns_per_frame(), Some(20.0));
        assert_eq!(t.frames_per_round(), Some(32.5));
        // No schedstat read: preempted time is unknown, not zero.
        assert_eq!(t.preempted_fraction(), None);
    }

    #[test]
    fn preempted_time_is_shared_by_wall_time_and_the_parts_still_sum_to_the_wall() {
        let mut a = LoopAccount::new(0);
        a.run_delay(0, Some(5_000));
        assert!(!a.delay_due(1));
        assert!(a.delay_due(SCHEDSTAT_EVERY_NS));
        // A slice of 1,000 ns of work and 3,000 idle; the thread waited 400 ns in it.
        a.work_round(600, 1_000, 10, 0, 0);
        a.idle_round(4_000, 0);
        a.run_delay(4_000, Some(5_400));
        let t = *a.totals();
        assert_eq!((t.preempted_work_ns, t.preempted_idle_ns), (100, 300));
        assert_eq!(t.busy_ns() + t.idle_net_ns() + t.preempted_ns(), t.wall_ns);
        assert_eq!(t.preempted_fraction(), Some(0.1));
        // A delay that grew by more than the slice (read late) is capped at the slice.
        a.idle_round(5_000, 0);
        a.run_delay(5_000, Some(1_000_000));
        let t = *a.totals();
        assert_eq!(t.preempted_idle_ns, 300 + 1_000);
        assert_eq!(t.busy_ns() + t.idle_net_ns() + t.preempted_ns(), t.wall_ns);
        // A delay that cannot be read leaves the figures as they were.
        a.idle_round(6_000, 0);
        a.run_delay(6_000, None);
        assert_eq!(a.totals().preempted_ns(), t.preempted_ns());
    }

    #[test]
    fn since_and_accumulate_are_inverse_enough() {
        let mut a = LoopAccount::new(0);
        a.work_round(10, 20, 3, 1, 1);
        let early = *a.totals();
        a.idle_round(50, 20);
        a.work_round(70, 80, 70, 0, 0);
        let d = a.totals().since(&early);
        assert_eq!((d.wall_ns, d.work_ns, d.idle_ns, d.frames, d.rounds_work), (60, 30, 30, 70, 1));
        assert_eq!(d.batches[batch_bucket(70)], 1);
        assert_eq!(d.batches[batch_bucket(3)], 0);
        let mut sum = early;
        sum.accumulate(&d);
        assert_eq!(sum, *a.totals());
        // Counts that went back (a restarted worker) read as zero, not as 2^64.
        assert_eq!(early.since(a.totals()).wall_ns, 0);
    }

    #[test]
    fn schedstat_text_gives_the_run_delay() {
        assert_eq!(parse_schedstat("507120 2333 1\n"), Some(2_333));
        assert_eq!(parse_schedstat("507120\n"), None);
        assert_eq!(parse_schedstat(""), None);
    }
}
