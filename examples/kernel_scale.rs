//! Kernel routes at scale, on the namespace rig (root): a full table (1M IPv4 prefixes, the
//! router benches' synthetic table, none inside the rig's 198.18.0.0/15) in the box's kernel,
//! then `xfwd router` with `[fib] source = "kernel"`:
//!
//! 1. the time from start to `xfwd: ready` (the mirror dumped, the tables built) and the
//!    process's resident memory, beside the same table given as a routes file;
//! 2. a churn of route changes at a paced rate (10,000 a second: deletes and re-adds of 50,000
//!    of the prefixes, through `ip -batch`) while a TCP flow crosses the box, and the
//!    distribution of the delay from a batch's first notification read to the workers' table
//!    switch, as `xfwd show stats` reports it, with one `xfwd show routes` (the kernel's tables
//!    listed, a slice at a time between batches) in the middle of it;
//! 3. how long `xfwd show routes` takes over the whole table, beside `ip route show table all`.
//!
//! ```sh
//! cargo build --release && sudo target/release/examples/kernel_scale [ROUTES] [RATE] [SECONDS] [PATH]
//! ```
//!
//! PATH (`af-xdp`, the default, or `xdp`) is the kernel-mode arm's `--path`; with `xdp` the
//! delay from a change's notification to the XDP program's table is printed too.
//!
//! Prints figures only: nothing here passes or fails.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xfwd::rig::{self, Rig};
use xfwd_dataplane::l3::fib::Prefix;

#[path = "../benches/common/tables.rs"]
#[allow(dead_code, reason = "the destinations and IPv6 serve the benches")]
mod tables;

fn xfwd_exe() -> String {
    std::env::var("XFWD").unwrap_or_else(|_| {
        let me = std::env::current_exe().expect("own path");
        me.parent().and_then(|d| d.parent()).expect("target dir").join("xfwd").display().to_string()
    })
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn stats(control: &str) -> serde_json::Value {
    let out = Command::new(xfwd_exe()).args(["show", "stats", "--json", "--control", control]).output().unwrap();
    serde_json::from_slice(&out.stdout).expect("stats JSON")
}

fn rig() -> Rig {
    let r = Rig::router(1).expect("rig (root)");
    for (a, dev) in [("198.18.10.2/24", "eth5"), ("198.18.30.1/24", "eth4")] {
        r.boxns.ip(&["addr", "add", a, "dev", dev]).unwrap();
    }
    r.boxns.write_file("/proc/sys/net/ipv4/ip_forward", "0").unwrap();
    r
}

/// Feeds `lines` to `ip -batch` in the box, `rate` a second (in slices of 10 ms).
fn paced(r: &Rig, lines: &[String], rate: usize) -> Duration {
    let mut ip = r.boxns.command("ip").args(["-force", "-batch", "-"]).stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = ip.stdin.take().unwrap();
    let per_slice = (rate / 100).max(1);
    let start = Instant::now();
    for (i, chunk) in lines.chunks(per_slice).enumerate() {
        let due = start + Duration::from_millis(10 * i as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        stdin.write_all(chunk.join("").as_bytes()).unwrap();
    }
    drop(stdin);
    ip.wait().unwrap();
    start.elapsed()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let rate: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let secs: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10);
    let path = args.get(4).map_or("af-xdp", String::as_str);
    let rig_net: Prefix = "198.18.0.0/15".parse().unwrap();
    let mut rng = tables::Rng(0x9E37_79B9_7F4A_7C15);
    let mut table: Vec<Prefix> =
        tables::prefixes(n + n / 10, &mut rng).into_iter().filter(|p| !p.overlaps(&rig_net)).collect();
    table.sort();
    table.dedup();
    table.truncate(n);
    println!("table: {} IPv4 prefixes, none in {rig_net}", table.len());

    // 1. Start-up against a routes file, then against the kernel.
    let dir = std::env::temp_dir().join(format!("xfwd-kernel-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let routes_txt: String = table.iter().map(|p| format!("{p} via 198.18.30.2\n")).collect();
    std::fs::write(dir.join("routes.txt"), &routes_txt).unwrap();
    std::fs::write(
        dir.join("file.toml"),
        "routes_file = \"routes.txt\"\n[[interface]]\nname = \"eth5\"\naddresses = [\"198.18.10.2/24\"]\n[[interface]]\nname = \"eth4\"\naddresses = [\"198.18.30.1/24\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("kernel.toml"),
        "[fib]\nsource = \"kernel\"\n[[interface]]\nname = \"eth5\"\n[[interface]]\nname = \"eth4\"\n",
    )
    .unwrap();
    let exe = xfwd_exe();
    {
        let r = Rig::router(1).expect("rig (root)");
        let control = format!("/run/xfwd/scale-file-{}.sock", std::process::id());
        let start = Instant::now();
        let mut x = r
            .start_xfwd(
                &exe,
                &["router", "--config", &dir.join("file.toml").display().to_string(), "--control", &control],
            )
            .unwrap();
        let ready = start.elapsed();
        let pid = x.proc.child.id();
        println!(
            "routes_file: ready in {:.2} s, resident {} MiB (peak {} MiB)",
            ready.as_secs_f64(),
            status_kib(pid, "VmRSS:") >> 10,
            status_kib(pid, "VmHWM:") >> 10
        );
        let _ = x.stop(libc::SIGTERM, Duration::from_secs(30));
    }
    let r = rig();
    let started = Instant::now();
    let lines: Vec<String> =
        table.iter().map(|p| format!("route replace {p} via 198.18.30.2 proto static\n")).collect();
    let loaded = paced(&r, &lines, usize::MAX / 2);
    println!("kernel: {} routes loaded by ip -batch in {:.1} s", lines.len(), loaded.as_secs_f64());
    let _ = started;
    let control = format!("/run/xfwd/scale-kernel-{}.sock", std::process::id());
    if path == "xdp" {
        r.hosts_napi().expect("GRO on the hosts' ends: NAPI for redirected frames");
    }
    let start = Instant::now();
    let config = dir.join("kernel.toml").display().to_string();
    let mut x = r.start_xfwd(&exe, &["router", "--config", &config, "--control", &control, "--path", path]).unwrap();
    let ready = start.elapsed();
    let pid = x.proc.child.id();
    let k = &stats(&control)["kernel"];
    println!(
        "kernel mirror: ready in {:.2} s (first sync {} ms: dump and build), {} routes mirrored, resident {} MiB (peak {} MiB)",
        ready.as_secs_f64(),
        k["last_sync_us"].as_u64().unwrap_or(0) / 1000,
        k["routes"],
        status_kib(pid, "VmRSS:") >> 10,
        status_kib(pid, "VmHWM:") >> 10
    );

    // 3 (before the churn, which runs it again): `show routes` over the whole table, beside
    // `ip route show table all`.
    let listed = |what: &str| {
        let t = Instant::now();
        let out = Command::new(&exe).args(["show", "routes", "--control", &control]).output().unwrap();
        let lines = out.stdout.iter().filter(|b| **b == b'\n').count();
        println!("{what}: xfwd show routes: {lines} lines in {:.2} s", t.elapsed().as_secs_f64());
    };
    listed("show routes, idle");
    let t = Instant::now();
    let out = r.boxns.ip(&["route", "show", "table", "all"]).unwrap();
    let lines = out.stdout.iter().filter(|b| **b == b'\n').count();
    println!("ip route show table all: {lines} lines in {:.2} s", t.elapsed().as_secs_f64());

    // 2. Churn under traffic.
    let churn: Vec<String> = table
        .iter()
        .step_by((table.len() / 50_000).max(1))
        .take(50_000)
        .flat_map(|p| [format!("route del {p}\n"), format!("route add {p} via 198.18.30.2 proto static\n")])
        .cycle()
        .take(rate * secs)
        .collect();
    let before = stats(&control)["kernel"].clone();
    let (took, tcp) = std::thread::scope(|s| {
        let tcp = s.spawn(|| rig::iperf3_tcp(&r.h1, &r.h2, "198.18.10.1", 1, 1, secs as u32 + 2));
        // A listing in the middle of the churn: the changes must not wait behind it.
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(secs as u64 / 2));
            listed("show routes, during the churn");
        });
        std::thread::sleep(Duration::from_millis(500));
        let took = paced(&r, &churn, rate);
        (took, tcp.join().unwrap())
    });
    std::thread::sleep(Duration::from_millis(500));
    let k = stats(&control)["kernel"].clone();
    let d = |f: &str| k[f].as_u64().unwrap_or(0) - before[f].as_u64().unwrap_or(0);
    println!(
        "churn: {} changes in {:.1} s ({:.0}/s offered) with a TCP flow at {}; {} notifications, {} table switches, {} copies (spare still read), {} whole builds, {} resyncs",
        churn.len(),
        took.as_secs_f64(),
        churn.len() as f64 / took.as_secs_f64(),
        tcp.map_or("-".into(), |t| format!("{:.2} Gb/s", t.gbps())),
        d("messages"),
        d("updates"),
        d("copies"),
        d("full_builds"),
        d("resyncs"),
    );
    println!("notification to table switch, whole run (bucket upper bound µs: batches):");
    if let Some(h) = k["latency_histogram"].as_array() {
        for b in h {
            println!("  <= {:>8} µs: {}", b[0], b[1]);
        }
    }
    println!("  median / p99 / max: {}", k["latency_us"]);
    if path == "xdp" {
        let x = stats(&control)["xdp_path"].clone();
        println!("notification to the XDP program's table, median / p99 / max µs: {}", x["delay_us"]);
    }
    let _ = x.stop(libc::SIGTERM, Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
}
