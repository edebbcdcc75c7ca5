//! When a worker running under SCHED_FIFO steps down to a normal thread's share, and back up:
//! a pure state machine over the rounds (the clock passed in), whose steps the worker takes
//! ([`super::Worker::run`] calls `sched`).
//!
//! Under sustained load — [`YIELD_AFTER_ROUNDS`] rounds with work in a row, spanning more than
//! [`YIELD_AFTER_MS`] — a real-time worker steps down, so that it shares the core with
//! everything else as the kernel's softirq work does once deferred to ksoftirqd. At the first
//! round without work it steps up again. A step the kernel refuses is not asked again: the
//! worker stays as it is from then on.

use super::{YIELD_AFTER_MS, YIELD_AFTER_ROUNDS};

/// A step to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// To a normal thread's share.
    Down,
    /// Back to SCHED_FIFO at this priority.
    Up(u8),
}

/// Where a worker stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StepDown {
    /// The real-time priority to step up to (`None`: not real-time, or no longer allowed).
    realtime: Option<u8>,
    /// Whether the worker is stepped down now.
    down: bool,
    /// When the current run of rounds with work began.
    busy_since_ms: u64,
    /// Rounds with work in a row.
    busy_rounds: u32,
}

impl StepDown {
    /// A worker started at real-time `priority` (`None`: a normal thread, never steps).
    pub(super) fn new(priority: Option<u8>) -> StepDown {
        StepDown { realtime: priority, down: false, busy_since_ms: 0, busy_rounds: 0 }
    }

    /// A round with work at `now_ms`: [`Step::Down`] when the load has been sustained.
    pub(super) fn on_work(&mut self, now_ms: u64) -> Option<Step> {
        if self.busy_rounds == 0 {
            self.busy_since_ms = now_ms;
        }
        self.busy_rounds = self.busy_rounds.saturating_add(1);
        let sustained =
            self.busy_rounds >= YIELD_AFTER_ROUNDS && now_ms.saturating_sub(self.busy_since_ms) > YIELD_AFTER_MS;
        (self.realtime.is_some() && !self.down && sustained).then_some(Step::Down)
    }

    /// A round without work: [`Step::Up`] when stepped down.
    pub(super) fn on_idle(&mut self) -> Option<Step> {
        self.busy_rounds = 0;
        match (self.realtime, self.down) {
            (Some(p), true) => {
                self.down = false;
                Some(Step::Up(p))
            }
            _ => None,
        }
    }

    /// How `step` went: a refused step ends the stepping (never seen for a step down; a step
    /// up is refused without a real-time limit).
    pub(super) fn taken(&mut self, step: Step, ok: bool) {
        match (step, ok) {
            (Step::Down, true) => self.down = true,
            (_, false) => self.realtime = None,
            (Step::Up(_), true) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds with work, one a millisecond from `from_ms`, until a step is asked for.
    fn work_until_step(s: &mut StepDown, from_ms: u64, rounds: u32) -> Option<(u32, Step)> {
        (0..rounds).find_map(|i| s.on_work(from_ms + u64::from(i)).map(|step| (i + 1, step)))
    }

    #[test]
    fn sustained_load_steps_down_and_the_first_pause_steps_back_up() {
        let mut s = StepDown::new(Some(50));
        // Both conditions: 32 rounds, and more than 2 ms since the first.
        assert_eq!(work_until_step(&mut s, 1000, 100), Some((YIELD_AFTER_ROUNDS, Step::Down)));
        s.taken(Step::Down, true);
        // Stepped down: more work asks nothing more.
        assert_eq!(work_until_step(&mut s, 2000, 100), None);
        assert_eq!(s.on_idle(), Some(Step::Up(50)));
        s.taken(Step::Up(50), true);
        assert_eq!(s.on_idle(), None);
        // The count starts again after the pause.
        assert_eq!(work_until_step(&mut s, 3000, 100), Some((YIELD_AFTER_ROUNDS, Step::Down)));
    }

    #[test]
    fn many_quick_rounds_are_not_sustained_load_nor_a_long_round_alone() {
        let mut s = StepDown::new(Some(50));
        // 1000 rounds within 2 ms: not yet.
        assert!((0..1000).all(|_| s.on_work(7).is_none()));
        assert_eq!(s.on_work(7 + YIELD_AFTER_MS + 1), Some(Step::Down));
        // One long round after a pause: not sustained.
        let mut s = StepDown::new(Some(50));
        assert_eq!(s.on_work(0), None);
        assert_eq!(s.on_work(1000), None);
    }

    #[test]
    fn a_refused_step_is_never_asked_again_and_a_normal_thread_never_steps() {
        let mut s = StepDown::new(Some(10));
        let (_, step) = work_until_step(&mut s, 0, 100).unwrap();
        s.taken(step, false);
        assert_eq!(work_until_step(&mut s, 200, 100), None);
        assert_eq!(s.on_idle(), None);
        // Refused on the way back up: a normal thread from then on.
        let mut s = StepDown::new(Some(10));
        let (_, step) = work_until_step(&mut s, 0, 100).unwrap();
        s.taken(step, true);
        assert_eq!(s.on_idle(), Some(Step::Up(10)));
        s.taken(Step::Up(10), false);
        assert_eq!(work_until_step(&mut s, 500, 100), None);
        let mut s = StepDown::new(None);
        assert_eq!(work_until_step(&mut s, 0, 1000), None);
        assert_eq!(s.on_idle(), None);
    }
}
