//! CoDel (RFC 8289): drop or mark by how long packets waited, for one queue.
//!
//! CoDel looks at each packet's sojourn time (dequeue time minus arrival time) as it leaves
//! the queue. While the sojourn stays below `target`, or the queue holds at most one MTU, nothing
//! happens. Once it has stayed at or above `target` for a whole `interval`, CoDel enters the
//! dropping state: it drops (or, for an ECN-capable packet, marks) one packet, then the next at
//! `interval / sqrt(count)` after the previous one, `count` growing by one each time, until a
//! packet's sojourn falls below `target` again. If the dropping state is re-entered soon after it
//! was left (within 16 intervals of the next drop it had scheduled), `count` starts where the last
//! episode's drops left it rather than at 1, as RFC 8289 section 5.5 describes (the Linux
//! variant).
//!
//! # Shape: one verdict per packet
//!
//! RFC 8289 writes CoDel as a `dequeue` that loops: drop the head, look at the next, drop again
//! while a drop is due. Here the caller owns the queue, so [`Codel::on_dequeue`] judges one
//! packet, just taken off the head: [`Verdict::Drop`] means "free it and call again with the next
//! head", which walks the RFC's loop one step per call. The caller passes the same `now` for the
//! packets of one dequeue, and calls [`Codel::on_empty`] when the queue it serves is empty (the
//! RFC's "dequeue found nothing"). The state machine keeps which step of the loop the next call
//! continues, so the sequence of verdicts is the RFC's.
//!
//! # Control law without floats
//!
//! `interval / sqrt(count)` is computed in integers, `interval · 2¹⁶ / isqrt(count · 2³²)`, only
//! when a drop or mark is scheduled, never per passing packet. (Linux caches a reciprocal square
//! root updated by one Newton step per increment; that trades a division for an approximation,
//! which was not needed here.) `count` saturates at `u32::MAX`.
//!
//! # ECN and the hard limit
//!
//! With [`CodelParams::ecn`], a packet the caller says is ECN-capable gets [`Verdict::Mark`]
//! (the caller sets CE, see [`super::flow::mark_ce`]) where a drop was due, and is sent. A flow
//! that ignores CE would then never be shed, so when the backlog reaches
//! [`CodelParams::hard_limit_bytes`] an ECN-capable packet is dropped like any other. (The flow
//! queues' own hard limit, the slot pool, drops at enqueue without looking at ECN at all.)

/// CoDel's settings. Times in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing sojourn time (RFC 8289: 5 ms).
    pub target_ns: u64,
    /// How long the sojourn must stay above target before dropping starts, and the base of the
    /// control law (RFC 8289: 100 ms).
    pub interval_ns: u64,
    /// A queue holding this many bytes or fewer is never dropped from (one MTU-sized packet).
    pub mtu_bytes: u32,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
    /// From this backlog on, ECN-capable packets are dropped instead of marked.
    pub hard_limit_bytes: u32,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            mtu_bytes: 1514,
            ecn: true,
            hard_limit_bytes: u32::MAX,
        }
    }
}

/// What to do with the packet just taken off the head of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it.
    Pass,
    /// Set CE in it, then send it.
    Mark,
    /// Free it, and ask again about the next packet at the head.
    Drop,
}

/// Where the next [`Codel::on_dequeue`] stands in RFC 8289's dequeue loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A fresh dequeue.
    Fresh,
    /// The last packet was the drop that entered the dropping state: this one is sent.
    Entered,
    /// The last packet was dropped in the dropping state: schedule the next drop, then see
    /// whether it is already due.
    Dropped,
}

/// CoDel's state for one queue.
#[derive(Debug, Clone)]
pub struct Codel {
    params: CodelParams,
    /// When the sojourn will have been above target for a whole interval; 0 while it is below.
    first_above_time: u64,
    /// In the dropping state.
    dropping: bool,
    /// When the next drop (or mark) is due, while dropping.
    drop_next: u64,
    /// Drops and marks since the dropping state was entered, plus the carried-over start.
    count: u32,
    /// `count` when the dropping state was last entered.
    last_count: u32,
    step: Step,
}

impl Codel {
    /// A queue's CoDel, not dropping.
    pub fn new(params: CodelParams) -> Codel {
        Codel { params, first_above_time: 0, dropping: false, drop_next: 0, count: 0, last_count: 0, step: Step::Fresh }
    }

    /// The settings.
    pub fn params(&self) -> &CodelParams {
        &self.params
    }

    /// In the dropping state.
    pub fn dropping(&self) -> bool {
        self.dropping
    }

    /// The control law's count (drops and marks of the current or last dropping state).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// When the next drop or mark is due (meaningful while dropping).
    pub fn drop_next_ns(&self) -> u64 {
        self.drop_next
    }

    /// Forgets everything, as for a queue that has just been created.
    pub fn reset(&mut self) {
        *self = Codel::new(self.params);
    }

    /// The queue was found empty: the sojourn is no longer above target and dropping stops.
    #[inline]
    pub fn on_empty(&mut self) {
        self.first_above_time = 0;
        self.dropping = false;
        self.step = Step::Fresh;
    }

    /// Judges the packet just taken off the head of the queue: it waited `sojourn_ns`, it is
    /// now `now_ns`, `backlog_bytes` are still queued behind it, and `ect` says whether it is
    /// ECN-capable. On [`Verdict::Drop`] the caller frees it and calls again with the next head
    /// (or [`Codel::on_empty`]), passing the same `now_ns`.
    #[inline]
    pub fn on_dequeue(&mut self, sojourn_ns: u64, now_ns: u64, backlog_bytes: u32, ect: bool) -> Verdict {
        let ok_to_drop = self.ok_to_drop(sojourn_ns, now_ns, backlog_bytes);
        let step = core::mem::replace(&mut self.step, Step::Fresh);
        let markable = ect && self.params.ecn && backlog_bytes < self.params.hard_limit_bytes;
        if self.dropping {
            if !ok_to_drop {
                // The sojourn fell below target (or the queue nearly drained): stop.
                self.dropping = false;
                return Verdict::Pass;
            }
            match step {
                Step::Entered => return Verdict::Pass,
                Step::Dropped => self.drop_next = self.control_law(self.drop_next),
                Step::Fresh => {}
            }
            if now_ns < self.drop_next {
                return Verdict::Pass;
            }
            self.count = self.count.saturating_add(1);
            if markable {
                // The marked packet is sent, which ends this dequeue: schedule the next one now.
                self.drop_next = self.control_law(self.drop_next);
                return Verdict::Mark;
            }
            self.step = Step::Dropped;
            Verdict::Drop
        } else if ok_to_drop {
            self.dropping = true;
            // Re-entering soon after leaving: start from the drop rate that last controlled the
            // queue. `now - drop_next` is counted as 0 if the scheduled drop is still ahead.
            let delta = self.count.wrapping_sub(self.last_count);
            let recent = now_ns.saturating_sub(self.drop_next) < 16 * self.params.interval_ns;
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.last_count = self.count;
            self.drop_next = self.control_law(now_ns);
            if markable {
                return Verdict::Mark;
            }
            self.step = Step::Entered;
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    }

    /// RFC 8289's `dodequeue` test: has the sojourn been above target for an interval, with more
    /// than one MTU queued?
    #[inline]
    fn ok_to_drop(&mut self, sojourn_ns: u64, now_ns: u64, backlog_bytes: u32) -> bool {
        if sojourn_ns < self.params.target_ns || backlog_bytes <= self.params.mtu_bytes {
            self.first_above_time = 0;
            return false;
        }
        if self.first_above_time == 0 {
            // 0 means "below target", so a first_above_time that would be 0 is nudged to 1.
            self.first_above_time = now_ns.saturating_add(self.params.interval_ns).max(1);
            return false;
        }
        now_ns >= self.first_above_time
    }

    /// `t + interval / sqrt(count)`.
    #[inline]
    fn control_law(&self, t: u64) -> u64 {
        t.saturating_add(interval_over_sqrt(self.params.interval_ns, self.count))
    }
}

/// `interval / sqrt(count)` in integers (count 0 is taken as 1).
#[inline]
pub fn interval_over_sqrt(interval_ns: u64, count: u32) -> u64 {
    // isqrt(count · 2³²) = sqrt(count) · 2¹⁶, to 16 fractional bits.
    let root = (u64::from(count.max(1)) << 32).isqrt();
    let q = (u128::from(interval_ns) << 16) / u128::from(root);
    u64::try_from(q).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const TARGET: u64 = 5 * MS;
    const INTERVAL: u64 = 100 * MS;
    /// Plenty queued: the one-MTU rule never applies.
    const BIG: u32 = 100_000;

    fn codel() -> Codel {
        Codel::new(CodelParams { ecn: false, ..CodelParams::default() })
    }

    /// Dequeues one packet of a standing queue with the given sojourn at `now`, dropping until a
    /// packet passes; returns the number dropped on the way.
    fn dequeue(c: &mut Codel, sojourn: u64, now: u64) -> u32 {
        let mut drops = 0;
        while c.on_dequeue(sojourn, now, BIG, false) == Verdict::Drop {
            drops += 1;
            assert!(drops < 1000, "a dequeue that never ends");
        }
        drops
    }

    #[test]
    fn control_law_is_interval_over_sqrt_count() {
        for n in 1..=1000u32 {
            let exact = INTERVAL as f64 / f64::from(n).sqrt();
            let got = interval_over_sqrt(INTERVAL, n) as f64;
            assert!((got - exact).abs() <= exact * 1e-4 + 1.0, "count {n}: {got} vs {exact}");
        }
        assert_eq!(interval_over_sqrt(INTERVAL, 0), INTERVAL);
        assert_eq!(interval_over_sqrt(INTERVAL, 4), INTERVAL / 2);
        assert!(interval_over_sqrt(INTERVAL, u32::MAX) > 0);
    }

    #[test]
    fn no_drop_below_target_however_long() {
        let mut c = codel();
        for i in 0..10_000u64 {
            assert_eq!(c.on_dequeue(TARGET - 1, i * MS, BIG, false), Verdict::Pass);
        }
        assert!(!c.dropping());
    }

    #[test]
    fn no_drop_before_a_whole_interval_above_target() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        // First packet above target at t0: the interval starts.
        for t in (t0..t0 + INTERVAL).step_by(MS as usize) {
            assert_eq!(c.on_dequeue(TARGET, t, BIG, false), Verdict::Pass, "at {}", t - t0);
        }
        // An interval later, the first drop.
        assert_eq!(c.on_dequeue(TARGET, t0 + INTERVAL, BIG, false), Verdict::Drop);
        assert!(c.dropping());
        assert_eq!(c.count(), 1);
    }

    #[test]
    fn a_dip_below_target_restarts_the_interval() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        c.on_dequeue(TARGET * 2, t0, BIG, false);
        c.on_dequeue(TARGET * 2, t0 + 90 * MS, BIG, false);
        c.on_dequeue(TARGET - 1, t0 + 95 * MS, BIG, false);
        // Above again: a new interval from here, so no drop at t0 + INTERVAL.
        assert_eq!(c.on_dequeue(TARGET * 2, t0 + 96 * MS, BIG, false), Verdict::Pass);
        assert_eq!(c.on_dequeue(TARGET * 2, t0 + INTERVAL, BIG, false), Verdict::Pass);
        assert_eq!(c.on_dequeue(TARGET * 2, t0 + 96 * MS + INTERVAL, BIG, false), Verdict::Drop);
    }

    #[test]
    fn at_most_one_mtu_queued_is_never_dropped() {
        let mut c = codel();
        let mtu = c.params().mtu_bytes;
        for i in 0..1_000u64 {
            assert_eq!(c.on_dequeue(50 * TARGET, i * MS, mtu, false), Verdict::Pass);
        }
        // One byte more, and the usual interval applies.
        assert_eq!(c.on_dequeue(50 * TARGET, 1_000 * MS, mtu + 1, false), Verdict::Pass);
        assert_eq!(c.on_dequeue(50 * TARGET, 1_000 * MS + INTERVAL, mtu + 1, false), Verdict::Drop);
    }

    /// Drives a standing queue (sojourn always above target) in 10 µs steps and returns the
    /// times of the drops.
    fn drop_times(c: &mut Codel, from: u64, until: u64) -> Vec<u64> {
        let mut times = Vec::new();
        let mut t = from;
        while t < until {
            for _ in 0..dequeue(c, 2 * TARGET, t) {
                times.push(t);
            }
            t += 10_000;
        }
        times
    }

    #[test]
    fn drop_spacing_follows_the_control_law() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        let times = drop_times(&mut c, t0, t0 + 2_000 * MS);
        assert_eq!(times[0], t0 + INTERVAL, "first drop an interval after the sojourn rose");
        // Drop n+1 comes interval/sqrt(n) after drop n (to the 10 µs step of the clock).
        assert!(times.len() > 12, "{} drops", times.len());
        for n in 1..=12usize {
            let gap = times[n] - times[n - 1];
            let want = (INTERVAL as f64 / (n as f64).sqrt()) as u64;
            assert!(gap.abs_diff(want) <= 10_000, "gap {n}: {gap} ns, control law {want} ns");
        }
        // One drop per dequeue while the spacing is wider than the clock step.
        assert!(times.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn drops_due_together_are_taken_in_one_dequeue() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        c.on_dequeue(2 * TARGET, t0, BIG, false);
        assert_eq!(dequeue(&mut c, 2 * TARGET, t0 + INTERVAL), 1);
        // Nobody dequeued for a long while: every drop the control law scheduled in between is
        // due now, and the RFC's loop takes them in one go: 100, 70.7, 57.7, 50 ms after.
        let late = t0 + INTERVAL + 100 * MS + 71 * MS + 58 * MS + 50 * MS;
        assert_eq!(dequeue(&mut c, 2 * TARGET, late), 4);
        assert_eq!(c.count(), 5);
    }

    #[test]
    fn sojourn_below_target_leaves_the_dropping_state() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        drop_times(&mut c, t0, t0 + 300 * MS);
        assert!(c.dropping());
        assert_eq!(c.on_dequeue(TARGET - 1, t0 + 300 * MS, BIG, false), Verdict::Pass);
        assert!(!c.dropping());
        // Above target again, but an interval must pass before the next drop.
        assert_eq!(dequeue(&mut c, 2 * TARGET, t0 + 301 * MS), 0);
        assert_eq!(dequeue(&mut c, 2 * TARGET, t0 + 400 * MS), 0);
        assert_eq!(dequeue(&mut c, 2 * TARGET, t0 + 401 * MS), 1);
    }

    #[test]
    fn an_empty_queue_leaves_the_dropping_state() {
        let mut c = codel();
        drop_times(&mut c, 0, 300 * MS);
        assert!(c.dropping());
        c.on_empty();
        assert!(!c.dropping());
        assert_eq!(dequeue(&mut c, 2 * TARGET, 300 * MS), 0, "the interval starts again");
    }

    #[test]
    fn quick_reentry_carries_the_count_over() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        let times = drop_times(&mut c, t0, t0 + 500 * MS);
        let count = c.count();
        assert_eq!(count as usize, times.len());
        assert!(count >= 5);
        // Leave, then come back above target straight away.
        let t1 = t0 + 500 * MS;
        c.on_dequeue(0, t1, BIG, false);
        let again = drop_times(&mut c, t1 + 10_000, t1 + 10_000 + INTERVAL + MS);
        assert_eq!(again.len(), 1);
        // Entered with the drops of the last episode after its first: count - 1 of them.
        assert_eq!(c.count(), count - 1);
        // And the next drop is spaced by that count, not by a full interval.
        let next = c.drop_next_ns() - again[0];
        assert_eq!(next, interval_over_sqrt(INTERVAL, count - 1));
    }

    #[test]
    fn late_reentry_starts_the_count_at_one() {
        let mut c = codel();
        let t0 = 1_000 * MS;
        drop_times(&mut c, t0, t0 + 500 * MS);
        assert!(c.count() >= 5);
        let t1 = t0 + 500 * MS;
        c.on_dequeue(0, t1, BIG, false);
        // Above target again only 16 intervals after the scheduled drop.
        let t2 = c.drop_next_ns() + 16 * INTERVAL;
        let again = drop_times(&mut c, t2, t2 + INTERVAL + MS);
        assert_eq!(again, vec![t2 + INTERVAL]);
        assert_eq!(c.count(), 1);
    }

    #[test]
    fn ecn_capable_packets_are_marked_instead_of_dropped() {
        let mut c = Codel::new(CodelParams::default());
        let t0 = 1_000 * MS;
        c.on_dequeue(2 * TARGET, t0, BIG, true);
        assert_eq!(c.on_dequeue(2 * TARGET, t0 + INTERVAL, BIG, true), Verdict::Mark);
        assert!(c.dropping());
        // Marks follow the same law as drops would.
        let mut marks = vec![t0 + INTERVAL];
        let mut t = t0 + INTERVAL;
        while marks.len() < 6 {
            t += 10_000;
            match c.on_dequeue(2 * TARGET, t, BIG, true) {
                Verdict::Mark => marks.push(t),
                Verdict::Pass => {}
                Verdict::Drop => panic!("an ECN-capable packet dropped below the hard limit"),
            }
        }
        for n in 1..marks.len() {
            let want = (INTERVAL as f64 / (n as f64).sqrt()) as u64;
            assert!((marks[n] - marks[n - 1]).abs_diff(want) <= 10_000);
        }
        // A packet that is not ECN-capable is dropped when its turn comes.
        let due = c.drop_next_ns();
        assert_eq!(c.on_dequeue(2 * TARGET, due, BIG, false), Verdict::Drop);
        // With ECN off, ECN-capable packets are dropped.
        let mut off = codel();
        off.on_dequeue(2 * TARGET, t0, BIG, true);
        assert_eq!(off.on_dequeue(2 * TARGET, t0 + INTERVAL, BIG, true), Verdict::Drop);
    }

    #[test]
    fn at_the_hard_limit_ecn_capable_packets_are_dropped() {
        let mut c = Codel::new(CodelParams { hard_limit_bytes: 50_000, ..CodelParams::default() });
        let t0 = 1_000 * MS;
        c.on_dequeue(2 * TARGET, t0, 49_999, true);
        assert_eq!(c.on_dequeue(2 * TARGET, t0 + INTERVAL, 49_999, true), Verdict::Mark);
        let due = c.drop_next_ns();
        assert_eq!(c.on_dequeue(2 * TARGET, due, 50_000, true), Verdict::Drop);
    }
}
