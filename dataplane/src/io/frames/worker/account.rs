//! The loop accounting's clock and the thread's run delay ([`crate::load`]).

use crate::load::{parse_schedstat, LoopAccount};

/// A running worker's loop accounting and where its run delay is read.
pub(super) struct Accounting {
    pub(super) acct: LoopAccount,
    pub(super) delay: RunDelay,
}

impl Accounting {
    /// After a round is counted up to `now`: reads the run delay when it is due (so that the
    /// slice it is shared over includes that round) and publishes the totals then, or
    /// `always`.
    #[inline]
    pub(super) fn after_round(&mut self, now: u64, counters: &crate::stats::LoopCounters, always: bool) {
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
pub(super) struct RunDelay(Option<std::fs::File>);

impl RunDelay {
    /// Opens the calling thread's schedstat: call it on the thread to be measured.
    pub(super) fn open() -> RunDelay {
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
pub(super) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the valid timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}
