//! The reference test across two machines, a real board and a PC: `xfwd load` runs the flows on
//! the PC (servers in one network namespace, clients in another, fixed ports), `xfwd monitor`
//! samples the board's cores and queues. Their JSON is the harness's: `xfwd report` reads what
//! `xfwd load` writes.

use std::io::Write;
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

fn client_command(program: &str) -> std::process::Command {
    std::process::Command::new(program)
}

/// `xfwd load`.
pub fn load(args: &LoadArgs) -> Result<()> {
    let cports: Vec<u16> =
        if args.cports.is_empty() { (0..args.flows).map(|k| 55000 + k).collect() } else { args.cports.clone() };
    let server_ns = args.server_netns.clone().map(Netns::attach);
    let mut report = if args.append && args.out.exists() {
        let text = std::fs::read_to_string(&args.out)?;
        serde_json::from_str::<Report>(&text).with_context(|| format!("{}: not an xfwd report", args.out.display()))?
    } else {
        Report {
            schema: SCHEMA,
            started_unix: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            conditions: Conditions {
                mode: args.mode.clone(),
                test: "tcp".into(),
                queues: 0,
                flows: cports.len() as u32,
                frame: 0,
                time_s: args.time,
                omit_s: args.omit,
                offered_pps: 0,
                kernel: String::new(),
                cpus: 0,
                driver: "two machines (xfwd load)".into(),
                xdp_mode: "-".into(),
                xsk_mode: "-".into(),
                offloads: "as configured on the machines".into(),
                endpoints: "iperf3 on the load machine, as started by xfwd load".into(),
                versions: vec![("xfwd".into(), env!("CARGO_PKG_VERSION").into())],
            },
            arms: Vec::new(),
            stats: Vec::new(),
            warnings: Vec::new(),
        }
    };
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
        let mut servers = Vec::new();
        for k in 0..cports.len() {
            let port = (u32::from(args.port) + k as u32).to_string();
            let mut c = match &server_ns {
                Some(ns) => ns.command("iperf3"),
                None => client_command("iperf3"),
            };
            c.args(["-s", "-1", "-p", &port]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
            servers.push(rig::Spawned { child: c.spawn().context("starting iperf3 -s (is iperf3 installed?)")? });
        }
        std::thread::sleep(Duration::from_millis(500));
        let mut clients = Vec::new();
        for (k, cport) in cports.iter().enumerate() {
            let port = (u32::from(args.port) + k as u32).to_string();
            let (t, o, cp) = (args.time.to_string(), args.omit.to_string(), cport.to_string());
            let mut c = client_command("iperf3");
            c.args(["-c", &args.server, "-p", &port, "--cport", &cp, "-t", &t, "-O", &o, "-J"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            clients.push(c.spawn().context("starting iperf3 -c")?);
        }
        let mut flows_bps = Vec::new();
        for (c, cport) in clients.into_iter().zip(&cports) {
            let out = c.wait_with_output()?;
            let bps = rig::iperf3_sender_bps(&String::from_utf8_lossy(&out.stdout)).with_context(|| {
                format!("flow from client port {cport}: if the port is taken, find its holder with `ss -tnp sport = :{cport}`")
            })?;
            flows_bps.push(bps);
        }
        drop(servers);
        let gbps = flows_bps.iter().sum::<f64>() / 1e9;
        println!(
            "{} run {run}: {gbps:.2} Gb/s ({})",
            args.arm,
            flows_bps.iter().map(|b| format!("{:.2}", b / 1e9)).collect::<Vec<_>>().join(" + ")
        );
        runs.push(RunResult {
            run,
            gbps,
            fairness: jain(&flows_bps),
            flows_bps,
            offered_pps: 0.0,
            delivered_pps: 0.0,
            loss: 0.0,
            packets: 0,
            busy_cpu_s: 0.0,
            us_per_packet: 0.0,
            cpu: Vec::new(),
            cpu_avg: Vec::new(),
            queue_rx: Vec::new(),
            rtt_ms: Vec::new(),
            rtt_idle_ms: Vec::new(),
            idle_busy_cores: None,
        });
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

/// `xfwd monitor`.
pub fn monitor(args: &MonitorArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let before: Vec<Vec<u64>> = args.ports.iter().map(|p| queue_counters(p)).collect();
    let sampler = Sampler::start(args.interval)?;
    let start = Instant::now();
    let mut last = before.clone();
    eprintln!("xfwd monitor: sampling every {:?}; Ctrl-C to stop", args.interval);
    while !stop.load(Ordering::Relaxed) && args.time.is_none_or(|t| start.elapsed() < t) {
        std::thread::sleep(Duration::from_secs(1));
        // Live per-queue packet rates, one line: is every queue used?
        let now: Vec<Vec<u64>> = args.ports.iter().map(|p| queue_counters(p)).collect();
        let line: Vec<String> = args
            .ports
            .iter()
            .zip(now.iter().zip(&last))
            .map(|(p, (n, l))| {
                let q: Vec<String> = n
                    .iter()
                    .zip(l.iter().chain(std::iter::repeat(&0)))
                    .map(|(a, b)| format!("{}", a.saturating_sub(*b)))
                    .collect();
                format!("{p} [{}] pps", q.join(" "))
            })
            .collect();
        eprint!("\r\x1b[2K{}", line.join("  "));
        let _ = std::io::stderr().flush();
        last = now;
    }
    eprintln!();
    let cpu = sampler.stop();
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
    let m = Monitor { schema: 1, interval_ms: args.interval.as_millis() as u64, cpu, queues };
    for (c, avg) in cpu::averages(&m.cpu).iter().enumerate() {
        println!(
            "cpu{c}: usr {:.1} % sys {:.1} % softirq {:.1} % idle {:.1} % other {:.1} %",
            avg.usr, avg.sys, avg.softirq, avg.idle, avg.other
        );
    }
    for (p, q) in &m.queues {
        println!("{p}: packets per queue {q:?}");
        if q.len() > 1 && q.iter().any(|&n| n * 10 < q.iter().copied().max().unwrap_or(0)) {
            println!("warning: {p}: the queues did not share the load");
        }
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&m)?)?;
    println!("samples: {}", args.out.display());
    if m.cpu.is_empty() {
        bail!("no samples were taken (run longer than the interval)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_ethtool_queues;

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
