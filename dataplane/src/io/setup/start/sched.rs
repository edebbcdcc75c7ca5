//! Process and thread settings start-up makes: the locked-memory limit for the UMEMs, and the
//! real-time policy the workers inherit ([`RealTime`]).

use super::plan::RealTimeAsk;
use crate::io::setup::config::StartError;

/// Lifts this process's RLIMIT_MEMLOCK where allowed: UMEM pages count against it unless the
/// process has CAP_IPC_LOCK. Changes no system setting; a refusal is left for the UMEM's own
/// error to explain.
pub fn raise_memlock() {
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads a valid, initialised rlimit struct.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// SCHED_FIFO on the calling thread while it starts the workers, and what it had before.
///
/// Threads inherit their creator's policy, and setting a real-time one needs CAP_SYS_NICE,
/// which goes with the privileges: the main thread takes SCHED_FIFO before they are dropped,
/// the workers inherit it, and the main thread goes back to what it had (allowed without
/// privilege) with [`RealTime::leave`] before it starts any other thread. Dropped without
/// `leave` (start-up failed), it goes back quietly.
#[derive(Debug)]
pub struct RealTime {
    saved: Option<Policy>,
    priority: Option<u8>,
}

impl RealTime {
    /// Takes SCHED_FIFO at the priority asked; with `None`, changes nothing. A refusal stops
    /// the start when the priority was asked for by number, and is returned as a note
    /// otherwise (the workers then run as normal threads). Where it is taken, the process's
    /// real-time limit (RLIMIT_RTPRIO, its own) is raised to the priority, so that a worker
    /// that stepped down under sustained load ([`step_down`]) may step up again after the
    /// privileges are gone.
    pub fn enter(ask: Option<RealTimeAsk>) -> Result<(RealTime, Option<String>), StartError> {
        let Some(RealTimeAsk { priority: p, required }) = ask else {
            return Ok((RealTime { saved: None, priority: None }, None));
        };
        let saved = Policy::current();
        match set_policy(libc::SCHED_FIFO, p) {
            Ok(()) => {
                let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                // SAFETY: getrlimit writes into the valid rlimit struct it is given.
                let read = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) } == 0;
                let want = libc::rlim_t::from(p);
                if read && lim.rlim_cur < want {
                    // Raised to the priority, never lowered.
                    let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max.max(want) };
                    // SAFETY: setrlimit reads a valid, initialised rlimit struct.
                    let _ = unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &raised) };
                }
                Ok((RealTime { saved: Some(saved), priority: Some(p) }, None))
            }
            Err(e) if required => Err(StartError::System(format!(
                "--rt-priority {p}: cannot take SCHED_FIFO ({e}); it needs CAP_SYS_NICE at start, and under cgroup v1 real-time group scheduling a real-time budget for xfwd's cgroup"
            ))),
            Err(e) => Ok((
                RealTime { saved: None, priority: None },
                Some(format!(
                    "the workers run as normal threads: SCHED_FIFO {p} refused ({e}; it needs CAP_SYS_NICE, and under cgroup v1 real-time group scheduling a budget for xfwd's cgroup), so frames may wait behind other processes; --rt-priority off makes this the intent"
                )),
            )),
        }
    }

    /// The priority the workers will inherit, if any.
    pub fn priority(&self) -> Option<u8> {
        self.priority
    }

    /// What puts a thread started meanwhile (inheriting SCHED_FIFO) back under the policy
    /// this one had before [`RealTime::enter`]; nothing to do where it changed nothing.
    pub fn restorer(&self) -> impl FnOnce() + Send + 'static {
        let saved = self.saved;
        move || {
            if let Some(p) = saved {
                let _ = p.restore();
            }
        }
    }

    /// Goes back to the policy the thread had, for it and the threads it starts from now on.
    pub fn leave(mut self) -> std::io::Result<()> {
        self.saved.take().map_or(Ok(()), Policy::restore)
    }
}

impl Drop for RealTime {
    fn drop(&mut self) {
        if let Some(p) = self.saved.take() {
            let _ = p.restore();
        }
    }
}

/// The calling thread's SCHED_FIFO priority, if it runs under SCHED_FIFO.
pub fn fifo_priority() -> Option<u8> {
    let p = Policy::current();
    (p.policy == libc::SCHED_FIFO).then(|| u8::try_from(p.priority).unwrap_or(0))
}

/// The calling thread steps down to a normal thread's share (SCHED_OTHER), as the kernel
/// defers softirq work that runs too long to ksoftirqd, a normal thread.
pub fn step_down() -> std::io::Result<()> {
    set_policy(libc::SCHED_OTHER, 0)
}

/// Whether a thread of this process may take SCHED_FIFO at `priority` without privileges: the
/// RLIMIT_RTPRIO that [`RealTime::enter`] raises where the system lets it (CAP_SYS_RESOURCE).
pub fn may_step_up(priority: u8) -> bool {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the valid rlimit struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) } == 0;
    ok && lim.rlim_cur >= libc::rlim_t::from(priority)
}

/// The calling thread steps up to SCHED_FIFO at `priority` again (allowed without privileges
/// up to the RLIMIT_RTPRIO that [`RealTime::enter`] set).
pub fn step_up(priority: u8) -> std::io::Result<()> {
    set_policy(libc::SCHED_FIFO, priority)
}

/// A thread's scheduling policy and priority, to put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    policy: libc::c_int,
    priority: libc::c_int,
}

impl Policy {
    /// The calling thread's (SCHED_OTHER if it cannot be read).
    fn current() -> Policy {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is valid and writable.
        let policy = unsafe { libc::sched_getscheduler(0) };
        // SAFETY: as above.
        let ok = unsafe { libc::sched_getparam(0, &mut param) } == 0;
        if policy < 0 || !ok {
            return Policy { policy: libc::SCHED_OTHER, priority: 0 };
        }
        Policy { policy, priority: param.sched_priority }
    }

    /// Puts it back on the calling thread.
    fn restore(self) -> std::io::Result<()> {
        set_policy(self.policy, u8::try_from(self.priority).unwrap_or(0))
    }
}

/// Puts the calling thread under scheduling `policy` at `priority` (0 for SCHED_OTHER).
fn set_policy(policy: libc::c_int, priority: u8) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: i32::from(priority) };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised sched_param.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_time_policy_is_given_back_on_leave_and_on_drop() {
        let before = Policy::current();
        let (rt, note) = RealTime::enter(None).unwrap();
        assert_eq!((rt.priority(), note), (None, None));
        assert!(rt.leave().is_ok());
        assert_eq!(Policy::current(), before, "no priority: nothing changes");
        // With CAP_SYS_NICE (root) the thread takes SCHED_FIFO; without, the refusal says why:
        // an error when asked for by number, a note under auto.
        let fixed = Some(RealTimeAsk { priority: 5, required: true });
        let auto = Some(RealTimeAsk { priority: 5, required: false });
        match RealTime::enter(fixed) {
            Ok((rt, None)) => {
                assert_eq!(Policy::current(), Policy { policy: libc::SCHED_FIFO, priority: 5 });
                assert_eq!((rt.priority(), fifo_priority()), (Some(5), Some(5)));
                // A worker may step down and up again.
                step_down().unwrap();
                assert_eq!(fifo_priority(), None);
                step_up(5).unwrap();
                assert_eq!(fifo_priority(), Some(5));
                rt.leave().unwrap();
                assert_eq!(Policy::current(), before);
                let (rt, _) = RealTime::enter(auto).unwrap();
                drop(rt);
            }
            Ok((_, note)) => panic!("a note for a required priority: {note:?}"),
            Err(e) => {
                assert!(e.to_string().contains("it needs CAP_SYS_NICE at start"), "{e}");
                let (rt, note) = RealTime::enter(auto).unwrap();
                assert_eq!(rt.priority(), None);
                assert!(note.unwrap().starts_with("the workers run as normal threads"));
            }
        }
        assert_eq!(Policy::current(), before);
    }
}
