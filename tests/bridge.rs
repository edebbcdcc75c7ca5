//! `xfwd bridge` end to end on a namespace rig: h1:eth0 ⇄ box:eth4, box:eth5 ⇄ h2:eth0, with
//! no Linux bridge in the box, so anything that crosses went through XDP → AF_XDP → a worker.
//! Needs root; each test builds its own rig and removes it on drop, failed or not.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    capture, control_path, cpus_or_skip, drops_but_aqm, mac_of, min_segments, raw_frame, root_or_skip, send_raw,
    serial, shed, stats, stop_clean, xdp, xdp_attached, XFWD,
};
use xfwd::rig::{self, Rig};

#[test]
fn ping_arp_and_tcp_cross_through_af_xdp() {
    if !root_or_skip("ping_arp_and_tcp_cross_through_af_xdp") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("basic");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    assert!(xdp_attached(&r), "no XDP program on the box's ports while xfwd runs");

    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    r.h2.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", rig::H1_ADDR]).unwrap();

    // ARP resolved across the bridge: h1 knows h2's real MAC, and the bridge learnt both.
    let neigh = r.h1.ip(&["neigh", "show", rig::H2_ADDR]).unwrap();
    let h2_mac = mac_of(&r.h2, "eth0");
    assert!(String::from_utf8_lossy(&neigh.stdout).contains(&h2_mac), "h1's ARP entry for h2: {neigh:?}");
    let fdb = Command::new(XFWD).args(["show", "fdb", "--control", &control]).output().unwrap();
    let fdb = String::from_utf8_lossy(&fdb.stdout).to_string();
    assert!(fdb.contains(&h2_mac) && fdb.contains(&mac_of(&r.h1, "eth0")), "fdb: {fdb}");
    // The same as JSON: named fields, a schema version.
    let json: xfwd::show::Fdb = serde_json::from_str(&common::show_json(&control, "fdb")).unwrap();
    assert_eq!(json.version, xfwd::show::VERSION);
    let h2 = json.entries.iter().find(|e| e.mac == h2_mac).expect("h2 in the JSON");
    assert_eq!(h2.port, "eth5", "{json:?}");
    // show stats --json: counts by name, a schema version.
    let v: serde_json::Value = serde_json::from_str(&common::show_json(&control, "stats")).unwrap();
    assert_eq!(v["version"], xfwd::show::VERSION, "{v}");
    let drops = &v["ports"][0]["total"]["drops"];
    assert!(drops.is_object() && drops["no-free-frame"].is_u64(), "{drops}");
    assert!(v["ports"][0]["xdp"]["redirected"].as_u64().unwrap() > 0, "{}", v["ports"][0]["xdp"]);
    // A bridge has no routes: the question is an error, exit 1, said on stderr.
    let routes = Command::new(XFWD).args(["show", "routes", "--control", &control]).output().unwrap();
    let err = String::from_utf8_lossy(&routes.stderr);
    assert_eq!(routes.status.code(), Some(1), "{err}");
    assert!(routes.stdout.is_empty() && err.contains("this xfwd is a bridge: it has no routes (show fdb)"), "{err}");
    let routes = Command::new(XFWD).args(["show", "neighbors", "--json", "--control", &control]).output().unwrap();
    assert_eq!(routes.status.code(), Some(1), "{}", String::from_utf8_lossy(&routes.stderr));

    let before = stats(&control);
    let tcp = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, 1, 1, 2).unwrap();
    assert!(tcp.gbps() > 0.0, "TCP transfer moved nothing");
    let after = common::settled(&control);

    // Every data segment crossed eth4 → eth5 as an AF_XDP frame, redirected by the XDP program:
    // at least as many frames as it takes to carry what h2 received.
    let rx = after.ports[0].total.rx_frames - before.ports[0].total.rx_frames;
    let tx = after.ports[1].total.tx_frames - before.ports[1].total.tx_frames;
    // What queue management shed on the way out (a loaded machine makes frames wait) left
    // eth5 with a reason; the rest was sent (frames still in flight as the stats were read
    // aside: 1 %).
    let out = tx + shed(&after.ports[1].total) - shed(&before.ports[1].total);
    let need = min_segments(tcp.flows_received_bytes[0]);
    assert!(rx >= need, "{rx} frames received on eth4, yet h2 received {need} segments' worth");
    assert!(out >= rx - rx / 100, "eth5 sent or shed {out} of {rx}");
    assert!(xdp(&after, 0, "redirected") >= after.ports[0].total.rx_frames);
    assert_eq!(xdp(&after, 0, "pass-no-socket"), 0);
    // How it is attached and bound is in the stats, for tools that read them (the bench).
    assert_eq!(after.zero_copy, Some(false), "veth has no zero-copy");
    assert!(after.ports.iter().all(|p| p.xdp_mode.as_deref() == Some("native")), "{:?}", after.ports);
    for p in &after.ports {
        assert_eq!(drops_but_aqm(&p.total), [], "{}: drops {:?}", p.name, p.total.drops);
        assert_eq!(p.total.xsk.tx_invalid, 0, "{}: invalid TX descriptors", p.name);
    }
    stop_clean(&mut x);
    assert!(!xdp_attached(&r), "XDP program still attached after SIGTERM");
}

#[test]
fn two_queues_two_workers_forward_on_both_queues() {
    if !root_or_skip("two_queues_two_workers_forward_on_both_queues") {
        return;
    }
    if !cpus_or_skip("two_queues_two_workers_forward_on_both_queues", 2) {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(2).unwrap();
    let control = control_path("mq");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--queues", "2", "--control", &control]).unwrap();
    let table: Vec<Vec<&str>> = x.seen.iter().map(|l| l.split_whitespace().collect()).collect();
    assert!(table.contains(&vec!["0", "0"]) && table.contains(&vec!["1", "1"]), "queue→core table: {:#?}", x.seen);
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    // Two flows, client k pinned to CPU k: XPS puts flow k on h1's TX queue k = box eth4 queue k.
    let tcp = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, 2, 2, 2).unwrap();
    assert!(tcp.flows_bps.iter().all(|&b| b > 0.0), "a flow moved nothing: {:?}", tcp.flows_bps);
    let s = common::settled(&control);
    let (eth4, eth5) = (&s.ports[0], &s.ports[1]);
    assert_eq!(eth4.per_queue.len(), 2);
    for q in 0..2 {
        // Flow q's data segments: in on eth4 queue q, out on eth5 by the same worker, none lost.
        // (Flow q starts on queue q; TCP may move later segments to another queue, see
        // tests/router.rs, so per queue only "carries traffic" is certain.)
        // (Shed by queue management counts as out: it left with a reason.)
        let (rx, tx) = (eth4.per_queue[q].rx_frames, eth5.per_queue[q].tx_frames + shed(&eth5.per_queue[q]));
        assert!(rx > 0, "queue {q} of eth4 received nothing: {:?}", eth4.per_queue);
        assert!(tx >= rx, "queue {q}: {rx} in on eth4, only {tx} out on eth5 (sent or shed)");
        assert_eq!(drops_but_aqm(&eth4.per_queue[q]), [], "queue {q} drops: {:?}", eth4.per_queue[q].drops);
    }
    let need = min_segments(tcp.flows_received_bytes.iter().sum());
    assert!(eth4.total.rx_frames >= need, "eth4 received {} frames, the data takes {need}", eth4.total.rx_frames);
    assert_eq!(xdp(&s, 0, "pass-no-socket"), 0);
    stop_clean(&mut x);
}

#[test]
fn link_local_groups_go_to_the_kernel_and_stp_is_bridged() {
    if !root_or_skip("link_local_groups_go_to_the_kernel_and_stp_is_bridged") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("l2ctl");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    let src = [0x02, 0, 0, 0, 0x11, 0x01];
    let lldp = [0x01, 0x80, 0xC2, 0, 0, 0x0E];
    let pause = [0x01, 0x80, 0xC2, 0, 0, 0x01];
    let stp = [0x01, 0x80, 0xC2, 0, 0, 0x00];
    let cap = capture(r.h2.name(), "eth0", Duration::from_secs(2));
    let mut frames = Vec::new();
    for i in 0..5u8 {
        frames.push(raw_frame(lldp, src, 0x88cc, 0xA0 + i));
        frames.push(raw_frame(pause, src, 0x8808, 0xB0 + i));
        frames.push(raw_frame(stp, src, 0x0026, 0xC0 + i));
    }
    send_raw(r.h1.name(), "eth0", frames);
    let got = cap.join().unwrap();
    let count = |dst: [u8; 6]| got.iter().filter(|f| f.len() >= 14 && f[..6] == dst && f[6..12] == src).count();
    assert_eq!(count(stp), 5, "STP BPDUs must cross the bridge");
    assert_eq!(count(lldp), 0, "LLDP must not cross the bridge");
    assert_eq!(count(pause), 0, "PAUSE must not cross the bridge");
    let s = stats(&control);
    assert_eq!(xdp(&s, 0, "pass-reserved"), 10, "the XDP program hands LLDP and PAUSE to the kernel");
    stop_clean(&mut x);
}

#[test]
fn sigkill_and_sigterm_leave_nothing_attached_and_restart_is_immediate() {
    if !root_or_skip("sigkill_and_sigterm_leave_nothing_attached_and_restart_is_immediate") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("kill");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    x.stop(libc::SIGKILL, Duration::from_secs(5)).unwrap();
    // The bpf_link dies with the process: no detach step ran, yet nothing is left.
    assert!(!xdp_attached(&r), "XDP program left attached after SIGKILL");
    // Restart at once: the kernel may still be releasing the dead process's sockets.
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    stop_clean(&mut x);
    assert!(!xdp_attached(&r), "XDP program left attached after SIGTERM");
}

fn expect_refusal(r: &Rig, args: &[&str], needle: &str) {
    let out = r.boxns.command(XFWD).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].starts_with("xfwd: error: ") && lines[0].contains(needle), "{args:?}: {err}");
    assert!(!xdp_attached(r), "{args:?}: refused, yet something is attached");
}

#[test]
fn unusable_ports_are_refused_with_one_line_and_nothing_attached() {
    if !root_or_skip("unusable_ports_are_refused_with_one_line_and_nothing_attached") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let c = control_path("refuse");
    expect_refusal(&r, &["bridge", "eth4", "eth9", "--control", &c], "eth9: no such interface");
    expect_refusal(&r, &["bridge", "eth4", "eth4", "--control", &c], "eth4: given more than once");
    expect_refusal(
        &r,
        &["bridge", "eth4", "eth5", "--queues", "2", "--control", &c],
        "eth4: has 1 RX queue(s), 2 asked",
    );
    // veth has no interrupts: no queue's IRQ CPU to pin a worker to.
    expect_refusal(
        &r,
        &["bridge", "eth4", "eth5", "--cores", "irq", "--control", &c],
        "--cores irq: eth4 has no interrupt per RX queue that the kernel names",
    );
    // The same two refusals from a file's --check, which starts nothing.
    let file = std::env::temp_dir().join(format!("xfwd-refusals-{}.toml", std::process::id()));
    std::fs::write(&file, "ports = [\"eth4\", \"eth5\"]\n").unwrap();
    let check = ["bridge", "--config", file.to_str().unwrap(), "--check"];
    r.boxns.ip(&["link", "set", "eth5", "down"]).unwrap();
    expect_refusal(&r, &["bridge", "eth4", "eth5", "--control", &c], "eth5: is administratively down");
    expect_refusal(&r, &check, "eth5: is administratively down");
    r.boxns.ip(&["link", "set", "eth5", "up"]).unwrap();
    // veth takes a 3000-byte MTU (the host side too), and a 2 KiB frame cannot carry it.
    r.boxns.ip(&["link", "set", "eth5", "mtu", "3000"]).unwrap();
    expect_refusal(&r, &["bridge", "eth4", "eth5", "--control", &c], "eth5: MTU 3000 is larger");
    expect_refusal(&r, &check, "eth5: MTU 3000 is larger");
    r.boxns.ip(&["link", "set", "eth5", "mtu", "1500"]).unwrap();
    let out = r.boxns.command(XFWD).args(check).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_file(&file);

    // A device without native XDP (a Linux bridge device), native mode forced: refused after
    // eth4 was already attached. (The bpf_link would go with the process anyway; the check
    // is that the refusal is one line, exit 2, and leaves the ports bare.)
    r.boxns.ip(&["link", "add", "br9", "type", "bridge"]).unwrap();
    r.boxns.ip(&["link", "set", "br9", "up"]).unwrap();
    expect_refusal(&r, &["bridge", "eth4", "br9", "--xdp-mode", "native", "--control", &c], "br9: cannot take XDP");
    r.boxns.ip(&["link", "del", "br9"]).unwrap();

    // Another tool's XDP program on eth4 (a 3-line program compiled here, with the clang the
    // build uses): named with its id and name, and how to see and free it.
    let dir = common::TempDir::new("foreign-xdp");
    let (src, obj) = (dir.join("pass.c"), dir.join("pass.o"));
    std::fs::write(
        &src,
        "#include <linux/bpf.h>\n__attribute__((section(\"xdp\"), used)) int foreign_pass(struct xdp_md *c) { return XDP_PASS; }\nchar l[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
    )
    .unwrap();
    let include = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let built = Command::new("clang")
        .args(["-O2", "-g", "-target", "bpf", "-I", &include, "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    r.boxns.ip(&["link", "set", "dev", "eth4", "xdpgeneric", "obj", obj.to_str().unwrap(), "sec", "xdp"]).unwrap();
    let out = r.boxns.command(XFWD).args(["bridge", "eth4", "eth5", "--control", &c]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(
        err.contains("eth4: cannot take XDP")
            && err.contains("an XDP program is already attached (id ")
            && err.contains("name \"foreign_pass\", generic mode")
            && err.contains("ip link set dev eth4 xdp off"),
        "{err}"
    );
    r.boxns.ip(&["link", "set", "dev", "eth4", "xdpgeneric", "off"]).unwrap();

    // No carrier is a warning, not an error: take the host end down.
    r.h2.ip(&["link", "set", "eth0", "down"]).unwrap();
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &c]).unwrap();
    x.collect(); // stderr arrives on its own pipe
    assert!(x.seen.iter().any(|l| l.contains("warning: eth5: no carrier")), "{:#?}", x.seen);

    // A second xfwd on the same ports is told what holds them, which xfwd, and what to do.
    let c2 = control_path("refuse-2");
    let out = r.boxns.command(XFWD).args(["bridge", "eth4", "eth5", "--control", &c2]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    let pid = x.proc.child.id().to_string();
    assert!(
        (err.contains("another AF_XDP socket holds this queue")
            || err.contains("an XDP program is already attached (id ") && err.contains("name \"xfwd_xdp\""))
            && err.contains("another xfwd")
            && err.contains("(running: pid ")
            && err.contains(&pid)
            && err.contains("stop it first"),
        "{err}"
    );
    stop_clean(&mut x);
}

#[test]
fn frames_on_a_queue_without_a_socket_are_counted_and_warned_about() {
    if !root_or_skip("frames_on_a_queue_without_a_socket_are_counted_and_warned_about") {
        return;
    }
    if !cpus_or_skip("frames_on_a_queue_without_a_socket_are_counted_and_warned_about", 2) {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(2).unwrap();
    let control = control_path("unbound");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--queues", "1", "--control", &control]).unwrap();
    x.collect(); // stderr arrives on its own pipe
    assert!(
        x.seen.iter().any(|l| l.contains("warning: eth4: 2 RX queues but 1 worker(s)")),
        "no start-up warning: {:#?}",
        x.seen
    );
    // With h2's MAC known statically, ping pinned to CPU 1 sends its echo requests from h1's
    // TX queue 1, which lands on eth4's queue 1, where no worker listens.
    let h2_mac = mac_of(&r.h2, "eth0");
    r.h1.ip(&["neigh", "replace", rig::H2_ADDR, "lladdr", &h2_mac, "dev", "eth0"]).unwrap();
    let before = xdp(&stats(&control), 0, "pass-no-socket");
    let lost = r.h1.exec(&["taskset", "-c", "1", "ping", "-c", "3", "-i", "0.2", "-W", "1", rig::H2_ADDR]);
    assert!(lost.is_err(), "ping must fail: its requests go to the box's kernel, not across");
    let s = stats(&control);
    assert!(xdp(&s, 0, "pass-no-socket") >= before + 3, "xdp counters: {:?}", s.ports[0].xdp);
    // The program recorded the queue index the frames came with, and the port's driver.
    assert_eq!((s.ports[0].missed_queue, s.ports[0].driver.as_deref()), (Some(1), Some("veth")));
    // xfwd says so while it runs (it looks every second), naming the index and the driver.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let warned = |seen: &[String]| {
        seen.iter().any(|l| {
            l.contains("eth4:")
                && l.contains("arrived on a queue without an AF_XDP socket")
                && l.contains("highest queue index 1, sockets on 0..0, driver veth")
        })
    };
    while !warned(&x.seen) && std::time::Instant::now() < deadline {
        x.collect();
    }
    assert!(warned(&x.seen), "no run-time warning: {:#?}", x.seen);
    x.stop(libc::SIGTERM, Duration::from_secs(10)).unwrap();
}

/// Restores `vm.nr_hugepages` on drop.
struct HugePages(String);

impl HugePages {
    fn reserve(n: u32) -> HugePages {
        let before = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap().trim().to_owned();
        std::fs::write("/proc/sys/vm/nr_hugepages", n.to_string()).unwrap();
        HugePages(before)
    }
}

impl Drop for HugePages {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/vm/nr_hugepages", &self.0);
    }
}

fn huge_pages_free() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    meminfo.lines().find_map(|l| l.strip_prefix("HugePages_Free:")).unwrap().trim().parse().unwrap()
}

#[test]
fn zero_copy_falls_back_on_veth_or_refuses_when_forced_and_huge_pages_back_the_umem() {
    if !root_or_skip("zero_copy_falls_back_on_veth_or_refuses_when_forced_and_huge_pages_back_the_umem") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let c = control_path("zc");
    // veth has no AF_XDP zero-copy: forced, it is refused with the fix; auto binds in copy mode.
    expect_refusal(
        &r,
        &["bridge", "eth4", "eth5", "--zero-copy", "on", "--control", &c],
        "the driver has no AF_XDP zero-copy: use --zero-copy auto or off",
    );
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &c]).unwrap();
    x.collect();
    assert!(x.seen.iter().any(|l| l.contains("AF_XDP copy mode")), "{:#?}", x.seen);
    assert!(x.seen.iter().any(|l| l.contains("eth4: no AF_XDP zero-copy in its driver")), "{:#?}", x.seen);
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    stop_clean(&mut x);

    // Huge pages: none reserved, refused with what to do; reserved, the UMEM takes them.
    let _reserved = HugePages::reserve(0);
    expect_refusal(
        &r,
        &["bridge", "eth4", "eth5", "--huge-pages", "--control", &c],
        "reserve them with sysctl vm.nr_hugepages",
    );
    drop(_reserved);
    // One worker, two ports, 8,192 frames of 2 KiB: 16 MiB, eight 2 MiB pages, and no more:
    // veth says it has no zero-copy, so no zero-copy bind is tried first (its UMEM, freed
    // late by the kernel after the failed bind, took eight more pages for a while).
    let _reserved = HugePages::reserve(8);
    let free = huge_pages_free();
    assert_eq!(free, 8, "the premise: the kernel reserved eight huge pages, all free");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--huge-pages", "--control", &c]).unwrap();
    common::until(common::EVENTUALLY, "the UMEM on the eight huge pages", || huge_pages_free() == 0);
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    r.h2.exec(&["ping", "-c", "20", "-i", "0.01", "-W", "1", rig::H1_ADDR]).unwrap();
    stop_clean(&mut x);
}

/// (thread name, scheduling policy, real-time priority) of every thread of `pid`, from
/// /proc/PID/task/TID/stat (fields 40 and 41 after the command name).
fn thread_policies(pid: u32) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap();
        let (name, rest) = stat.split_once(" (").unwrap().1.rsplit_once(") ").unwrap();
        // `rest` starts at field 3 (state); rt_priority is field 40, policy field 41.
        let f: Vec<&str> = rest.split_whitespace().collect();
        out.push((name.to_owned(), f[41 - 3].parse().unwrap(), f[40 - 3].parse().unwrap()));
    }
    out
}

#[test]
fn rt_priority_puts_the_workers_alone_under_sched_fifo() {
    if !root_or_skip("rt_priority_puts_the_workers_alone_under_sched_fifo") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let c = control_path("rt");
    expect_refusal(
        &r,
        &["bridge", "eth4", "eth5", "--rt-priority", "10", "--poll", "busy", "--control", &c],
        "--rt-priority with --poll busy",
    );
    // Asked for by number, by default (auto: 10, as root), and off.
    for (args, want) in
        [(&["--rt-priority", "20"][..], Some(20)), (&[][..], Some(10)), (&["--rt-priority", "off"][..], None)]
    {
        let mut all = vec!["bridge", "eth4", "eth5", "--control", &c];
        all.extend_from_slice(args);
        let mut x = r.start_xfwd(XFWD, &all).unwrap();
        let said = match want {
            Some(p) => format!("xfwd: workers under SCHED_FIFO {p},"),
            None => "xfwd: workers are normal threads".to_owned(),
        };
        assert!(x.seen.iter().any(|l| l.starts_with(&said)), "{args:?}: {:#?}", x.seen);
        Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
        let threads = thread_policies(x.proc.child.id());
        assert!(threads.len() >= 3, "{threads:?}");
        for (name, policy, prio) in &threads {
            // (A worker under sustained load steps down until its next pause; a ping is not that.)
            let fifo = (libc::SCHED_FIFO as u32, u32::from(want.unwrap_or(0)));
            if name.starts_with("xfwd-q") && want.is_some() {
                assert_eq!((*policy, *prio), fifo, "{args:?} {name}: {threads:?}");
            } else {
                assert_eq!((*policy, *prio), (libc::SCHED_OTHER as u32, 0), "{args:?} {name}: {threads:?}");
            }
        }
        assert_eq!(stats(&c).rt_priority, want, "{args:?}: the stats say how the workers run");
        stop_clean(&mut x);
    }
}

/// The dpaa_eth case on veth: in generic mode every frame of a port arrives as queue 0, from
/// whichever CPU received it. With per-CPU sockets (chosen by `auto` for veth in generic mode)
/// both workers bind queue 0 of each one-queue port and share its fill and completion rings;
/// frames received on CPU k go to the worker of CPU k.
#[test]
fn one_queue_fed_from_two_cpus_keeps_two_workers_busy_with_per_cpu_sockets() {
    let test = "one_queue_fed_from_two_cpus_keeps_two_workers_busy_with_per_cpu_sockets";
    if !root_or_skip(test) || !cpus_or_skip(test, 2) {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("percpu");
    let args = ["bridge", "eth4", "eth5", "--xdp-mode", "generic", "--stats", "1s", "--control", &control];
    let mut x = r.start_xfwd(XFWD, &args).unwrap();
    assert!(
        x.seen.iter().any(|l| l.starts_with("xfwd: sockets per-cpu")),
        "auto did not take per-CPU sockets for veth in generic mode: {:#?}",
        x.seen
    );
    let table: Vec<Vec<&str>> = x.seen.iter().map(|l| l.split_whitespace().collect()).collect();
    assert!(table.contains(&vec!["0", "0"]) && table.contains(&vec!["1", "1"]), "worker tables: {:#?}", x.seen);
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    // The rule itself, whatever the load: a frame sent from CPU k reaches eth4 on CPU k (a
    // one-queue veth hands it over on the sending CPU, where generic XDP runs) and goes to
    // worker k. 50 echo requests from a ping pinned to each CPU: each worker takes its own.
    for cpu in [0usize, 1] {
        let before = stats(&control);
        let out =
            r.h1.command("taskset")
                .args(["-c", &cpu.to_string(), "ping", "-q", "-c", "50", "-i", "0.01", "-W", "2", rig::H2_ADDR])
                .output()
                .unwrap();
        let s = stats(&control);
        let took: Vec<u64> =
            (0..2).map(|w| s.ports[0].per_queue[w].rx_frames - before.ports[0].per_queue[w].rx_frames).collect();
        eprintln!("{test}: ping from CPU {cpu}: eth4 frames per worker {took:?}");
        assert!(
            took[cpu] >= 50,
            "worker {cpu} took {took:?} of the 50 requests sent from CPU {cpu}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let before = stats(&control);
    // Two flows, client k pinned to CPU k: each client sends from its own CPU (in process
    // context), so both workers carry TCP data. How much each takes depends on where the
    // scheduler runs the senders' softirqs on a loaded machine; that is not what this guards.
    let tcp = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, 2, 2, 3).unwrap();
    assert!(tcp.flows_bps.iter().all(|&b| b > 0.0), "a flow moved nothing: {:?}", tcp.flows_bps);
    let s = stats(&control);
    let eth4: Vec<u64> =
        (0..2).map(|w| s.ports[0].per_queue[w].rx_frames - before.ports[0].per_queue[w].rx_frames).collect();
    let total: u64 = eth4.iter().sum();
    eprintln!("{test}: TCP: eth4 frames per worker {eth4:?}, {:.2} Gb/s", tcp.gbps());
    assert!(eth4.iter().all(|&n| n > 0), "both workers carried TCP: {eth4:?}");
    let need = min_segments(tcp.flows_received_bytes.iter().sum());
    assert!(total >= need, "eth4 received {total} frames, the data takes {need}");
    // Every frame found its socket, and each port's UMEM served both workers.
    assert_eq!(xdp(&s, 0, "pass-no-socket"), 0);
    let pools: Vec<((u32, u32), Vec<String>)> = s.pools.iter().map(|p| (p.workers, p.ports.clone())).collect();
    assert_eq!(pools, [((0, 1), vec!["eth4".to_owned()]), ((0, 1), vec!["eth5".to_owned()])]);
    for p in &s.ports {
        let (rx, tx): (u64, u64) = (p.total.rx_frames, p.total.tx_frames);
        assert!(rx > 0 && tx > 0, "{}: rx {rx} tx {tx}", p.name);
        assert_eq!(p.total.xsk.tx_invalid + p.total.xsk.rx_invalid, 0, "{}: invalid descriptors", p.name);
    }
    // Received = sent + dropped with a reason, over both workers, once the last stragglers
    // (TCP closing) are through.
    common::settled(&control);
    stop_clean(&mut x);
    // The --stats lines, not to the journal here, carry the time (RFC 3339, UTC).
    let stamped = x.seen.iter().find_map(|l| l.split_once(" eth4: rx ").map(|(t, _)| t.to_owned()));
    let t = stamped.unwrap_or_else(|| panic!("no --stats line for eth4: {:#?}", x.seen));
    assert!(t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T' && t.starts_with("20"), "{t}");
    for port in ["eth4", "eth5"] {
        let line = format!("queues 0-1 on {port}: frames total");
        assert!(x.seen.iter().any(|l| l.starts_with(&line)), "no frame accounting for {port}: {:#?}", x.seen);
    }
}

#[test]
fn the_smallest_rings_carry_tcp_and_account_for_every_frame() {
    if !root_or_skip("the_smallest_rings_carry_tcp_and_account_for_every_frame") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("rings");
    let mut x = r
        .start_xfwd(
            XFWD,
            &[
                "bridge",
                "eth4",
                "eth5",
                "--rx-ring",
                "64",
                "--tx-ring",
                "64",
                "--fill-ring",
                "64",
                "--completion-ring",
                "64",
                "--control",
                &control,
            ],
        )
        .unwrap();
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    // Rings of one batch: the fill ring holds 64 frames of the UMEM's 8,192 and the TX ring
    // takes 64 at most; a TCP transfer still goes through, every frame sent or counted.
    let tcp = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, 2, 1, 2).unwrap();
    assert!(tcp.flows_bps.iter().all(|&b| b > 0.0), "a flow moved nothing: {:?}", tcp.flows_bps);
    let s = common::settled(&control);
    let f = s.pools[0].frames;
    // (Summed over the two ports.)
    assert!(f.fill_ring <= 2 * 64 && f.tx_ring <= 2 * 64, "the rings are 64 deep: {f:?}");
    assert_eq!(f.unaccounted(), 0, "{f:?}");
    let rx: u64 = s.ports.iter().map(|p| p.total.rx_frames).sum();
    let tx: u64 = s.ports.iter().map(|p| p.total.tx_frames).sum();
    let dropped: u64 = s.ports.iter().map(|p| p.total.dropped()).sum();
    assert_eq!(rx, tx + dropped, "received = sent + dropped: {:#?}", s.ports);
    // And a size the kernel cannot index with a mask is refused before anything is touched.
    let out = r.boxns.command(XFWD).args(["bridge", "eth4", "eth5", "--rx-ring", "100"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rx-ring 100: give a power of two from 64 to 4096"));
    stop_clean(&mut x);
}

#[test]
fn a_port_mtu_lowered_at_run_time_keeps_longer_frames_off_it_and_counts_them() {
    if !root_or_skip("a_port_mtu_lowered_at_run_time_keeps_longer_frames_off_it_and_counts_them") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let control = control_path("l2mtu");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control]).unwrap();
    let (src, far, unknown) = ([0x02, 0, 0, 0, 0x33, 0x01], [0x02, 0, 0, 0, 0x33, 0x02], [0x02, 0, 0, 0, 0x33, 0x03]);
    // `far` is learnt behind eth5; `unknown` never is (frames to it are flooded).
    send_raw(r.h2.name(), "eth0", vec![raw_frame(src, far, 0x88b5, 0x01)]);
    common::until(Duration::from_secs(10), "far learnt", || {
        common::show(&control, "fdb").contains("02:00:00:00:33:02")
    });
    let sized = |dst: [u8; 6], len: usize, marker: u8| {
        let mut f = raw_frame(dst, src, 0x88b5, marker);
        f.resize(len, marker);
        f
    };
    // Crossed: the markers of the frames from `src` that reached h2.
    // Sends `frames` from h1 until every marker in `must` has reached h2 (a loaded machine can
    // lose a frame before xfwd sees it: 5 tries); the markers seen, and the tries it took.
    let cross = |frames: Vec<Vec<u8>>, must: &[u8]| {
        let mut seen = std::collections::BTreeSet::new();
        for tries in 1..=5 {
            let cap = capture(r.h2.name(), "eth0", Duration::from_secs(2));
            send_raw(r.h1.name(), "eth0", frames.clone());
            seen.extend(cap.join().unwrap().iter().filter(|f| f.len() > 14 && f[6..12] == src).map(|f| f[14]));
            if must.iter().all(|m| seen.contains(m)) {
                return (seen.into_iter().collect::<Vec<u8>>(), tries);
            }
        }
        panic!("of {must:x?}, only {seen:x?} reached h2 in 5 tries");
    };
    // The premise: at MTU 1500 a 1450-byte frame crosses, unicast and flooded.
    assert_eq!(cross(vec![sized(far, 1450, 0xA0), sized(unknown, 1450, 0xA1)], &[0xA0, 0xA1]).0, [0xA0, 0xA1]);

    // eth5 down to MTU 1400: 1418 bytes at most (the MTU, a header, one VLAN tag, as the
    // kernel's bridge allows), for frames bridged to one port or flooded.
    r.boxns.ip(&["link", "set", "dev", "eth5", "mtu", "1400"]).unwrap();
    let line = common::wait_line(&mut x, "xfwd: eth5: now MTU 1400", 0);
    assert!(line.contains("longer than 1418 bytes"), "{line}");
    let before = stats(&control);
    let frames = vec![
        sized(far, 1418, 0xB0),
        sized(far, 1419, 0xB1),
        sized(far, 1450, 0xB2),
        sized(unknown, 1418, 0xB3),
        sized(unknown, 1450, 0xB4),
    ];
    let (got, tries) = cross(frames, &[0xB0, 0xB3]);
    assert_eq!(got, [0xB0, 0xB3], "only the frames that fit eth5's new MTU cross, in {tries} tries");
    let after = stats(&control);
    let too_big = |s: &xfwd_dataplane::io::Report| {
        s.ports[0].total.drops.iter().find(|(n, _)| n == "too-big-to-forward").map_or(0, |d| d.1)
    };
    // Each oversize frame that reached xfwd is counted (three a try; one lost before xfwd
    // saw it is not xfwd's to count).
    let counted = too_big(&after) - too_big(&before);
    assert!(
        counted >= 1 && counted <= 3 * tries as u64,
        "{counted} counted for 3 oversize frames in each of {tries} tries: {:?}",
        after.ports[0].total.drops
    );

    // Back up to 1500: they cross again.
    r.boxns.ip(&["link", "set", "dev", "eth5", "mtu", "1500"]).unwrap();
    common::wait_line(&mut x, "xfwd: eth5: now MTU 1500", 0);
    assert_eq!(cross(vec![sized(far, 1450, 0xC0)], &[0xC0]).0, [0xC0]);
    stop_clean(&mut x);
}

#[test]
fn the_xdp_path_bridges_known_stations_in_the_program_and_keeps_them_from_ageing() {
    let test = "the_xdp_path_bridges_known_stations_in_the_program_and_keeps_them_from_ageing";
    if !root_or_skip(test) {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    r.hosts_napi().unwrap();
    let control = control_path("br-xdp");
    // Ageing in 10 s: a station the program alone sees must be kept by the thread's refresh.
    let mut x = r
        .start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &control, "--path", "xdp", "--ageing", "10"])
        .unwrap();
    // The first frames of each station go to the workers, which learn it; then the program has
    // both (written by the thread within a tenth of a second).
    common::until_both_ends_in_the_program(&control, &r.h1, rig::H2_ADDR);
    let before = stats(&control);
    // 15 s of pings, longer than the ageing time: every one through the program.
    let out = r.h1.exec(&["ping", "-c", "60", "-i", "0.25", "-W", "2", rig::H2_ADDR]).unwrap();
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(common::answered(&out), 60, "{out}");
    let s = stats(&control);
    for p in 0..2 {
        let fwd = xdp(&s, p, "xdp-forwarded") - xdp(&before, p, "xdp-forwarded");
        assert!(fwd >= 60, "{}: {fwd} forwarded in the program", s.ports[p].name);
        assert_eq!(
            s.ports[p].total.rx_frames, before.ports[p].total.rx_frames,
            "{}: none to the workers",
            s.ports[p].name
        );
    }
    let path = s.xdp_path.clone().unwrap();
    assert!(path.refreshed > 0 && path.errors == 0 && path.no_redirects.is_empty(), "{path:?}");
    let fdb = Command::new(XFWD).args(["show", "fdb", "--control", &control]).output().unwrap();
    let fdb = String::from_utf8_lossy(&fdb.stdout).to_string();
    assert!(fdb.contains(&mac_of(&r.h1, "eth0")) && fdb.contains(&mac_of(&r.h2, "eth0")), "kept from ageing: {fdb}");

    // A broadcast from a known station is flooded by the program, out of the other port only.
    let flooded = xdp(&s, 0, "xdp-flooded");
    r.h1.exec(&["ping", "-b", "-c", "3", "-i", "0.2", "-W", "1", "198.18.0.255"]).ok();
    let after = stats(&control);
    assert!(xdp(&after, 0, "xdp-flooded") > flooded, "{:?}", after.ports[0].xdp);

    // TCP through the program, nothing lost to a reason.
    let tcp = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, 1, 1, 2).unwrap();
    assert!(tcp.gbps() > 0.0);
    let end = stats(&control);
    let fwd = xdp(&end, 0, "xdp-forwarded") - xdp(&after, 0, "xdp-forwarded");
    assert!(fwd >= min_segments(tcp.flows_received_bytes[0]), "eth4: {fwd} forwarded in the program");
    for p in &end.ports {
        assert_eq!(drops_but_aqm(&p.total), [], "{}: drops {:?}", p.name, p.total.drops);
    }
    stop_clean(&mut x);
}

/// A bridge from its file: the ports, the FDB's size and the worker options come from it, a
/// flag beside it wins over it, and it forwards.
#[test]
fn a_bridge_file_sets_ports_and_table_and_a_flag_beside_it_wins() {
    if !root_or_skip("a_bridge_file_sets_ports_and_table_and_a_flag_beside_it_wins") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let dir = common::TempDir::new("bridge-file");
    let file = dir.join("b.toml");
    std::fs::write(
        &file,
        "ports = [\"eth4\", \"eth5\"]\nageing = \"5m\"\nfdb_size = 1024\n[workers]\npoll = \"busy\"\n",
    )
    .unwrap();
    let c = control_path("br-file");
    let mut x =
        r.start_xfwd(XFWD, &["bridge", "--config", file.to_str().unwrap(), "--ageing", "7s", "--control", &c]).unwrap();
    let banner = x.seen.iter().find(|l| l.starts_with("xfwd: bridge ")).cloned().unwrap_or_default();
    assert!(
        banner.starts_with("xfwd: bridge eth4 eth5 |")
            && banner.contains("poll busy")
            && banner.contains("fdb 1024 entries, ageing 7 s"),
        "{banner}"
    );
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    stop_clean(&mut x);
}

/// Per-port settings and static stations from the bridge's file act alike in xfwd — on the
/// AF_XDP path and on the XDP path — and in the kernel's bridge built from the same file
/// (`xfwd kernel bridge --config`), scenario by scenario: what one arm carries the others
/// carry, what one stops the others stop.
#[test]
fn port_settings_and_static_stations_act_alike_in_xfwd_and_the_kernel() {
    if !root_or_skip("port_settings_and_static_stations_act_alike_in_xfwd_and_the_kernel") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    // The XDP path's condition on veth, set for every arm alike.
    r.hosts_napi().unwrap();
    let dir = common::TempDir::new("bridge-ports");
    let h2_mac = mac_of(&r.h2, "eth0");
    let ports = "ports = [\"eth4\", \"eth5\"]\n";
    // eth5 neither learns h2 nor takes unknown unicast: h1's requests to h2 (unknown) go
    // nowhere, though the ARP broadcast and h2's answers pass.
    let quiet = "[port.eth5]\nlearning = false\nflood = false\n";
    let pinned = format!("[[static]]\nmac = \"{h2_mac}\"\nport = \"eth5\"\n");
    let isolated = "[port.eth4]\nisolated = true\n[port.eth5]\nisolated = true\n";
    let scenarios: [(&str, String, bool, &str); 3] = [
        ("quiet", format!("{ports}{quiet}"), false, "not-flooded"),
        ("quiet-pinned", format!("{ports}{quiet}{pinned}"), true, ""),
        ("isolated", format!("{ports}{isolated}"), false, "not-flooded"),
    ];
    let fresh = || {
        for h in [&r.h1, &r.h2] {
            h.ip(&["neigh", "flush", "all"]).unwrap();
        }
    };
    let pings = |what: &str| {
        let out = r.h1.command("ping").args(["-c", "3", "-i", "0.3", "-W", "1", rig::H2_ADDR]).output().unwrap();
        let n = common::answered(&String::from_utf8_lossy(&out.stdout));
        eprintln!("{what}: {n} of 3 answered");
        n
    };
    for (tag, text, carries, dropped) in &scenarios {
        let file = dir.join(format!("{tag}.toml"));
        std::fs::write(&file, text).unwrap();
        let file = file.to_str().unwrap();

        // xfwd, on each path.
        for path in ["af-xdp", "xdp"] {
            fresh();
            let c = control_path(&format!("br-{tag}-{path}"));
            let mut x = r.start_xfwd(XFWD, &["bridge", "--config", file, "--path", path, "--control", &c]).unwrap();
            assert!(x.seen.iter().any(|l| l.starts_with("xfwd: bridge ports: ")), "{tag}: {:?}", x.seen);
            if *carries {
                Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
                let fdb = common::show(&c, "fdb");
                let line = fdb.lines().find(|l| l.starts_with(&h2_mac)).unwrap_or_default();
                assert!(line.ends_with("static"), "{tag}, {path}: {fdb}");
                if path == "xdp" {
                    // The static station is in the program's table: once h1 is too (learnt by
                    // the workers, then written), h1's requests to it are forwarded there, with
                    // the quiet port's settings in force.
                    common::until_both_ends_in_the_program(&c, &r.h1, rig::H2_ADDR);
                    let before = stats(&c);
                    let answered = pings(&format!("{tag}, xfwd {path}"));
                    let fwd = common::xdp(&stats(&c), 0, "xdp-forwarded") - common::xdp(&before, 0, "xdp-forwarded");
                    assert!(
                        answered > 0 && fwd >= answered,
                        "{tag}: {fwd} forwarded in the program, {answered} answered"
                    );
                }
            } else {
                assert_eq!(
                    pings(&format!("{tag}, xfwd {path}")),
                    0,
                    "{tag}: xfwd {path} carried what its settings stop"
                );
                let s = stats(&c);
                let n: u64 =
                    s.ports.iter().map(|p| p.total.drops.iter().find(|(r, _)| r == dropped).map_or(0, |d| d.1)).sum();
                assert!(
                    n > 0,
                    "{tag}, {path}: no {dropped} drop counted: {:?}",
                    s.ports.iter().map(|p| &p.total.drops).collect::<Vec<_>>()
                );
            }
            stop_clean(&mut x);
        }

        // The kernel's bridge from the same file.
        fresh();
        let out = r.boxns.command(XFWD).args(["kernel", "bridge", "--config", file, "--keep"]).output().unwrap();
        assert!(out.status.success(), "{tag}: {}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stdout);
        if *carries {
            assert!(said.contains(&format!("bridge fdb add {h2_mac} dev eth5 master static sticky")), "{said}");
            Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
        } else {
            assert!(said.contains("type bridge_slave"), "{said}");
            assert_eq!(pings(&format!("{tag}, kernel")), 0, "{tag}: the kernel carried what the settings stop");
        }
        let out = r.boxns.command(XFWD).args(["kernel", "undo", "bridge"]).output().unwrap();
        assert!(out.status.success());
    }
}

/// `xfwd clear stats`: `show stats` counts from the clear and says since when; the raw
/// `stats-json` request (top, monitor, bench, the metrics endpoint) still counts from start.
#[test]
fn clear_stats_restarts_what_show_stats_counts_and_nothing_else() {
    if !root_or_skip("clear_stats_restarts_what_show_stats_counts_and_nothing_else") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let c = control_path("br-clear");
    let mut x = r.start_xfwd(XFWD, &["bridge", "eth4", "eth5", "--control", &c]).unwrap();
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    r.h1.exec(&["ping", "-c", "10", "-i", "0.05", "-W", "2", rig::H2_ADDR]).unwrap();
    let before = stats(&c).ports[0].total.rx_frames;
    assert!(before >= 10, "{before}");
    let out = Command::new(XFWD).args(["clear", "stats", "--control", &c]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.starts_with("counters cleared at "), "{out:?}");
    let after = stats(&c);
    assert!(after.cleared.is_some());
    assert!(common::show(&c, "stats").starts_with("counters since they were cleared at "));
    let raw: xfwd_dataplane::io::Report =
        serde_json::from_str(&xfwd::control::query(std::path::Path::new(&c), "stats-json").unwrap()).unwrap();
    // Read after: the raw count (from start) less the shown one (from the clear) is at least
    // what was counted before the clear, whatever arrived since.
    let (shown, from_start) = (after.ports[0].total.rx_frames, raw.ports[0].total.rx_frames);
    assert!(
        raw.cleared.is_none() && from_start >= shown + before,
        "{from_start} from start, {shown} since, {before} before"
    );
    stop_clean(&mut x);
}

/// Storm control (`storm_control` in a port's settings): a burst of 1,000 broadcast frames from
/// h1 reaches h2 at the port's 100 a second, on both of xfwd's paths, the rest counted; known
/// unicast from the same port is not limited. The kernel's bridge has no storm control: `xfwd
/// kernel bridge` says it does not apply it, and the burst crosses whole.
#[test]
fn storm_control_caps_the_floods_a_port_takes_a_second_and_counts_the_rest() {
    if !root_or_skip("storm_control_caps_the_floods_a_port_takes_a_second_and_counts_the_rest") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    r.hosts_napi().unwrap();
    let dir = common::TempDir::new("bridge-storm");
    let file = dir.join("storm.toml");
    std::fs::write(&file, "ports = [\"eth4\", \"eth5\"]\n[port.eth4]\nstorm_control = 100\n").unwrap();
    let file = file.to_str().unwrap();
    let h1_mac = common::mac_bytes(&r.h1, "eth0");
    // A burst of 1,000 broadcasts of an experimental EtherType (nobody answers them), sent in
    // ten bursts of 100 over about 0.2 s: at most two one-second windows, 200 frames.
    let storm = |tag: &str| -> usize {
        let cap = capture(r.h2.name(), "eth0", Duration::from_millis(1500));
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..10 {
            let burst = (0..100).map(|i| raw_frame([0xff; 6], h1_mac, 0x88b5, i as u8)).collect();
            common::send_raw(r.h1.name(), "eth0", burst);
            std::thread::sleep(Duration::from_millis(20));
        }
        let got = cap.join().unwrap().iter().filter(|f| f.len() >= 14 && f[12..14] == [0x88, 0xb5]).count();
        eprintln!("{tag}: {got} of 1000 broadcasts crossed");
        got
    };
    for path in ["af-xdp", "xdp"] {
        let c = control_path(&format!("br-storm-{path}"));
        let mut x = r.start_xfwd(XFWD, &["bridge", "--config", file, "--path", path, "--control", &c]).unwrap();
        assert!(x.seen.iter().any(|l| l.contains("eth4: storm control 100 flooded frames/s")), "{path}: {:#?}", x.seen);
        Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
        let before = stats(&c);
        let crossed = storm(path);
        assert!((1..=200).contains(&crossed), "{path}: {crossed} crossed");
        let s = stats(&c);
        let storm_drops = |r: &xfwd_dataplane::io::Report| {
            r.ports[0].total.drops.iter().find(|(n, _)| n == "storm-control").map_or(0, |d| d.1)
        };
        let dropped = storm_drops(&s) - storm_drops(&before);
        // Every broadcast that did not cross was stopped by storm control, not lost elsewhere
        // (h1's own floods meanwhile, an ARP or neighbour discovery message, may be counted
        // too: a few).
        let lost = 1000 - crossed as u64;
        assert!((lost..=lost + 10).contains(&dropped), "{path}: {dropped} counted, {crossed} crossed");
        // Known unicast from the limited port is not limited, the storm just over or not.
        let out = r.h1.command("ping").args(["-c", "3", "-i", "0.2", "-W", "1", rig::H2_ADDR]).output().unwrap();
        assert_eq!(common::answered(&String::from_utf8_lossy(&out.stdout)), 3, "{path}");
        stop_clean(&mut x);
    }
    let out = r.boxns.command(XFWD).args(["kernel", "bridge", "--config", file, "--keep"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("note: eth4: storm_control = 100 is not applied: the kernel's bridge has no storm control"),
        "{said}"
    );
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    let crossed = storm("kernel");
    let out = r.boxns.command(XFWD).args(["kernel", "undo", "bridge"]).output().unwrap();
    assert!(out.status.success());
    assert!(crossed > 200, "the kernel's bridge has no limit: {crossed} crossed");
}
