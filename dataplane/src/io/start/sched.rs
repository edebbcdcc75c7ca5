//! Process and thread settings start-up makes: the locked-memory limit for the UMEMs, and the
//! real-time policy the workers inherit ([`RealTime`]).

use crate::io::config::StartError;

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
}

impl RealTime {
    /// Takes SCHED_FIFO at `priority`; with `None`, changes nothing.
    pub fn enter(priority: Option<u8>) -> Result<RealTime, StartError> {
        let Some(p) = priority else {
            return Ok(RealTime { saved: None });
        };
        let saved = Policy::current();
        set_policy(libc::SCHED_FIFO, p).map_err(|e| {
            StartError::System(format!(
                "--rt-priority {p}: cannot take SCHED_FIFO ({e}); it needs CAP_SYS_NICE at start"
            ))
        })?;
        Ok(RealTime { saved: Some(saved) })
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
        assert!(RealTime::enter(None).unwrap().leave().is_ok());
        assert_eq!(Policy::current(), before, "no priority: nothing changes");
        // With CAP_SYS_NICE (root) the thread takes SCHED_FIFO; without, the refusal says why.
        match RealTime::enter(Some(5)) {
            Ok(rt) => {
                assert_eq!(Policy::current(), Policy { policy: libc::SCHED_FIFO, priority: 5 });
                rt.leave().unwrap();
                assert_eq!(Policy::current(), before);
                let rt = RealTime::enter(Some(5)).unwrap();
                drop(rt);
            }
            Err(e) => assert!(e.to_string().ends_with("it needs CAP_SYS_NICE at start"), "{e}"),
        }
        assert_eq!(Policy::current(), before);
    }
}
