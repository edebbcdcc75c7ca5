//! Helpers for the root-only integration tests: a lock so rigs do not compete for two cores,
//! a root check that refuses to pass silently in CI, and raw frames in and out of a namespace.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Path of the binary under test.
pub const XFWD: &str = env!("CARGO_BIN_EXE_xfwd");

/// How long a test waits for a path to answer ping (`Rig::ping_until`): a bound on the path
/// coming up, never a speed. A path that works returns at its first answer; a loaded machine
/// can take seconds more than a quiet one (measured: 5 s passed without an answer to the first
/// ping through a router just started, load average 92).
pub const PATH_UP: Duration = Duration::from_secs(30);

/// How long a test waits for what must happen after it acts (a table change applied, counters
/// settled, a process gone): a bound, never a speed. The wait ends as soon as it happens.
pub const EVENTUALLY: Duration = Duration::from_secs(30);

/// Takes the rig lock (rig tests share two cores; run them one at a time).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Says, visibly, that `test` did not run because this machine lacks its premise: a `SKIP:`
/// line on stderr, and the same line added to the file `$XFWD_SKIP_LOG` names, which
/// scripts/test prints in its summary (cargo shows a passing test's stderr only with
/// --nocapture).
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIP: {test}: {reason}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("XFWD_SKIP_LOG") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
        writeln!(f, "{line}").unwrap();
    }
}

/// True when the kernel runs `BPF_PROG_TEST_RUN` with live frames for this process
/// ([`xfwd_dataplane::io::probe::frame_gen::live_frames`]). Where it refuses them (some machines of
/// this kind do, to root too) the test is skipped with the kernel's answer; any other error
/// fails it.
pub fn live_frames_or_skip(test: &str) -> bool {
    use xfwd_dataplane::io::probe::frame_gen::{live_frames, GenError};
    match live_frames() {
        Ok(()) => true,
        Err(e @ GenError::LiveFramesRefused(_)) => {
            skip(test, &e.to_string());
            false
        }
        Err(e) => panic!("{test}: asking whether the kernel runs live frames: {e}"),
    }
}

/// Installs, on the calling thread (and what it forks), a seccomp filter under which every
/// `bpf(BPF_PROG_TEST_RUN, …)` fails with `EPERM` and every other system call runs: how a
/// kernel that refuses live frames answers, for the tests of that answer on a machine whose
/// kernel runs them. Async-signal-safe (no allocation), so that it can run between fork and
/// exec.
pub fn refuse_bpf_test_runs() -> std::io::Result<()> {
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    /// `BPF_PROG_TEST_RUN` (include/uapi/linux/bpf.h).
    const PROG_TEST_RUN: u32 = 10;
    const LD_ABS_W: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    // struct seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low word first: the
    // architectures above are little-endian).
    let filter = [
        op(LD_ABS_W, 0, 0, 4),
        op(JEQ_K, 0, 5, AUDIT_ARCH),
        op(LD_ABS_W, 0, 0, 0),
        op(JEQ_K, 0, 3, libc::SYS_bpf as u32),
        op(LD_ABS_W, 0, 0, 16),
        op(JEQ_K, 0, 1, PROG_TEST_RUN),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr().cast_mut() };
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes plain integers; seccomp(2) reads `prog`, which
    // points at `filter`, both alive for the call. The filter only ever makes calls fail.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// True when the test may build namespaces. Without root it says why and returns false, unless
/// `XFWD_REQUIRE_ROOT_TESTS=1` (set by CI), where it fails instead: a skip must not pass there.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var("XFWD_REQUIRE_ROOT_TESTS").as_deref() != Ok("1"),
        "{test}: needs root (network namespaces, XDP), and XFWD_REQUIRE_ROOT_TESTS=1 forbids skipping"
    );
    skip(test, "needs root for network namespaces and XDP");
    false
}

/// True when the machine has at least `n` CPUs. Otherwise says why and returns false, unless
/// `XFWD_REQUIRE_ROOT_TESTS=1`, where a skip must not pass and this fails instead.
pub fn cpus_or_skip(test: &str, n: usize) -> bool {
    let have = std::thread::available_parallelism().map_or(1, |c| c.get());
    if have >= n {
        return true;
    }
    assert!(
        std::env::var("XFWD_REQUIRE_ROOT_TESTS").as_deref() != Ok("1"),
        "{test}: needs {n} CPUs, this machine has {have}, and XFWD_REQUIRE_ROOT_TESTS=1 forbids skipping"
    );
    skip(test, &format!("needs {n} CPUs, this machine has {have}"));
    false
}

/// Runs `f` on a fresh thread that has entered network namespace `ns` (setns only affects the
/// calling thread, so the test's own thread stays where it was).
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: `file` is an open namespace file; setns changes only this thread's namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

fn ifindex(name: &str) -> i32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert!(i > 0, "no interface {name}");
    i as i32
}

fn packet_socket(ifname: &str) -> (i32, libc::sockaddr_ll) {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
    assert!(fd >= 0, "AF_PACKET socket: {}", std::io::Error::last_os_error());
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = proto;
    addr.sll_ifindex = ifindex(ifname);
    // SAFETY: `addr` is a valid sockaddr_ll and its size is passed.
    let r = unsafe {
        libc::bind(fd, (&addr as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32)
    };
    assert_eq!(r, 0, "bind AF_PACKET: {}", std::io::Error::last_os_error());
    (fd, addr)
}

/// Sends `frame` out of `ifname` of the calling thread's namespace every `interval` until
/// `stop` is set; returns how many it sent.
pub fn send_every(ifname: &str, frame: &[u8], interval: Duration, stop: &std::sync::atomic::AtomicBool) -> u64 {
    let (fd, _) = packet_socket(ifname);
    let mut sent = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: `frame` is a valid buffer of the given length; fd is our bound socket.
        let n = unsafe { libc::send(fd, frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(n, frame.len() as isize, "send: {}", std::io::Error::last_os_error());
        sent += 1;
        std::thread::sleep(interval);
    }
    // SAFETY: closing our own fd.
    unsafe { libc::close(fd) };
    sent
}

/// Sends each frame once out of `ifname` in namespace `ns`.
pub fn send_raw(ns: &str, ifname: &str, frames: Vec<Vec<u8>>) {
    let ifname = ifname.to_owned();
    in_netns(ns, move || {
        let (fd, _) = packet_socket(&ifname);
        for f in &frames {
            // SAFETY: `f` is a valid buffer of the given length; fd is our bound socket.
            let n = unsafe { libc::send(fd, f.as_ptr().cast(), f.len(), 0) };
            assert_eq!(n, f.len() as isize, "send: {}", std::io::Error::last_os_error());
        }
        // SAFETY: closing our own fd.
        unsafe { libc::close(fd) };
    })
    .join()
    .unwrap();
}

/// Starts capturing every frame arriving on `ifname` in `ns` for `dur`; join for the frames.
pub fn capture(ns: &str, ifname: &str, dur: Duration) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    let ifname = ifname.to_owned();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = in_netns(ns, move || {
        let (fd, _) = packet_socket(&ifname);
        let tv = libc::timeval { tv_sec: 0, tv_usec: 100_000 };
        // SAFETY: setting a receive timeout with a valid timeval.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        let _ = ready_tx.send(());
        let mut out = Vec::new();
        let start = Instant::now();
        let mut buf = vec![0u8; 4096];
        while start.elapsed() < dur {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n > 0 {
                out.push(buf[..n as usize].to_vec());
            }
        }
        // SAFETY: closing our own fd.
        unsafe { libc::close(fd) };
        out
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).expect("capture did not start");
    h
}

/// A 60-byte frame to `dst` from `src` with `ethertype` and a marker byte in its payload.
pub fn raw_frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, marker: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.resize(60, marker);
    f
}

/// The fewest Ethernet frames that carry `bytes` of TCP payload at a 1500-byte MTU (1460 bytes
/// a segment, no options): a lower bound on a flow's data segments, whatever its rate.
pub fn min_segments(bytes: u64) -> u64 {
    bytes.div_ceil(1460)
}

/// The MAC address of `ifname` inside `ns`.
pub fn mac_of(ns: &xfwd::rig::Netns, ifname: &str) -> String {
    let out = ns.exec(&["cat", &format!("/sys/class/net/{ifname}/address")]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The MAC address of `ifname` inside `ns`, as bytes.
pub fn mac_bytes(ns: &xfwd::rig::Netns, ifname: &str) -> [u8; 6] {
    let m: xfwd_dataplane::wire::MacAddr = mac_of(ns, ifname).parse().unwrap();
    m.0
}

/// A control socket path unique to this test process.
pub fn control_path(tag: &str) -> String {
    format!("/run/xfwd/test-{}-{tag}.sock", std::process::id())
}

/// `xfwd show stats --json` from the xfwd on `control`.
pub fn stats(control: &str) -> xfwd_dataplane::io::Report {
    let out =
        std::process::Command::new(XFWD).args(["show", "stats", "--json", "--control", control]).output().unwrap();
    assert!(out.status.success(), "show stats: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stats JSON")
}

/// `xfwd show WHAT` (text) from the xfwd on `control`.
pub fn show(control: &str, what: &str) -> String {
    let out = std::process::Command::new(XFWD).args(["show", what, "--control", control]).output().unwrap();
    assert!(out.status.success(), "show {what}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `xfwd show WHAT --json` from the xfwd on `control`.
pub fn show_json(control: &str, what: &str) -> String {
    let out = std::process::Command::new(XFWD).args(["show", what, "--json", "--control", control]).output().unwrap();
    assert!(out.status.success(), "show {what} --json: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The drops of `s` other than queue management's (`aqm-drop`, `fq-overflow`): CoDel may drop
/// a frame that waited beyond its target on a machine loaded by other work, which says nothing
/// about the path's decisions; every other reason must stay at zero where a test says so.
pub fn drops_but_aqm(s: &xfwd_dataplane::stats::PortSnapshot) -> Vec<(String, u64)> {
    s.drops.iter().filter(|(r, n)| *n > 0 && r != "aqm-drop" && r != "fq-overflow").cloned().collect()
}

/// The frames of `s` that queue management shed (`aqm-drop`, `fq-overflow`): frames that
/// waited too long, or found their queue full, because the worker was slower than its load.
pub fn shed(s: &xfwd_dataplane::stats::PortSnapshot) -> u64 {
    s.drops.iter().filter(|(r, _)| r == "aqm-drop" || r == "fq-overflow").map(|(_, n)| n).sum()
}

/// One of the XDP program's counters for `port`.
pub fn xdp(r: &xfwd_dataplane::io::Report, port: usize, name: &str) -> u64 {
    port_xdp(&r.ports[port], name)
}

/// The XDP program's count `name` in one port's report (it must be there).
pub fn port_xdp(p: &xfwd_dataplane::io::PortReport, name: &str) -> u64 {
    p.xdp.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap_or_else(|| panic!("{}: no xdp {name}", p.name))
}

/// Once `from` reaches `to` (the first frames go through the workers, which learn or
/// resolve), waits until the XDP path's thread has written at least two neighbours or
/// stations: the program then has both ends.
pub fn until_both_ends_in_the_program(control: &str, from: &xfwd::rig::Netns, to: &str) {
    xfwd::rig::Rig::ping_until(from, to, PATH_UP).unwrap();
    until(PATH_UP, "both ends in the XDP program's tables", || {
        stats(control).xdp_path.is_some_and(|p| p.neighbor_writes >= 2)
    });
}

/// A device's driver counters (`ethtool -S`) at one instant, by name in the driver's order.
#[derive(Debug, Clone, Default)]
pub struct DevCounters(pub Vec<(String, u64)>);

impl DevCounters {
    /// The counters of `ifname` in `ns`.
    pub fn read(ns: &xfwd::rig::Netns, ifname: &str) -> DevCounters {
        DevCounters(ns.ethtool_stats(ifname).unwrap_or_else(|e| panic!("ethtool -S {ifname}: {e:#}")))
    }

    /// What each counter grew by since `before` (a counter `before` lacks counts from 0).
    pub fn since(&self, before: &DevCounters) -> DevCounters {
        let old = |name: &str| before.0.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
        DevCounters(self.0.iter().map(|(n, v)| (n.clone(), v.wrapping_sub(old(n)))).collect())
    }

    /// A veth's `rx_queue_N_<stat>`, summed over its receive queues.
    pub fn rx_queues(&self, stat: &str) -> u64 {
        self.queues("rx_queue_", stat)
    }

    /// A veth's `tx_queue_N_<stat>` (`xdp_xmit`: frames an XDP program redirected out of it),
    /// summed over its transmit queues.
    pub fn tx_queues(&self, stat: &str) -> u64 {
        self.queues("tx_queue_", stat)
    }

    fn queues(&self, prefix: &str, stat: &str) -> u64 {
        let suffix = format!("_{stat}");
        self.0
            .iter()
            .filter(|(n, _)| {
                n.strip_prefix(prefix)
                    .and_then(|rest| rest.strip_suffix(&suffix))
                    .is_some_and(|q| q.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(|(_, v)| v)
            .sum()
    }
}

impl std::fmt::Display for DevCounters {
    /// The counters that are not 0, `name value`, comma-separated (`none moved` when all are).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let moved: Vec<String> = self.0.iter().filter(|(_, v)| *v != 0).map(|(n, v)| format!("{n} {v}")).collect();
        if moved.is_empty() {
            return f.write_str("none moved");
        }
        f.write_str(&moved.join(", "))
    }
}

/// The growth of an AF_XDP socket's statistics (`XDP_STATISTICS`, as xfwd last copied them)
/// from `before` to `after`.
pub fn xsk_since(
    after: &xfwd_dataplane::stats::XskSnapshot,
    before: &xfwd_dataplane::stats::XskSnapshot,
) -> xfwd_dataplane::stats::XskSnapshot {
    xfwd_dataplane::stats::XskSnapshot {
        rx_dropped: after.rx_dropped - before.rx_dropped,
        rx_ring_full: after.rx_ring_full - before.rx_ring_full,
        fill_ring_empty: after.fill_ring_empty - before.fill_ring_empty,
        tx_ring_empty: after.tx_ring_empty - before.tx_ring_empty,
        rx_invalid: after.rx_invalid - before.rx_invalid,
        tx_invalid: after.tx_invalid - before.tx_invalid,
    }
}

/// Whether any XDP program is attached in the box.
pub fn xdp_attached(r: &xfwd::rig::Rig) -> bool {
    let out = r.boxns.ip(&["link", "show"]).unwrap();
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}

/// Waits (up to 10 s, a loaded machine's margin) until xfwd has printed a line starting with
/// `prefix`, after `skip` such lines already seen; returns it.
pub fn wait_line(x: &mut xfwd::rig::XfwdProcess, prefix: &str, skip: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        x.collect();
        if let Some(l) = x.seen.iter().filter(|l| l.starts_with(prefix)).nth(skip) {
            return l.clone();
        }
        assert!(Instant::now() < deadline, "no `{prefix}` line from xfwd: {:#?}", x.seen);
    }
}

/// Waits until `f` holds, up to `limit`; the time it took.
pub fn until(limit: Duration, what: &str, f: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// How many answers ping's summary counts (`200 packets transmitted, 199 received, …`).
pub fn answered(ping: &str) -> u64 {
    let line = ping.lines().find(|l| l.contains(" received")).unwrap_or_else(|| panic!("ping said: {ping}"));
    line.split(", ").find_map(|p| p.strip_suffix(" received")?.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

/// Received, and sent + dropped with a reason, over every port of `s`.
pub fn balance(s: &xfwd_dataplane::io::Report) -> (u64, u64) {
    let sum = |f: fn(&xfwd_dataplane::stats::PortSnapshot) -> u64| s.ports.iter().map(|p| f(&p.total)).sum::<u64>();
    (sum(|t| t.rx_frames), sum(|t| t.tx_frames) + sum(|t| t.dropped()))
}

/// Waits (up to [`EVENTUALLY`]) until xfwd on `control` has settled what reached it before
/// the call, and returns the report that says so; fails if it never does. Settled means:
/// - every worker copied its sockets' statistics and counted its rings since the call (its
///   `xsk_reads` moved twice: the first copy may have begun before). Those copies are taken
///   every 250 ms, and the kernel counts on in between: a report read at once can miss the
///   socket's last refusals (seen: 26,368 frames the kernel had counted, after a flood on a
///   loaded machine) and show frames in the rings that have long left them;
/// - its RX rings were empty in that census: every frame the kernel put there was taken off,
///   and counted as received (a frame waiting there is in no counter of the ports);
/// - every frame it received was sent or dropped with a reason (frames in flight when traffic
///   stops settle within a round or two).
pub fn settled(control: &str) -> xfwd_dataplane::io::Report {
    let deadline = Instant::now() + EVENTUALLY;
    let first = stats(control);
    loop {
        let s = stats(control);
        let copies: Vec<u64> = s.queues.iter().zip(&first.queues).map(|(q, q0)| q.xsk_reads - q0.xsk_reads).collect();
        let waiting: u64 = s.pools.iter().map(|p| p.frames.rx_ring).sum();
        let (rx, out) = balance(&s);
        if copies.iter().all(|&c| c >= 2) && waiting == 0 && rx == out {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "not settled within {EVENTUALLY:?}: socket statistics copied {copies:?} times since the wait began (per worker), \
             {waiting} frames in the RX rings, received {rx}, sent + dropped {out}: {:#?}\n{:#?}",
            s.ports,
            s.pools
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops xfwd with SIGTERM and checks the exit: status 0, every queue's frames accounted for.
pub fn stop_clean(x: &mut xfwd::rig::XfwdProcess) {
    let st = x.stop(libc::SIGTERM, Duration::from_secs(10)).unwrap();
    assert!(st.success(), "exit status {st:?}; output: {:#?}", x.seen);
    let frames: Vec<&String> = x.seen.iter().filter(|l| l.contains(": frames total")).collect();
    assert!(!frames.is_empty(), "no frame accounting in the exit summary: {:#?}", x.seen);
    for l in frames {
        assert!(l.ends_with("unaccounted 0"), "frames lost: {l}");
        assert_eq!(l.matches(" kernel 0)").count(), 2, "frames still held by the kernel after the exit: {l}");
    }
}

/// A paced flow for the XDP path's table tests: `count` echo requests from `from` to `to`, 500
/// a second, far below any machine's rate, so that none is lost but to the forwarding itself.
pub struct PacedPing {
    pinger: xfwd::rig::Spawned,
    count: u64,
}

impl PacedPing {
    /// Starts it.
    pub fn start(from: &xfwd::rig::Netns, to: &str, count: u64) -> PacedPing {
        let mut ping = from.command("ping");
        ping.args(["-q", "-c", &count.to_string(), "-i", "0.002", "-W", "5", to])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        PacedPing { pinger: xfwd::rig::Spawned { child: ping.spawn().unwrap() }, count }
    }

    /// Whether it still sends.
    pub fn running(&mut self) -> bool {
        self.pinger.child.try_wait().unwrap().is_none()
    }

    /// Waits until every request is answered or given up on (`-W 5`), and asserts that every
    /// one was answered and no ICMP error came back.
    pub fn all_answered(mut self) {
        self.pinger.wait_timeout(Duration::from_secs(60)).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(self.pinger.child.stdout.as_mut().unwrap(), &mut out).unwrap();
        assert_eq!(answered(&out), self.count, "every request answered: {out}");
        assert!(!out.contains("errors"), "no ICMP error came back: {out}");
    }
}

/// What the XDP path's table tests assert of the reports before and after their flow: no
/// failed map write, no drop in the workers but queue management's, none in the program nor
/// refused by an egress, and the flow forwarded in the program at port `ingress` (the frames
/// it forwarded there are returned).
pub fn xdp_path_lost_nothing(
    before: &xfwd_dataplane::io::Report,
    after: &xfwd_dataplane::io::Report,
    ingress: usize,
) -> u64 {
    let path = after.xdp_path.as_ref().expect("the XDP path's counts");
    assert_eq!((path.errors, &path.last_error), (0, &None), "{path:?}");
    let in_program =
        port_xdp(&after.ports[ingress], "xdp-forwarded") - port_xdp(&before.ports[ingress], "xdp-forwarded");
    assert!(in_program > 0, "the flow went through the program: {:?}", after.ports[ingress].xdp);
    for (p, b) in after.ports.iter().zip(&before.ports) {
        assert_eq!(drops_but_aqm(&p.total), drops_but_aqm(&b.total), "{}: {:?}", p.name, p.total.drops);
        for counter in ["drop-no-egress", "drop-too-long", xfwd_dataplane::io::view::EGRESS_REFUSED] {
            assert_eq!(port_xdp(p, counter), port_xdp(b, counter), "{}: {counter}", p.name);
        }
    }
    in_program
}

/// A folder of the test's own (`$TMPDIR/xfwd-TAG-PID`, emptied first), removed on drop, also
/// when the test fails.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("xfwd-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
