//! Time as the tables see it: whole seconds on a monotonic clock whose origin is xfwd's start.
//!
//! Decision and table code never reads a clock; the I/O layer reads [`Clock::now`] once per
//! batch and passes the value in, which keeps the decision code deterministic under test.

use std::time::Instant;

/// Whole seconds since the clock's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seconds(pub u32);

impl Seconds {
    /// The whole second that millisecond time `ms` (of [`Clock::now_ms`]) falls in.
    #[inline]
    pub fn from_ms(ms: u64) -> Seconds {
        Seconds(u32::try_from(ms / 1000).unwrap_or(u32::MAX - 1) + 1)
    }

    /// Seconds elapsed from `earlier` to `self` (0 if `earlier` is later).
    #[inline]
    pub fn since(self, earlier: Seconds) -> u32 {
        self.0.saturating_sub(earlier.0)
    }
}

/// A monotonic clock counting whole seconds from its creation.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    /// A clock whose origin is now.
    pub fn start() -> Clock {
        Clock { origin: Instant::now() }
    }

    /// The current time. The origin counts as second 1 so that 0 can mean "never".
    #[inline]
    pub fn now(&self) -> Seconds {
        Seconds::from_ms(self.now_ms())
    }

    /// Milliseconds since the origin.
    #[inline]
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::start()
    }
}

/// A wake-up for a thread that otherwise runs on a period: the kernel-mirror thread nudges
/// the XDP path's thread when it publishes new tables, so that they reach the program within
/// the time a step takes rather than within the period.
#[derive(Debug, Default)]
pub struct Nudge {
    nudged: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl Nudge {
    /// Wakes the waiter (or the next one to wait, at once).
    pub fn nudge(&self) {
        *self.nudged.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_one();
    }

    /// Waits until nudged or until `timeout` has passed; whether it was nudged (the nudge is
    /// taken).
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        let nudged = self.nudged.lock().unwrap_or_else(|p| p.into_inner());
        let (mut nudged, _) = self.wake.wait_timeout_while(nudged, timeout, |n| !*n).unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *nudged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nudge_wakes_the_waiter_once_and_a_wait_without_one_times_out() {
        let n = std::sync::Arc::new(Nudge::default());
        assert!(!n.wait(std::time::Duration::from_millis(1)), "no nudge: the timeout");
        n.nudge();
        assert!(n.wait(std::time::Duration::from_secs(60)), "a nudge before the wait is kept");
        assert!(!n.wait(std::time::Duration::from_millis(1)), "and taken");
        let waker = std::sync::Arc::clone(&n);
        let t = std::thread::spawn(move || waker.nudge());
        // Whatever the timing, the nudge wakes the wait long before a minute.
        assert!(n.wait(std::time::Duration::from_secs(60)));
        t.join().unwrap();
    }
}
