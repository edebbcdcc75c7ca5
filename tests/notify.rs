//! xfwd under a service manager: the readiness protocol (sd_notify) against a fake
//! `NOTIFY_SOCKET`, as a `Type=notify` unit hears it: `READY=1` once forwarding, `RELOADING=1`
//! and `READY=1` around a SIGHUP (the second only once the reload is applied), `STOPPING=1` on
//! the way out; and a SIGHUP while the router still reads its file does not kill it. Needs root
//! (a rig).

mod common;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::process::Command;

use common::{control_path, in_netns, root_or_skip, serial, show, EVENTUALLY, XFWD};
use xfwd::rig::{Rig, XfwdProcess};

const RIG_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-router.toml");
const NEW_ROUTE: &str = "\n[[route]]\nprefix = \"198.19.1.0/24\"\nvia = \"198.18.10.1\"\n";

/// The service manager's end: the next state xfwd sent, waited for up to [`EVENTUALLY`]; a
/// failure with xfwd's exit status and output if it exits first.
fn next(manager: &UnixDatagram, x: &mut XfwdProcess) -> String {
    manager.set_read_timeout(Some(std::time::Duration::from_millis(100))).unwrap();
    let start = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match manager.recv(&mut buf) {
            Ok(n) => return String::from_utf8(buf[..n].to_vec()).unwrap(),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                let exited = x.proc.child.try_wait().unwrap();
                if exited.is_some() || start.elapsed() > EVENTUALLY {
                    x.collect();
                    panic!("no state from xfwd (exit: {exited:?}); it printed: {:#?}", x.seen);
                }
            }
            Err(e) => panic!("the manager's socket: {e}"),
        }
    }
}

/// The named pipe `path` opened for writing once xfwd has opened it for reading (until then a
/// non-blocking open fails with ENXIO); a failure if xfwd exits first or takes longer than
/// [`EVENTUALLY`].
fn open_when_read(path: &Path, x: &mut XfwdProcess) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let start = std::time::Instant::now();
    loop {
        match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path) {
            Ok(f) => {
                // Writes may block again: the pipe holds less than a file may be.
                let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
                // SAFETY: fcntl on a descriptor this File owns, clearing O_NONBLOCK.
                unsafe { libc::fcntl(fd, libc::F_SETFL, 0) };
                return f;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                let exited = x.proc.child.try_wait().unwrap();
                if exited.is_some() || start.elapsed() > EVENTUALLY {
                    x.collect();
                    panic!("xfwd never opened {} (exit: {exited:?}): {:#?}", path.display(), x.seen);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

fn field<'a>(msg: &'a str, name: &str) -> Option<&'a str> {
    msg.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

fn router_args<'a>(config: &'a Path, control: &'a str) -> Vec<&'a str> {
    vec!["router", "--config", config.to_str().unwrap(), "--control", control]
}

#[test]
fn a_service_manager_hears_ready_then_reloading_and_ready_around_a_sighup_then_stopping() {
    if !root_or_skip("a_service_manager_hears_ready_then_reloading_and_ready_around_a_sighup_then_stopping") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    let dir = common::TempDir::new("notify-states");
    let config = dir.join("router.toml");
    let base = std::fs::read_to_string(RIG_CONFIG).unwrap();
    std::fs::write(&config, &base).unwrap();
    let sock = dir.join("notify");
    let manager = UnixDatagram::bind(&sock).unwrap();
    let control = control_path("notify-states");
    let mut x =
        r.spawn_xfwd(XFWD, &router_args(&config, &control), &[("NOTIFY_SOCKET", sock.to_str().unwrap())]).unwrap();

    let ready = next(&manager, &mut x);
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready}");
    assert_eq!(field(&ready, "STATUS"), Some(format!("forwarding: router {}", config.display()).as_str()));
    x.wait_ready().unwrap();

    // A route added to the file: RELOADING=1, then READY=1 only once the route is in the table.
    std::fs::write(&config, base.clone() + NEW_ROUTE).unwrap();
    assert!(!show(&control, "routes").contains("198.19.1.0/24"), "the premise: no route yet");
    let asked = monotonic_usec();
    x.proc.signal(libc::SIGHUP);
    let reloading = next(&manager, &mut x);
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading}");
    let at: u64 = field(&reloading, "MONOTONIC_USEC").expect("MONOTONIC_USEC").parse().unwrap();
    assert!(at >= asked && at <= monotonic_usec(), "{at} is not when the reload began ({asked}..)");
    let done = next(&manager, &mut x);
    assert_eq!(field(&done, "READY"), Some("1"), "{done}");
    assert!(field(&done, "STATUS").unwrap().ends_with("; reloaded"), "{done}");
    assert!(show(&control, "routes").contains("198.19.1.0/24"), "READY=1 came before the reload was applied");

    // A broken file: the same two states, and a status that says the reload was refused.
    std::fs::write(&config, base.clone() + "[[route]]\nprefix = \"198.19.2.0/24\"\n").unwrap();
    x.proc.signal(libc::SIGHUP);
    assert_eq!(field(&next(&manager, &mut x), "RELOADING"), Some("1"));
    let refused = next(&manager, &mut x);
    assert_eq!(field(&refused, "READY"), Some("1"), "{refused}");
    assert!(field(&refused, "STATUS").unwrap().contains("refused"), "{refused}");
    assert!(show(&control, "routes").contains("198.19.1.0/24"), "the running table kept");

    // `xfwd reload` (the unit's ExecReload): returns once the file is applied, or refused.
    std::fs::write(
        &config,
        base.clone() + NEW_ROUTE + "[[route]]\nprefix = \"198.19.3.0/24\"\nvia = \"198.18.10.1\"\n",
    )
    .unwrap();
    let reload = || Command::new(XFWD).args(["reload", "--control", &control]).output().unwrap();
    let out = reload();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("reloaded "), "{out:?}");
    assert!(show(&control, "routes").contains("198.19.3.0/24"), "xfwd reload returned before the route was in");
    std::fs::write(&config, base.clone() + "[[route]]\nprefix = \"198.19.4.0/24\"\n").unwrap();
    let out = reload();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("xfwd: error: reload refused: ") && err.contains("router.toml:"), "{err}");
    // Each came with its states, as a SIGHUP's.
    for _ in 0..2 {
        assert_eq!(field(&next(&manager, &mut x), "RELOADING"), Some("1"));
        assert_eq!(field(&next(&manager, &mut x), "READY"), Some("1"));
    }

    x.proc.signal(libc::SIGTERM);
    let stopping = next(&manager, &mut x);
    assert_eq!(field(&stopping, "STOPPING"), Some("1"), "{stopping}");
    let st = x.proc.wait_timeout(EVENTUALLY).unwrap();
    assert!(st.success(), "{st:?}");
}

/// The window a reload used to die in (SIGHUP's default action, exit 129): the router holds its
/// file open for reading. The file is a named pipe, so xfwd waits inside the read until the test
/// writes, and the SIGHUP lands there whatever the machine's speed.
#[test]
fn a_sighup_while_the_router_reads_its_file_is_a_reload_once_ready() {
    if !root_or_skip("a_sighup_while_the_router_reads_its_file_is_a_reload_once_ready") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    let dir = common::TempDir::new("notify-fifo");
    let config = dir.join("router.toml");
    let c = std::ffi::CString::new(config.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
    let sock = dir.join("notify");
    let manager = UnixDatagram::bind(&sock).unwrap();
    let control = control_path("notify-fifo");
    let mut x =
        r.spawn_xfwd(XFWD, &router_args(&config, &control), &[("NOTIFY_SOCKET", sock.to_str().unwrap())]).unwrap();
    let text = std::fs::read_to_string(RIG_CONFIG).unwrap();
    // Opening a pipe for writing succeeds once its reader has opened it: xfwd is reading now.
    let mut pipe = open_when_read(&config, &mut x);
    x.proc.signal(libc::SIGHUP);
    std::io::Write::write_all(&mut pipe, text.as_bytes()).unwrap();
    drop(pipe);

    let ready = next(&manager, &mut x);
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready}");
    x.wait_ready().unwrap();
    // The SIGHUP was kept: the file is read again once forwarding.
    assert_eq!(field(&next(&manager, &mut x), "RELOADING"), Some("1"));
    let mut pipe = open_when_read(&config, &mut x);
    std::io::Write::write_all(&mut pipe, (text + NEW_ROUTE).as_bytes()).unwrap();
    drop(pipe);
    let done = next(&manager, &mut x);
    assert!(field(&done, "STATUS").unwrap().ends_with("; reloaded"), "{done}");
    assert!(show(&control, "routes").contains("198.19.1.0/24"));
    common::stop_clean(&mut x);
}

/// The bridge has no file: a SIGHUP is answered (RELOADING=1, READY=1) and changes nothing; the
/// manager listens on an abstract socket, which lives in the box's network namespace.
#[test]
fn a_bridge_answers_a_sighup_and_an_abstract_notify_socket() {
    if !root_or_skip("a_bridge_answers_a_sighup_and_an_abstract_notify_socket") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let name = format!("xfwd-notify-bridge-{}", std::process::id());
    let bind_name = name.clone();
    let manager = in_netns(r.boxns.name(), move || {
        UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(bind_name.as_bytes()).unwrap()).unwrap()
    })
    .join()
    .unwrap();
    let control = control_path("notify-bridge");
    let notify = format!("@{name}");
    let mut x = r
        .spawn_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control], &[("NOTIFY_SOCKET", notify.as_str())])
        .unwrap();
    let ready = next(&manager, &mut x);
    assert_eq!(field(&ready, "STATUS"), Some("forwarding: bridge eth4 eth5"), "{ready}");
    x.wait_ready().unwrap();
    x.proc.signal(libc::SIGHUP);
    assert_eq!(field(&next(&manager, &mut x), "RELOADING"), Some("1"));
    let done = next(&manager, &mut x);
    assert_eq!(field(&done, "STATUS"), Some("forwarding: bridge eth4 eth5; nothing to reload"), "{done}");
    common::wait_line(&mut x, "xfwd: SIGHUP: a bridge reads nothing again", 0);
    x.proc.signal(libc::SIGTERM);
    assert_eq!(field(&next(&manager, &mut x), "STOPPING"), Some("1"));
    assert!(x.proc.wait_timeout(EVENTUALLY).unwrap().success());
}

fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// The thread of `pid` named `name`.
fn tid_of(pid: u32, name: &str) -> i32 {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        if std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim() == name {
            return task.file_name().to_string_lossy().parse().unwrap();
        }
    }
    panic!("no thread {name} in {pid}");
}

/// The states xfwd sends within `within`, read as they come.
fn states_within(manager: &UnixDatagram, within: std::time::Duration) -> Vec<String> {
    let until = std::time::Instant::now() + within;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()).filter(|l| !l.is_zero()) {
        manager.set_read_timeout(Some(left)).unwrap();
        if let Ok(n) = manager.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    out
}

#[test]
fn the_watchdog_is_fed_while_every_thread_goes_round_and_not_while_one_is_stuck() {
    if !root_or_skip("the_watchdog_is_fed_while_every_thread_goes_round_and_not_while_one_is_stuck") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    let dir = common::TempDir::new("notify-watchdog");
    let sock = dir.join("notify");
    let manager = UnixDatagram::bind(&sock).unwrap();
    let control = control_path("notify-wd");
    // WatchdogSec=4s: fed every second, stuck after 2 s without a turn.
    let env = [("NOTIFY_SOCKET", sock.to_str().unwrap()), ("WATCHDOG_USEC", "4000000")];
    let mut x = r.spawn_xfwd(XFWD, &router_args(Path::new(RIG_CONFIG), &control), &env).unwrap();
    assert_eq!(field(&next(&manager, &mut x), "READY"), Some("1"));
    x.wait_ready().unwrap();
    let fed = |states: &[String]| states.iter().filter(|m| field(m, "WATCHDOG") == Some("1")).count();
    let states = states_within(&manager, std::time::Duration::from_millis(2500));
    assert!(fed(&states) >= 2, "fed every second: {states:?}");
    assert!(show(&control, "stats").contains("threads, since each last went round its loop: xfwd-q0 "));

    // The ARP thread stopped where it is (ptrace stops that thread alone).
    let tid = tid_of(x.proc.child.id(), "xfwd-arp");
    // SAFETY: ptrace requests on a thread id, with no memory passed.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) }, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: as above.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) }, 0);
    let mut status = 0;
    // SAFETY: waits for the tracee's stop; `status` is a valid int.
    assert_eq!(unsafe { libc::waitpid(tid, &mut status, libc::__WALL) }, tid);
    let states = states_within(&manager, std::time::Duration::from_secs(5));
    let said = states.iter().position(|m| field(m, "STATUS").is_some_and(|s| s.starts_with("stuck: xfwd-arp")));
    let said = said.unwrap_or_else(|| panic!("no stuck status: {states:?}"));
    assert_eq!(fed(&states[said..]), 0, "fed while the ARP thread was stuck: {states:?}");
    let line = common::wait_line(&mut x, "xfwd: error: stuck: xfwd-arp", 0);
    assert!(line.contains("the watchdog is no longer fed"), "{line}");
    let stats = show(&control, "stats");
    assert!(stats.contains("xfwd-arp ") && !stats.contains("xfwd-arp -"), "{stats}");

    // Going again: fed again, and said.
    // SAFETY: ptrace request on our tracee, no memory passed.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0) }, 0);
    let states = states_within(&manager, std::time::Duration::from_millis(2500));
    assert!(fed(&states) >= 1, "fed again: {states:?}");
    assert!(states.iter().any(|m| field(m, "STATUS").is_some_and(|s| s.starts_with("forwarding"))), "{states:?}");
    common::stop_clean(&mut x);
}
