//! The reference test across two machines, a real board and a PC: `xfwd load` runs the flows on
//! the PC (servers in one network namespace, clients in another, fixed ports), `xfwd monitor`
//! samples the board's cores and queues. Their JSON is the harness's: `xfwd report` reads what
//! `xfwd load` writes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::bench::cpu::{self, Sample, Sampler};
use crate::bench::report::{ArmResult, Conditions, Report, RunResult, SCHEMA};
use crate::bench::stats::jain;
use crate::rig::{self, Netns};

/// Options of `xfwd load`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// The servers' address (e.g. 192.168.10.1).
    #[arg(long)]
    pub server: String,
    /// Network namespace the iperf3 servers run in (e.g. isolated_ns); default: this one.
    #[arg(long)]
    pub server_netns: Option<String>,
    /// Client ports, one per flow, as the reference chose them for RSS (e.g.
    /// 55000,55002,55006,55001); default: 55000, 55001, … for --flows.
    #[arg(long, value_delimiter = ',')]
    pub cports: Vec<u16>,
    /// Flows, when --cports is not given.
    #[arg(long, default_value_t = 4)]
    pub flows: u16,
    /// First server port (flow k uses this + k).
    #[arg(long, default_value_t = 5201)]
    pub port: u16,
    /// Seconds per run, and seconds omitted at its start.
    #[arg(long, default_value_t = 30)]
    pub time: u32,
    /// See --time.
    #[arg(long, default_value_t = 5)]
    pub omit: u32,
    /// Runs.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Name of the arm these runs are (kernel, xfwd, …).
    #[arg(long, default_value = "run")]
    pub arm: String,
    /// Report file; with --append, the arm's runs are added to an existing one.
    #[arg(long, default_value = "report.json")]
    pub out: PathBuf,
    /// Add to the report in --out instead of replacing it.
    #[arg(long)]
    pub append: bool,
    /// `router` or `bridge`, for the record.
    #[arg(long, default_value = "router")]
    pub mode: String,
}

/// The report `xfwd load` adds its runs to: `--out` again with `--append`, else a new one for
/// `flows` flows.
fn load_report(args: &LoadArgs, flows: u32) -> Result<Report> {
    Ok(if args.append && args.out.exists() {
        let text = std::fs::read_to_string(&args.out)?;
        serde_json::from_str::<Report>(&text).with_context(|| format!("{}: not an xfwd report", args.out.display()))?
    } else {
        Report {
            schema: SCHEMA,
            started_unix: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            conditions: Conditions {
                mode: args.mode.clone(),
                test: "tcp".into(),
                ip: if args.server.contains(':') { 6 } else { 4 },
                queues: 0,
                flows,
                frame: 0,
                frame_mix: String::new(),
                search: String::new(),
                time_s: args.time,
                omit_s: args.omit,
                offered_pps: 0,
                kernel: String::new(),
                cpus: 0,
                driver: "two machines (xfwd load)".into(),
                xdp_mode: "-".into(),
                xsk_mode: "-".into(),
                offloads: "as configured on the machines".into(),
                endpoints: format!(
                    "iperf3 on the load machine at nice {}, clients started together, not pinned",
                    rig::ENDPOINT_NICE
                ),
                pings: String::new(),
                queueing: String::new(),
                scale: Default::default(),
                versions: vec![("xfwd".into(), env!("CARGO_PKG_VERSION").into())],
            },
            arms: Vec::new(),
            stats: Vec::new(),
            warnings: Vec::new(),
            latency: Vec::new(),
        }
    })
}

/// One run of `xfwd load` as the report keeps it: the flows' rates and RTTs, what was
/// received, the measured part's span; nothing of the box (it is another machine's).
fn load_run(run: u32, tcp: rig::TcpResult, args: &LoadArgs) -> RunResult {
    // The measured part begins once the omitted seconds are over and lasts --time.
    let started_unix_ms = tcp.started_unix_ms + u64::from(args.omit) * 1000;
    let (flows_bps, flows_rtt) = (tcp.flows_bps, tcp.flows_rtt);
    let received: Vec<f64> = tcp.flows_received_bytes.iter().map(|&b| b as f64).collect();
    let gbps = flows_bps.iter().sum::<f64>() / 1e9;
    println!(
        "{} run {run}: {gbps:.2} Gb/s ({})",
        args.arm,
        flows_bps.iter().map(|b| format!("{:.2}", b / 1e9)).collect::<Vec<_>>().join(" + ")
    );
    RunResult {
        run,
        gbps,
        fairness: jain(&received),
        received_gbps: Some(received.iter().sum::<f64>() * 8.0 / f64::from(args.time.max(1)) / 1e9),
        flows_bps,
        flows_rtt,
        offered_pps: 0.0,
        delivered_pps: 0.0,
        loss: 0.0,
        packets: 0,
        busy_cpu_s: 0.0,
        us_per_packet: 0.0,
        box_cost: None,
        cpu: Vec::new(),
        cpu_avg: Vec::new(),
        queue_rx: Vec::new(),
        rtt_ms: Vec::new(),
        pings_sent: None,
        rtt_idle_ms: Vec::new(),
        idle_busy_cores: None,
        started_unix_ms: Some(started_unix_ms),
        ended_unix_ms: Some(started_unix_ms + u64::from(args.time) * 1000),
        xfwd: None,
        table_load_s: None,
        ready_s: None,
        search: None,
    }
}

/// `xfwd load`.
pub fn load(args: &LoadArgs) -> Result<()> {
    let cports: Vec<u16> =
        if args.cports.is_empty() { (0..args.flows).map(|k| 55000 + k).collect() } else { args.cports.clone() };
    let server_ns = args.server_netns.clone().map_or_else(Netns::here, Netns::attach);
    let client_ns = Netns::here();
    let mut report = load_report(args, cports.len() as u32)?;
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        eprintln!(
            "xfwd load: {} run {run}/{}: {} flow(s) to {} for {} s",
            args.arm,
            args.runs,
            cports.len(),
            args.server,
            args.time
        );
        let tcp = rig::run_flows(&rig::Flows {
            server: &server_ns,
            client: &client_ns,
            server_addr: &args.server,
            server_port0: u32::from(args.port),
            client_ports: cports.iter().map(|&p| u32::from(p)).collect(),
            streams: 1,
            queues: None,
            secs: args.time,
            omit: args.omit,
            // Another machine's sockets are waited for, never destroyed.
            destroy_lingering: false,
        })
        .with_context(|| format!("{} run {run}", args.arm))?;
        runs.push(load_run(run, tcp, args));
    }
    match report.arms.iter_mut().find(|a| a.name == args.arm) {
        Some(a) => a.runs.extend(runs),
        None => report.arms.push(ArmResult { runs, ..ArmResult::new(&args.arm) }),
    }
    report.compute_stats();
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)?)?;
    println!("{}", crate::bench::table::render(&report));
    println!("report: {}", args.out.display());
    Ok(())
}

/// Options of `xfwd monitor`.
#[derive(clap::Args, Debug, Clone)]
pub struct MonitorArgs {
    /// Ports whose per-queue receive counters to follow (from `ethtool -S`).
    #[arg(long, value_delimiter = ',', default_value = "eth4,eth5")]
    pub ports: Vec<String>,
    /// Sampling interval (the reference used top -d 0.5).
    #[arg(long, default_value = "500ms", value_parser = xfwd_config::parse_duration)]
    pub interval: Duration,
    /// Stop after this long (default: at SIGINT/SIGTERM).
    #[arg(long, value_parser = xfwd_config::parse_duration)]
    pub time: Option<Duration>,
    /// Where to write the samples.
    #[arg(long, default_value = "monitor.json")]
    pub out: PathBuf,
    /// The control socket of an xfwd running on this box: its workers' loop accounting (busy
    /// share, ns per frame) is sampled beside the CPU when it answers.
    #[arg(long, default_value = crate::control::DEFAULT_PATH)]
    pub control: PathBuf,
}

/// What `xfwd monitor` writes (schema 1).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Monitor {
    /// Schema version.
    pub schema: u32,
    /// Sampling interval, ms.
    pub interval_ms: u64,
    /// Per-core samples.
    pub cpu: Vec<Sample>,
    /// Per port: (name, packets received per queue over the whole run).
    pub queues: Vec<(String, Vec<u64>)>,
    /// Wall-clock time sampling started, ms since the Unix epoch: samples' `t_ms` count from it.
    #[serde(default)]
    pub started_unix_ms: Option<u64>,
    /// (t_ms, packets received by all the ports so far), at each interval: what the box
    /// forwarded, for the CPU cost per packet of a run.
    #[serde(default)]
    pub packets: Vec<(u64, u64)>,
    /// (t_ms, each xfwd worker's loop accounting since it started), once a second while an
    /// xfwd answered on the control socket: a worker's real load, which a spinning worker's CPU
    /// share does not show (empty: no xfwd answered).
    #[serde(default)]
    pub workers: Vec<(u64, Vec<xfwd_dataplane::load::LoopTotals>)>,
}

/// Each worker's loop accounting, from the xfwd answering on `control` (`None`: none does).
fn worker_loads(control: &std::path::Path) -> Option<Vec<xfwd_dataplane::load::LoopTotals>> {
    let json = crate::control::query(control, "stats-json").ok()?;
    let rep: xfwd_dataplane::io::Report = serde_json::from_str(&json).ok()?;
    Some(rep.queues.iter().map(|q| q.load).collect())
}

/// Milliseconds since the Unix epoch, now.
fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Packets received by `ports` so far (sysfs `rx_packets`; a port that cannot be read counts 0).
fn rx_packets(ports: &[String]) -> u64 {
    ports
        .iter()
        .filter_map(|p| std::fs::read_to_string(format!("/sys/class/net/{p}/statistics/rx_packets")).ok())
        .filter_map(|t| t.trim().parse::<u64>().ok())
        .sum()
}

/// The value of a cumulative counter sampled at `points` (time, value) at time `t`, by linear
/// interpolation between the samples around it; `None` outside them.
fn counter_at(points: &[(u64, u64)], t: u64) -> Option<f64> {
    let after = points.iter().position(|&(pt, _)| pt >= t)?;
    let (t1, v1) = points[after];
    if t1 == t {
        return Some(v1 as f64);
    }
    let (t0, v0) = *points.get(after.checked_sub(1)?)?;
    Some(v0 as f64 + (v1 as f64 - v0 as f64) * (t - t0) as f64 / (t1 - t0) as f64)
}

/// Fills each run of `arm` that has wall-clock times (from `xfwd load`) with what the box's
/// monitor `m` saw during it: the per-core samples that ended inside the run, their averages,
/// the busy CPU-seconds they add up to, the packets the box's ports received, and the CPU
/// cost per packet. Returns what could not be matched, in words (the two machines' clocks
/// must agree: see the runbook in docs/doctor-and-board.md).
pub fn join_monitor(arm: &mut ArmResult, m: &Monitor) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(t0) = m.started_unix_ms else {
        problems
            .push(format!("{}: the monitor file has no start time (an older xfwd monitor): nothing joined", arm.name));
        return problems;
    };
    let interval_s = m.interval_ms as f64 / 1000.0;
    for run in &mut arm.runs {
        let (Some(start), Some(end)) = (run.started_unix_ms, run.ended_unix_ms) else {
            problems.push(format!("{} run {}: no wall-clock times (not from xfwd load)", arm.name, run.run));
            continue;
        };
        if start < t0 {
            problems.push(format!(
                "{} run {}: it began before the monitor did: start the monitor first (or the clocks disagree)",
                arm.name, run.run
            ));
            continue;
        }
        let (from, to) = (start - t0, end.saturating_sub(t0));
        let monitored_until = m.packets.last().map_or(0, |p| p.0).min(m.cpu.last().map_or(0, |s| s.t_ms));
        if to > monitored_until {
            problems.push(format!(
                "{} run {}: the monitor stopped before the run ended: stop the monitor after the load",
                arm.name, run.run
            ));
            continue;
        }
        // A sample covers the interval before its time: take those whose middle is inside.
        let samples: Vec<Sample> = m
            .cpu
            .iter()
            .filter(|s| s.t_ms > from + m.interval_ms / 2 && s.t_ms <= to + m.interval_ms / 2)
            .map(|s| Sample { t_ms: s.t_ms - from, cpus: s.cpus.clone() })
            .collect();
        if samples.is_empty() {
            problems.push(format!(
                "{} run {}: no monitor sample falls in it: did the monitor run then, and do the two machines' clocks agree?",
                arm.name, run.run
            ));
            continue;
        }
        run.busy_cpu_s = samples
            .iter()
            .map(|s| s.cpus.iter().map(|c| (100.0 - c.idle).max(0.0) / 100.0 * interval_s).sum::<f64>())
            .sum();
        run.cpu_avg = cpu::averages(&samples);
        run.cpu = samples;
        match (counter_at(&m.packets, from), counter_at(&m.packets, to)) {
            (Some(a), Some(b)) if b > a => {
                run.packets = (b - a).round() as u64;
                run.us_per_packet = run.busy_cpu_s * 1e6 / (b - a);
            }
            _ => problems.push(format!(
                "{} run {}: the monitor counted no packets in it: its CPU is joined, its cost per packet is not",
                arm.name, run.run
            )),
        }
    }
    problems
}

/// Per-queue receive packet counters from `ethtool -S` text, whatever the driver calls them
/// (`rx_queue_3_packets`, `rx-3.packets`, `queue_3_rx_packets`, …): by queue index.
pub fn parse_ethtool_queues(text: &str) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else { continue };
        let Ok(value) = value.trim().parse::<u64>() else { continue };
        let Some(q) = queue_of(&name.trim().to_ascii_lowercase()) else { continue };
        if out.len() <= q {
            out.resize(q + 1, 0);
        }
        out[q] += value;
    }
    out
}

/// The queue index of a per-queue RX packet counter's name, in the shapes drivers use:
/// `rx_queue_N_packets` (ixgbe, i40e, virtio), `rx-N.packets` (bnxt, ice), `rxN_packets` (mlx5),
/// `queue_N_rx_packets`. Anything else (`rx_prio0_packets`, `rx0_lro_packets`,
/// `rx_65_to_127_octet_packets`, XDP counters) is not one.
fn queue_of(name: &str) -> Option<usize> {
    let num = |s: &str| if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) { s.parse().ok() } else { None };
    if let Some(n) = name.strip_prefix("rx_queue_").and_then(|r| r.strip_suffix("_packets")) {
        return num(n);
    }
    if let Some(n) = name.strip_prefix("rx-").and_then(|r| r.strip_suffix(".packets")) {
        return num(n);
    }
    if let Some(n) = name.strip_prefix("queue_").and_then(|r| r.strip_suffix("_rx_packets")) {
        return num(n);
    }
    name.strip_prefix("rx").and_then(|r| r.strip_suffix("_packets")).and_then(num)
}

fn queue_counters(port: &str) -> Vec<u64> {
    std::process::Command::new("ethtool")
        .args(["-S", port])
        .output()
        .map(|o| parse_ethtool_queues(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default()
}

/// Each port's packets per queue since `last`, as the live line shows them.
fn queue_rates(ports: &[String], now: &[Vec<u64>], last: &[Vec<u64>]) -> Vec<String> {
    ports
        .iter()
        .zip(now.iter().zip(last))
        .map(|(p, (n, l))| {
            let q: Vec<String> = n
                .iter()
                .zip(l.iter().chain(std::iter::repeat(&0)))
                .map(|(a, b)| format!("{}", a.saturating_sub(*b)))
                .collect();
            format!("{p} [{}] pps", q.join(" "))
        })
        .collect()
}

/// The monitor's summary: each CPU's shares, each worker's loop figures, each port's packets
/// per queue (and whether the queues shared the load).
fn print_monitor(m: &Monitor) {
    for (c, avg) in cpu::averages(&m.cpu).iter().enumerate() {
        println!(
            "cpu{c}: usr {:.1} % sys {:.1} % softirq {:.1} % idle {:.1} % other {:.1} %",
            avg.usr, avg.sys, avg.softirq, avg.idle, avg.other
        );
    }
    if let (Some((_, first)), Some((_, last))) = (m.workers.first(), m.workers.last()) {
        for (i, (a, b)) in last.iter().zip(first).enumerate() {
            let d = a.since(b);
            println!(
                "xfwd worker {i}: busy {}, preempted {}, {} ns per frame, {} frames per round",
                crate::render::percent(d.busy_ns(), d.wall_ns),
                d.preempted_fraction().map_or_else(|| "-".into(), |p| format!("{:.1} %", p * 100.0)),
                crate::render::or_dash(d.ns_per_frame(), 0),
                crate::render::or_dash(d.frames_per_round(), 1)
            );
        }
    }
    for (p, q) in &m.queues {
        println!("{p}: packets per queue {q:?}");
        if q.len() > 1 && q.iter().any(|&n| n * 10 < q.iter().copied().max().unwrap_or(0)) {
            println!("warning: {p}: the queues did not share the load");
        }
    }
}

/// `xfwd monitor`.
pub fn monitor(args: &MonitorArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let before: Vec<Vec<u64>> = args.ports.iter().map(|p| queue_counters(p)).collect();
    let started_unix_ms = unix_ms();
    let sampler = Sampler::start(args.interval)?;
    let start = Instant::now();
    let mut packets = vec![(0, rx_packets(&args.ports))];
    let mut workers: Vec<(u64, Vec<xfwd_dataplane::load::LoopTotals>)> =
        worker_loads(&args.control).map(|w| (0, w)).into_iter().collect();
    let mut last = before.clone();
    let mut last_line = Instant::now();
    eprintln!("xfwd monitor: sampling every {:?}; Ctrl-C to stop", args.interval);
    while !stop.load(Ordering::Relaxed) && args.time.is_none_or(|t| start.elapsed() < t) {
        std::thread::sleep(args.interval.min(Duration::from_secs(1)));
        packets.push((start.elapsed().as_millis() as u64, rx_packets(&args.ports)));
        if last_line.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last_line = Instant::now();
        // Live per-queue packet rates, one line: is every queue used?
        let now: Vec<Vec<u64>> = args.ports.iter().map(|p| queue_counters(p)).collect();
        let mut line = queue_rates(&args.ports, &now, &last);
        if let Some(now) = worker_loads(&args.control) {
            let t = start.elapsed().as_millis() as u64;
            // Busy share of each worker over the last second.
            if let Some((_, prev)) = workers.last() {
                let busy: Vec<String> = now
                    .iter()
                    .zip(prev)
                    .map(|(n, p)| {
                        n.since(p).busy_fraction().map_or_else(|| "-".into(), |b| format!("{:.0} %", b * 100.0))
                    })
                    .collect();
                line.push(format!("workers busy [{}]", busy.join(" ")));
            }
            workers.push((t, now));
        }
        crate::render::progress(&line.join("  "));
        last = now;
    }
    // The last figures stay on the terminal.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    // Told to stop (after the load, as the runbook has it): the CPU and packet samples are
    // taken on until one ends at or after this moment, so that a run which ended just before
    // the signal is covered whole, not refused as outlasting the monitor.
    let stopped_at = start.elapsed();
    let cpu = sampler.stop_after(stopped_at);
    packets.push((start.elapsed().as_millis() as u64, rx_packets(&args.ports)));
    // A last sample of the workers, so that their figures cover the whole run.
    if let Some(now) = worker_loads(&args.control) {
        workers.push((start.elapsed().as_millis() as u64, now));
    }
    let after: Vec<Vec<u64>> = args.ports.iter().map(|p| queue_counters(p)).collect();
    let queues = args
        .ports
        .iter()
        .zip(after.iter().zip(&before))
        .map(|(p, (a, b))| {
            (
                p.clone(),
                a.iter().zip(b.iter().chain(std::iter::repeat(&0))).map(|(x, y)| x.saturating_sub(*y)).collect(),
            )
        })
        .collect();
    let m = Monitor {
        schema: 1,
        interval_ms: args.interval.as_millis() as u64,
        cpu,
        queues,
        started_unix_ms: Some(started_unix_ms),
        packets,
        workers,
    };
    print_monitor(&m);
    std::fs::write(&args.out, serde_json::to_string_pretty(&m)?)?;
    println!("samples: {}", args.out.display());
    if m.cpu.is_empty() {
        bail!("no samples were taken (run longer than the interval)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cpu::Shares;

    fn half_busy(t_ms: u64) -> Sample {
        let c = Shares { usr: 0.0, sys: 0.0, softirq: 50.0, idle: 50.0, other: 0.0 };
        Sample { t_ms, cpus: vec![c, c] }
    }

    fn run(n: u32, start: Option<u64>, end: Option<u64>) -> RunResult {
        RunResult { started_unix_ms: start, ended_unix_ms: end, ..crate::bench::report::test_run(n, 4.0, 0) }
    }

    #[test]
    fn a_monitors_samples_are_matched_to_the_runs_by_wall_clock_time() {
        // Sampling from t = 1 s (Unix ms 1000) every 0.5 s; two CPUs half busy; 2,000 packets/s.
        let m = Monitor {
            schema: 1,
            interval_ms: 500,
            cpu: (1..=10).map(|i| half_busy(i * 500)).collect(),
            queues: Vec::new(),
            started_unix_ms: Some(1000),
            packets: (0..=10).map(|i| (i * 500, i * 1000)).collect(),
            workers: Vec::new(),
        };
        let mut arm = ArmResult::new("kernel");
        arm.runs = vec![
            run(1, Some(2000), Some(4000)),
            run(2, Some(500), Some(1500)),      // before the monitor began
            run(3, Some(60_000), Some(61_000)), // after it ended
            run(4, None, None),                 // not from xfwd load
        ];
        let before = arm.runs.clone();
        let problems = join_monitor(&mut arm, &m);
        let r = &arm.runs[0];
        // The run is 1 s..3 s of the monitor's time: the samples ending at 1.5, 2, 2.5 and 3 s.
        assert_eq!(r.cpu.iter().map(|s| s.t_ms).collect::<Vec<_>>(), [500, 1000, 1500, 2000]);
        assert!((r.busy_cpu_s - 2.0).abs() < 1e-9, "4 samples x 2 CPUs x 50 % x 0.5 s: {}", r.busy_cpu_s);
        assert_eq!(r.packets, 4000);
        assert!((r.us_per_packet - 500.0).abs() < 1e-9, "{}", r.us_per_packet);
        assert_eq!(r.cpu_avg.len(), 2);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("run 2") && problems[0].contains("before the monitor"));
        assert!(problems[1].contains("run 3") && problems[1].contains("stopped before the run ended"));
        assert!(problems[2].contains("run 4") && problems[2].contains("no wall-clock times"));
        assert_eq!(arm.runs[1..], before[1..], "runs that could not be matched are left as they were");
        // An older monitor file without a start time joins nothing, and says so.
        let old = Monitor { started_unix_ms: None, ..m };
        let mut arm2 = ArmResult::new("xfwd");
        arm2.runs = vec![run(1, Some(2000), Some(4000))];
        assert_eq!(join_monitor(&mut arm2, &old).len(), 1);
        assert!(arm2.runs[0].cpu.is_empty());
    }

    #[test]
    fn counters_are_interpolated_between_samples() {
        let p = [(0, 0), (1000, 100), (2000, 300)];
        assert_eq!(counter_at(&p, 500), Some(50.0));
        assert_eq!(counter_at(&p, 1000), Some(100.0));
        assert_eq!(counter_at(&p, 1500), Some(200.0));
        assert_eq!(counter_at(&p, 2500), None);
        assert_eq!(counter_at(&[(100, 5)], 50), None);
    }

    #[test]
    fn queue_counters_of_several_drivers() {
        // ixgbe/i40e style, mlx5 style, and veth's own.
        let ixgbe = "NIC statistics:\n     rx_packets: 100\n     rx_queue_0_packets: 60\n     rx_queue_0_bytes: 9000\n     rx_queue_1_packets: 40\n";
        assert_eq!(parse_ethtool_queues(ixgbe), vec![60, 40]);
        let mlx = "     rx0_packets: 5\n     rx1_packets: 7\n     rx1_xdp_drop: 3\n     rx_prio0_packets: 99\n     rx0_lro_packets: 4\n";
        assert_eq!(parse_ethtool_queues(mlx), vec![5, 7]);
        let tg3 = "     rx_65_to_127_octet_packets: 1000\n     rx-0.packets: 3\n";
        assert_eq!(parse_ethtool_queues(tg3), vec![3]);
        let veth =
            "NIC statistics:\n     peer_ifindex: 4\n     rx_queue_0_xdp_packets: 12\n     rx_queue_1_xdp_packets: 9\n";
        assert_eq!(parse_ethtool_queues(veth), Vec::<u64>::new(), "XDP-only counters are not RX packets");
        assert_eq!(parse_ethtool_queues("rx_packets: 100\n"), Vec::<u64>::new());
    }
}
