//! Dropping privileges once the kernel objects are made.
//!
//! xfwd needs privileges only to set up: to load the XDP program and its maps (`CAP_BPF`,
//! `CAP_NET_ADMIN` for an XDP program), to attach it (`CAP_NET_ADMIN`), to create the AF_XDP
//! and ARP packet sockets (`CAP_NET_RAW`) and to pin the UMEM (`CAP_IPC_LOCK`). From then on it
//! works on file descriptors it already holds: ring memory, `sendto` kicks, `poll`, map reads
//! on an open map fd, sends on a bound packet socket, and closing the bpf_link detaches the
//! program. So before any thread starts (Linux keeps capabilities per thread; a new thread
//! copies its creator's), [`drop_all`] empties every capability set, bounding set included,
//! sets `no_new_privs`, and optionally switches to an unprivileged user.

use std::ffi::CString;

use caps::CapSet;

/// Why privileges could not be dropped (the forwarder does not start).
#[derive(Debug, thiserror::Error)]
pub enum PrivError {
    /// `--user` names nobody in the password database.
    #[error("no user `{0}` (see /etc/passwd; give a name or a numeric uid)")]
    NoSuchUser(String),
    /// `--control-group` names no group in the group database.
    #[error("no group `{0}` (see /etc/group; give a name or a numeric gid)")]
    NoSuchGroup(String),
    /// The process already runs threads that would keep their capabilities.
    #[error("{0} threads already run; capabilities are per thread, so they must be dropped before any thread starts")]
    Threads(usize),
    /// A system call failed.
    #[error("{what}: {cause}")]
    Sys {
        /// The call.
        what: &'static str,
        /// What the kernel said.
        cause: String,
    },
    /// Capabilities remained after the drop.
    #[error("capabilities remain after the drop: {0}")]
    Remain(String),
}

/// A user to switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The name (or the number given).
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

/// Calls a reentrant database lookup (`getpwnam_r` and the like) with a buffer that grows
/// while the entry does not fit (`ERANGE`, e.g. a group with many members); `Ok(false)` when
/// there is no such entry.
fn lookup_with(
    what: &'static str,
    mut call: impl FnMut(&mut [libc::c_char]) -> (i32, bool),
) -> Result<bool, PrivError> {
    let mut len = 16 * 1024;
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        match call(&mut buf) {
            (0, found) => return Ok(found),
            (libc::ERANGE, _) if len < 16 * 1024 * 1024 => len *= 4,
            // "Not found" as some C libraries report it.
            (libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM, _) => return Ok(false),
            (rc, _) => return Err(PrivError::Sys { what, cause: std::io::Error::from_raw_os_error(rc).to_string() }),
        }
    }
}

impl User {
    /// Looks `name` (a login name or a numeric uid) up in the password database.
    pub fn lookup(name: &str) -> Result<User, PrivError> {
        let missing = || PrivError::NoSuchUser(name.to_owned());
        let c = CString::new(name).map_err(|_| missing())?;
        let uid = name.parse::<u32>().ok();
        // SAFETY: passwd is plain data; all-zero is a valid value to be filled in.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let found = lookup_with("reading the password database", |buf| {
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            let rc = match uid {
                // SAFETY: every pointer is valid for the length given; `found` receives &pw or null.
                Some(uid) => unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) },
                // SAFETY: `c` is NUL-terminated; the other pointers are valid for the length given.
                None => unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) },
            };
            (rc, !found.is_null())
        })?;
        if !found {
            return Err(missing());
        }
        // pw_uid and pw_gid are plain fields of `pw`, valid after the buffer is gone.
        Ok(User { name: name.to_owned(), uid: pw.pw_uid, gid: pw.pw_gid })
    }
}

/// Looks a group (a name or a numeric gid) up in the group database: its gid.
pub fn group_id(name: &str) -> Result<u32, PrivError> {
    let missing = || PrivError::NoSuchGroup(name.to_owned());
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let c = CString::new(name).map_err(|_| missing())?;
    // SAFETY: group is plain data; all-zero is a valid value to be filled in.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let found = lookup_with("reading the group database", |buf| {
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: `c` is NUL-terminated; the other pointers are valid for the length given.
        let rc = unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found) };
        (rc, !found.is_null())
    })?;
    if !found {
        return Err(missing());
    }
    Ok(gr.gr_gid)
}

/// What [`drop_all`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The real, effective and saved uid now.
    pub uid: u32,
    /// Whether the bounding set was emptied too (it needs `CAP_SETPCAP`, which a process given
    /// only file capabilities lacks; `no_new_privs` still keeps an exec from gaining any).
    pub bounding_cleared: bool,
    /// The capabilities kept (those asked for that the process held).
    pub kept: Vec<caps::Capability>,
}

fn sys(what: &'static str, rc: libc::c_int) -> Result<(), PrivError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(PrivError::Sys { what, cause: std::io::Error::last_os_error().to_string() })
    }
}

fn caps_err(what: &'static str) -> impl FnOnce(caps::errors::CapsError) -> PrivError {
    move |e| PrivError::Sys { what, cause: e.to_string() }
}

/// The number of threads in this process, from /proc (`None` when it cannot be read).
pub fn thread_count() -> Option<usize> {
    std::fs::read_dir("/proc/self/task").ok().map(|d| d.count())
}

/// Whether reading a map through an fd already held needs a capability on this kernel: before
/// Linux 6.5 every bpf(2) command was refused to an unprivileged caller while
/// `kernel.unprivileged_bpf_disabled` is set; since, only map creation and program loading are.
/// Returns the capability to keep for the counters, if any (`CAP_BPF` exists from 5.8).
pub fn keep_for_map_reads(kernel: (u32, u32), unprivileged_bpf_disabled: bool) -> Option<caps::Capability> {
    if !unprivileged_bpf_disabled || kernel >= (6, 5) {
        None
    } else if kernel >= (5, 8) {
        Some(caps::Capability::CAP_BPF)
    } else {
        Some(caps::Capability::CAP_SYS_ADMIN)
    }
}

/// What start-up needs, each with what for: a capability, or another that also serves (on
/// kernels before `CAP_BPF` and `CAP_PERFMON`, `CAP_SYS_ADMIN` stood for both). Locking the
/// UMEM (`CAP_IPC_LOCK`, or a locked-memory limit above its size) is checked where the size is
/// known, when the UMEM is made.
pub const FOR_START: [(caps::Capability, Option<caps::Capability>, &str); 4] = [
    (caps::Capability::CAP_NET_ADMIN, None, "attach the XDP program"),
    (caps::Capability::CAP_BPF, Some(caps::Capability::CAP_SYS_ADMIN), "load the XDP program and its maps"),
    (caps::Capability::CAP_PERFMON, Some(caps::Capability::CAP_SYS_ADMIN), "the verifier asks for it with CAP_BPF"),
    (caps::Capability::CAP_NET_RAW, None, "open the AF_XDP and packet sockets"),
];

/// Of `needs`, what `has` (an effective set) lacks, as "CAP_X (what for)".
pub fn missing(needs: &[(caps::Capability, Option<caps::Capability>, &str)], has: &caps::CapsHashSet) -> Vec<String> {
    needs
        .iter()
        .filter(|(c, or, _)| !has.contains(c) && !or.is_some_and(|o| has.contains(&o)))
        .map(|(c, _, why)| format!("{c} ({why})"))
        .collect()
}

/// Says, before anything is touched, which capabilities start-up needs and this process lacks.
pub fn check_for_start() -> Result<(), String> {
    let has =
        caps::read(None, caps::CapSet::Effective).map_err(|e| format!("reading this process's capabilities: {e}"))?;
    let lacking = missing(&FOR_START, &has);
    if lacking.is_empty() {
        return Ok(());
    }
    Err(format!(
        "missing capabilities: {}; run as root, or grant them (the units' AmbientCapabilities=, or setpriv/capsh; see docs/install.md)",
        lacking.join(", ")
    ))
}

/// [`keep_for_map_reads`] for the running kernel.
pub fn keep_for_map_reads_here() -> Option<caps::Capability> {
    // SAFETY: utsname is plain data; all-zero is valid, uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let release: String = u.release.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect();
    let mut nums = release.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u32>().ok());
    let kernel = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    let disabled =
        std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled").map(|s| s.trim() != "0").unwrap_or(true);
    keep_for_map_reads(kernel, disabled)
}

/// Drops every capability of this (single-threaded) process but `keep` and, with `user`,
/// switches to that user.
pub fn drop_all(user: Option<&User>, keep: &[caps::Capability]) -> Result<Dropped, PrivError> {
    // Fail closed: without /proc there is no telling whether other threads would keep theirs.
    let threads = thread_count().ok_or(PrivError::Sys {
        what: "reading /proc/self/task",
        cause: "cannot count this process's threads".into(),
    })?;
    if threads != 1 {
        return Err(PrivError::Threads(threads));
    }
    // Only what is held can be kept (a process given file capabilities may lack some).
    let held = caps::read(None, CapSet::Permitted).map_err(caps_err("reading the permitted set"))?;
    let keep: caps::CapsHashSet = keep.iter().copied().filter(|c| held.contains(c)).collect();
    // SAFETY: prctl with integer arguments only.
    sys("prctl(PR_SET_NO_NEW_PRIVS)", unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
    let bounding_cleared = caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    if bounding_cleared {
        for cap in caps::read(None, CapSet::Bounding).map_err(caps_err("reading the bounding set"))? {
            if !keep.contains(&cap) {
                caps::drop(None, CapSet::Bounding, cap).map_err(caps_err("emptying the bounding set"))?;
            }
        }
    }
    if let Some(u) = user {
        if !keep.is_empty() {
            // Keep the permitted set across the uid change; it is cut down to `keep` below.
            // SAFETY: prctl with integer arguments only.
            sys("prctl(PR_SET_KEEPCAPS)", unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) })?;
        }
        // SAFETY: setgroups with a zero-length list reads no memory.
        sys("setgroups", unsafe { libc::setgroups(0, std::ptr::null()) })?;
        // SAFETY: plain integer arguments.
        sys("setresgid", unsafe { libc::setresgid(u.gid, u.gid, u.gid) })?;
        // SAFETY: plain integer arguments.
        sys("setresuid", unsafe { libc::setresuid(u.uid, u.uid, u.uid) })?;
        if !keep.is_empty() {
            // SAFETY: prctl with integer arguments only.
            sys("prctl(PR_SET_KEEPCAPS)", unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) })?;
        }
    }
    for set in [CapSet::Ambient, CapSet::Inheritable] {
        caps::clear(None, set).map_err(caps_err("clearing a capability set"))?;
    }
    // Effective must stay a subset of permitted: cut it first.
    caps::set(None, CapSet::Effective, &keep).map_err(caps_err("setting the effective set"))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(caps_err("setting the permitted set"))?;
    caps::set(None, CapSet::Effective, &keep).map_err(caps_err("setting the effective set"))?;
    let left = caps::read(None, CapSet::Permitted).map_err(caps_err("reading the permitted set"))?;
    if left != keep {
        let mut names: Vec<String> = left.difference(&keep).map(ToString::to_string).collect();
        names.sort();
        return Err(PrivError::Remain(names.join(",")));
    }
    let mut kept: Vec<caps::Capability> = keep.into_iter().collect();
    kept.sort_by_key(|c| c.index());
    // SAFETY: getuid cannot fail.
    Ok(Dropped { uid: unsafe { libc::getuid() }, bounding_cleared, kept })
}

/// Drops `cap` from this thread's effective and permitted sets: the threads it starts from
/// now on go without it, those started before keep theirs (Linux keeps capabilities per
/// thread). Its bounding set, which [`drop_all`] left holding what it kept, stays as it is:
/// with `no_new_privs` set and nothing permitted, it grants nothing.
pub fn drop_one(cap: caps::Capability) -> Result<(), PrivError> {
    caps::drop(None, CapSet::Effective, cap).map_err(caps_err("dropping from the effective set"))?;
    caps::drop(None, CapSet::Permitted, cap).map_err(caps_err("dropping from the permitted set"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_found_by_name_and_number() {
        let root = User::lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(User::lookup("0").unwrap().uid, 0);
        let e = User::lookup("xfwd-no-such-user").unwrap_err();
        assert!(e.to_string().contains("no user `xfwd-no-such-user`"), "{e}");
        assert!(matches!(User::lookup("a\0b"), Err(PrivError::NoSuchUser(_))));
        assert_eq!(group_id("root").unwrap(), 0);
        use caps::Capability::*;
        let has: caps::CapsHashSet = [CAP_NET_ADMIN, CAP_SYS_ADMIN].into_iter().collect();
        // CAP_SYS_ADMIN stands for CAP_BPF and CAP_PERFMON; nothing stands for CAP_NET_RAW.
        assert_eq!(missing(&FOR_START, &has), ["CAP_NET_RAW (open the AF_XDP and packet sockets)"]);
        let all: caps::CapsHashSet = FOR_START.iter().map(|(c, _, _)| *c).collect();
        assert!(missing(&FOR_START, &all).is_empty());
        assert_eq!(missing(&FOR_START, &caps::CapsHashSet::new()).len(), 4);
        assert_eq!(group_id("4321").unwrap(), 4321);
        assert!(matches!(group_id("xfwd-no-such-group"), Err(PrivError::NoSuchGroup(_))));
    }

    #[test]
    fn a_database_entry_too_big_for_the_buffer_is_read_with_a_bigger_one() {
        // A group with thousands of members does not fit 16 KiB: ERANGE, then a bigger buffer.
        let mut lens = Vec::new();
        let found = lookup_with("test", |buf| {
            lens.push(buf.len());
            if buf.len() < 200 * 1024 {
                (libc::ERANGE, false)
            } else {
                (0, true)
            }
        });
        assert!(matches!(found, Ok(true)));
        assert_eq!(lens, [16 * 1024, 64 * 1024, 256 * 1024]);
        // Beyond 16 MiB, or another error: said, not taken for "no such entry".
        let e = lookup_with("reading the group database", |_| (libc::ERANGE, false)).unwrap_err();
        assert!(e.to_string().starts_with("reading the group database: "), "{e}");
        let e = lookup_with("reading the group database", |_| (libc::EIO, false)).unwrap_err();
        assert!(e.to_string().contains("Input/output error"), "{e}");
        assert!(matches!(lookup_with("x", |_| (0, false)), Ok(false)));
    }

    #[test]
    fn a_threaded_process_is_refused() {
        // A second thread exists while the drop runs: it must refuse rather than leave that
        // thread privileged (and, run as root, this test process keeps its capabilities).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        let e = drop_all(None, &[]).unwrap_err();
        drop(tx);
        other.join().unwrap();
        assert!(matches!(e, PrivError::Threads(n) if n > 1), "{e}");
    }

    #[test]
    fn map_reads_need_a_capability_only_on_old_kernels_with_the_sysctl() {
        use caps::Capability::{CAP_BPF, CAP_SYS_ADMIN};
        assert_eq!(keep_for_map_reads((6, 18), true), None);
        assert_eq!(keep_for_map_reads((6, 5), true), None);
        assert_eq!(keep_for_map_reads((6, 4), true), Some(CAP_BPF));
        assert_eq!(keep_for_map_reads((5, 10), true), Some(CAP_BPF));
        assert_eq!(keep_for_map_reads((5, 4), true), Some(CAP_SYS_ADMIN));
        assert_eq!(keep_for_map_reads((5, 4), false), None);
    }
}
