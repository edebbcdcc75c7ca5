//! Privileges: once the program is attached and the sockets are bound, xfwd drops every
//! capability (and with `--user` its uid) before any thread starts, and keeps forwarding,
//! answering `xfwd show` and reloading on SIGHUP. Needs root; each test builds its own rig.

mod common;

use common::{control_path, root_or_skip, serial, show, stats, stop_clean, xdp, XFWD};
use xfwd::rig::{self, Rig};

const RIG_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-router.toml");

/// The `Name:\tvalue` lines of every thread's /proc status.
fn thread_status(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        out.push(std::fs::read_to_string(task.path().join("status")).unwrap());
    }
    out
}

fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':'))).unwrap().trim()
}

/// Every thread of `pid`: no capability in any set (but the one this kernel needs for map
/// reads, if any), no_new_privs, and the given uid.
fn assert_unprivileged(pid: u32, uid: u32) {
    let threads = thread_status(pid);
    assert!(threads.len() >= 3, "the workers, ARP or control threads run: {}", threads.len());
    let kept = xfwd::privs::keep_for_map_reads_here().map_or(0, |c| c.bitmask());
    for st in &threads {
        let name = field(st, "Name");
        for (set, want) in [("CapInh", 0), ("CapPrm", kept), ("CapEff", kept), ("CapBnd", kept), ("CapAmb", 0)] {
            assert_eq!(field(st, set), format!("{want:016x}"), "thread {name}: {set}");
        }
        assert_eq!(field(st, "NoNewPrivs"), "1", "thread {name}");
        let uids: Vec<&str> = field(st, "Uid").split_whitespace().collect();
        assert_eq!(uids, vec![uid.to_string().as_str(); 4], "thread {name}: real, effective, saved, fs uid");
    }
}

#[test]
fn the_bridge_runs_without_capabilities_after_start() {
    if !root_or_skip("the_bridge_runs_without_capabilities_after_start") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("priv-br");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    assert!(
        x.seen.iter().any(|l| l == "xfwd: privileges dropped: no capabilities left, running as uid 0"),
        "{:#?}",
        x.seen
    );
    assert_unprivileged(x.proc.child.id(), 0);
    Rig::ping_until(&r.h1, "198.18.0.2", common::PATH_UP).unwrap();
    // The counters map is still read through the fd held since start.
    let s = stats(&control);
    assert!(xdp(&s, 0, "redirected") > 0, "{:?}", s.ports[0].xdp);
    stop_clean(&mut x);
}

#[test]
fn the_router_switched_to_nobody_forwards_answers_and_reloads() {
    if !root_or_skip("the_router_switched_to_nobody_forwards_answers_and_reloads") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    // The file must stay readable by the user xfwd switches to, for SIGHUP.
    let dir = std::env::temp_dir().join(format!("xfwd-priv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("router.toml");
    std::fs::write(&config, std::fs::read_to_string(RIG_CONFIG).unwrap()).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let control = control_path("priv-rt");
    let mut x = r
        .start_xfwd(XFWD, &["router", "--config", config.to_str().unwrap(), "--control", &control, "--user", "nobody"])
        .unwrap();
    assert!(
        x.seen
            .iter()
            .any(|l| l == "xfwd: privileges dropped: no capabilities left, running as user nobody (uid 65534)"),
        "{:#?}",
        x.seen
    );
    assert_unprivileged(x.proc.child.id(), 65534);
    // ARP from the packet sockets, forwarding, ping of the router itself, TCP.
    Rig::ping_until(&r.h2, "198.18.10.1", common::PATH_UP).unwrap();
    Rig::ping_until(&r.h2, "198.18.30.1", common::PATH_UP).unwrap();
    let tcp = rig::iperf3_tcp(&r.h1, &r.h2, "198.18.10.1", 1, 1, 1).unwrap();
    assert!(tcp.gbps() > 0.0);
    assert!(show(&control, "neighbors").contains("198.18.10.1 dev eth5"));

    // SIGHUP: the file is read again as nobody and the new route applies.
    r.h1.ip(&["addr", "add", "198.19.1.1/32", "dev", "lo"]).unwrap();
    r.h2.ip(&["route", "add", "198.19.1.0/24", "via", "198.18.30.1"]).unwrap();
    let text = std::fs::read_to_string(RIG_CONFIG).unwrap()
        + "\n[[route]]\nprefix = \"198.19.1.0/24\"\nvia = \"198.18.10.1\"\n";
    std::fs::write(&config, text).unwrap();
    x.proc.signal(libc::SIGHUP);
    Rig::ping_until(&r.h2, "198.19.1.1", common::PATH_UP).unwrap();
    x.collect();
    assert!(x.seen.iter().any(|l| l.starts_with("xfwd: reloaded")), "{:#?}", x.seen);

    stop_clean(&mut x);
    // nobody could not remove its socket from root's directory; the next start replaces it.
    let mut again =
        r.start_xfwd(XFWD, &["router", "--config", config.to_str().unwrap(), "--control", &control]).unwrap();
    assert!(show(&control, "routes").contains("198.19.1.0/24"));
    stop_clean(&mut again);
    assert!(!std::path::Path::new(&control).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_the_kernel_resolving_only_the_arp_thread_keeps_cap_net_admin() {
    if !root_or_skip("with_the_kernel_resolving_only_the_arp_thread_keeps_cap_net_admin") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    for (a, dev) in [("198.18.10.2/24", "eth5"), ("198.18.30.1/24", "eth4")] {
        r.boxns.ip(&["addr", "add", a, "dev", dev]).unwrap();
    }
    r.boxns.write_file("/proc/sys/net/ipv4/ip_forward", "0").unwrap();
    let control = control_path("priv-kf");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-kernel.toml");
    let mut x = r.start_xfwd(XFWD, &["router", "--config", config, "--control", &control]).unwrap();
    assert!(
        x.seen
            .iter()
            .any(|l| l.starts_with("xfwd: privileges dropped: kept only CAP_NET_ADMIN (in the ARP thread alone")),
        "{:#?}",
        x.seen
    );
    // The ARP thread asks the kernel to resolve (RTM_NEWNEIGH takes CAP_NET_ADMIN in the
    // sending thread); no other thread holds it, the HTTP and control threads included
    // (before: every thread). The bounding set keeps it, which grants nothing under
    // no_new_privs with nothing permitted.
    let map_reads = xfwd::privs::keep_for_map_reads_here().map_or(0, |c| c.bitmask());
    let net_admin = caps::Capability::CAP_NET_ADMIN.bitmask();
    // Asked for from a resolution the kernel has not made: h2, unknown to the box until now.
    Rig::ping_until(&r.h1, "198.18.30.2", common::PATH_UP).unwrap();
    let threads = thread_status(x.proc.child.id());
    let names: Vec<&str> = threads.iter().map(|st| field(st, "Name")).collect();
    assert!(names.contains(&"xfwd-arp") && names.contains(&"xfwd-control") && names.len() >= 4, "{names:?}");
    for st in &threads {
        let name = field(st, "Name");
        let want = if name == "xfwd-arp" { net_admin | map_reads } else { map_reads };
        for set in ["CapPrm", "CapEff"] {
            assert_eq!(field(st, set), format!("{want:016x}"), "thread {name}: {set}");
        }
        assert_eq!((field(st, "CapInh"), field(st, "CapAmb")), ("0000000000000000", "0000000000000000"), "{name}");
        assert_eq!(field(st, "NoNewPrivs"), "1", "thread {name}");
    }
    let s = stats(&control);
    let arp = |n: &str| s.arp.iter().find(|(k, _)| k == n).map(|(_, v)| *v).unwrap();
    assert!(arp("requests-sent") >= 1 && arp("send-errors") == 0, "asked the kernel: {:?}", s.arp);
    stop_clean(&mut x);
}

#[test]
fn an_unknown_user_is_refused_in_one_line_with_exit_code_2() {
    if !root_or_skip("an_unknown_user_is_refused_in_one_line_with_exit_code_2") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let out = r
        .boxns
        .command(XFWD)
        .args(["bridge", "eth4", "eth5", "--control", &control_path("priv-bad"), "--user", "xfwd-no-such-user"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no user `xfwd-no-such-user`"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

/// The capabilities docs/robustness.md lists are enough to start: xfwd run with a bounding set of only
/// those forwards.
#[test]
fn the_documented_capabilities_are_enough() {
    if !root_or_skip("the_documented_capabilities_are_enough") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("priv-min");
    // Without CAP_SYS_NICE the workers run as normal threads, said; with it, under SCHED_FIFO.
    let base = "--bounding-set=-all,+net_admin,+net_raw,+bpf,+perfmon,+ipc_lock,+setpcap";
    for (caps, said) in [
        (base.to_owned(), "xfwd: warning: the workers run as normal threads: SCHED_FIFO 10 refused"),
        (format!("{base},+sys_nice"), "xfwd: workers under SCHED_FIFO 10,"),
    ] {
        let args = [caps.as_str(), "--inh-caps=-all", XFWD, "bridge", "eth4", "eth5", "--control", &control];
        let mut x = r.start_xfwd("setpriv", &args).unwrap();
        x.collect(); // warnings arrive on their own pipe
        assert!(x.seen.iter().any(|l| l.starts_with(said)), "{caps}: {:#?}", x.seen);
        Rig::ping_until(&r.h1, "198.18.0.2", common::PATH_UP).unwrap();
        assert_unprivileged(x.proc.child.id(), 0);
        stop_clean(&mut x);
    }
}

/// Who may ask: by default only the socket's owner, and a user who may not is told so (not
/// that nothing answers); with --control-group, that group's members too.
#[test]
fn the_control_socket_answers_its_group_and_tells_others_they_may_not() {
    if !root_or_skip("the_control_socket_answers_its_group_and_tells_others_they_may_not") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    // A group nobody is in, by number (no entry in /etc/group needed).
    const GID: &str = "4242";
    let as_nobody = |control: &str, groups: &str| {
        std::process::Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--groups", groups, XFWD, "show", "stats"])
            .args(["--control", control])
            .output()
            .unwrap()
    };
    let control = control_path("priv-owner");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    let out = as_nobody(&control, GID);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("permission denied") && err.contains("--control-group"), "{err}");
    stop_clean(&mut x);

    let control = control_path("priv-group");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control, "--control-group", GID]).unwrap();
    let out = as_nobody(&control, GID);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("eth4"));
    let out = as_nobody(&control, "4243");
    assert_eq!(out.status.code(), Some(1), "not in the group: {}", String::from_utf8_lossy(&out.stderr));
    stop_clean(&mut x);
}

/// Start-up without a capability it needs is refused before anything is touched, naming each
/// one missing and what it is for (not libbpf's `Operation not permitted`).
#[test]
fn missing_capabilities_are_named_before_start() {
    if !root_or_skip("missing_capabilities_are_named_before_start") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("priv-missing");
    let out = r
        .boxns
        .command("setpriv")
        .args(["--bounding-set=-all,+net_admin,+net_raw,+ipc_lock,+setpcap", "--inh-caps=-all", XFWD])
        .args(["bridge", "eth4", "eth5", "--control", &control])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "xfwd: error: missing capabilities: CAP_BPF (load the XDP program and its maps), CAP_PERFMON ("
        ),
        "{err}"
    );
    assert!(!err.contains("CAP_NET_ADMIN") && !err.contains("CAP_NET_RAW"), "only what is missing: {err}");
    assert!(!common::xdp_attached(&r), "nothing attached");
    assert!(!std::path::Path::new(&control).exists(), "no control socket");
}
