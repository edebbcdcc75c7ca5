//! `xfwd demo`: the kernel path against xfwd, bridge and router, on a rig built and removed here.
//!
//! For each mode and queue count asked for, it builds the rig, then alternates the two arms
//! (kernel, then xfwd) `--runs` times. Each run carries TCP flows with fixed client ports (the
//! bridge: one per queue; the router: four, as in the reference test), each client pinned to
//! its queue's CPU, for `--time` seconds, and records the summed sender rates and the whole
//! machine's busy CPU time per packet delivered to the hosts (from /proc/stat and the hosts'
//! interface counters). The hosts' TX offloads are off in both arms (AF_XDP on veth needs it),
//! so the kernel arm does not get 64 KB TSO segments either. The full A/B harness with
//! statistics, plots and packet-rate runs grows out of this.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::rig::{self, Netns, Rig, TcpResult};

const RIG_ROUTER: &str = include_str!("../config/examples/rig-router.toml");

/// Options of `xfwd demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Modes to compare, e.g. bridge,router.
    #[arg(long, value_delimiter = ',', default_value = "bridge,router")]
    pub mode: Vec<String>,
    /// Queue counts to try, e.g. 1,2.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub queues: Vec<u32>,
    /// Seconds per TCP run.
    #[arg(long, default_value_t = 5)]
    pub time: u32,
    /// Runs per arm (interleaved kernel, xfwd, kernel, xfwd, ...).
    #[arg(long, default_value_t = 2)]
    pub runs: u32,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Busy and total jiffies of the whole machine, from the first line of /proc/stat.
fn cpu_jiffies() -> Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat")?;
    let line = text.lines().next().context("/proc/stat is empty")?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}

fn rx_packets(ns: &Netns) -> Result<u64> {
    let out = ns.exec(&["cat", "/sys/class/net/eth0/statistics/rx_packets"])?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

/// One measured run: rates, and CPU-µs per packet delivered to either host.
struct Run {
    tcp: TcpResult,
    us_per_packet: f64,
}

fn measure(r: &Rig, server: &Netns, client: &Netns, addr: &str, flows: u32, queues: u32, secs: u32) -> Result<Run> {
    let hz = 100.0; // USER_HZ: /proc/stat counts in 1/100 s on Linux
    let (b0, _) = cpu_jiffies()?;
    let p0 = rx_packets(&r.h1)? + rx_packets(&r.h2)?;
    let tcp = rig::iperf3_tcp(server, client, addr, flows, queues, secs)?;
    let (b1, _) = cpu_jiffies()?;
    let p1 = rx_packets(&r.h1)? + rx_packets(&r.h2)?;
    let busy_s = (b1 - b0) as f64 / hz;
    let pkts = (p1 - p0).max(1) as f64;
    Ok(Run { tcp, us_per_packet: busy_s * 1e6 / pkts })
}

fn kernel_bridge(r: &Rig, up: bool) -> Result<()> {
    if up {
        r.boxns.ip(&["link", "add", "br0", "type", "bridge"])?;
        r.boxns.ip(&["link", "set", "eth4", "master", "br0"])?;
        r.boxns.ip(&["link", "set", "eth5", "master", "br0"])?;
        r.boxns.ip(&["link", "set", "br0", "up"])?;
    } else {
        r.boxns.ip(&["link", "del", "br0"])?;
    }
    Ok(())
}

/// The kernel twin of config/examples/rig-router.toml.
fn kernel_router(r: &Rig, up: bool) -> Result<()> {
    for (dev, addrs) in [("eth5", ["198.18.10.2/24", "198.18.11.2/24"]), ("eth4", ["198.18.30.1/24", "198.18.31.1/24"])]
    {
        if up {
            for a in addrs {
                r.boxns.ip(&["addr", "add", a, "dev", dev])?;
            }
        } else {
            r.boxns.ip(&["addr", "flush", "dev", dev])?;
        }
    }
    r.boxns.exec(&["sysctl", "-qw", &format!("net.ipv4.ip_forward={}", u8::from(up))])?;
    Ok(())
}

/// Runs the demo and prints its table.
pub fn run(args: &DemoArgs) -> Result<()> {
    let exe = std::env::current_exe().context("finding the xfwd binary")?;
    let exe = exe.to_str().context("xfwd's path is not UTF-8")?.to_owned();
    // The rig's router file ships in the binary, so the demo runs from anywhere.
    std::fs::create_dir_all("/run/xfwd")?;
    let config = std::path::PathBuf::from(format!("/run/xfwd/demo-{}-rig-router.toml", std::process::id()));
    std::fs::write(&config, RIG_ROUTER)?;
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!("xfwd demo: the kernel path vs xfwd on a namespace rig (veth, host TX offload off, TCP)");
    println!(
        "{:<7} {:<7} {:<8} {:>4} {:>6} {:>8} {:>9}",
        "mode", "queues", "arm", "run", "flows", "Gb/s", "CPU µs/pkt"
    );
    let mut summary = Vec::new();
    for mode in &args.mode {
        let router = match mode.as_str() {
            "bridge" => false,
            "router" => true,
            other => anyhow::bail!("--mode {other}: expected bridge or router"),
        };
        for &queues in &args.queues {
            if queues > ncpu {
                println!("{mode} {queues} queues: skipped, this machine has {ncpu} CPU(s)");
                continue;
            }
            let r = if router { Rig::router(queues) } else { Rig::bridge(queues) }
                .context("building the rig (needs root, iproute2, ethtool, iperf3)")?;
            // Bridge: h1 → h2, one flow per queue. Router: h2 (clients) → h1, four flows.
            let (server, client, addr, flows) =
                if router { (&r.h1, &r.h2, "198.18.10.1", 4) } else { (&r.h2, &r.h1, rig::H2_ADDR, queues) };
            let control = format!("/run/xfwd/demo-{}-{mode}-{queues}.sock", std::process::id());
            let (mut kg, mut xg, mut kc, mut xc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for run in 1..=args.runs {
                if router {
                    kernel_router(&r, true)?
                } else {
                    kernel_bridge(&r, true)?
                }
                Rig::ping_until(client, addr, Duration::from_secs(5))?;
                let k = measure(&r, server, client, addr, flows, queues, args.time)?;
                if router {
                    kernel_router(&r, false)?
                } else {
                    kernel_bridge(&r, false)?
                }
                println!(
                    "{mode:<7} {queues:<7} {:<8} {run:>4} {flows:>6} {:>8.2} {:>9.2}",
                    "kernel",
                    k.tcp.gbps(),
                    k.us_per_packet
                );
                kg.push(k.tcp.gbps());
                kc.push(k.us_per_packet);

                let q = queues.to_string();
                let mut fwd = if router {
                    r.start_xfwd(
                        &exe,
                        &[
                            "router",
                            "--config",
                            config.to_str().unwrap_or_default(),
                            "--queues",
                            &q,
                            "--control",
                            &control,
                        ],
                    )?
                } else {
                    r.start_xfwd(&exe, &["bridge", "eth4", "eth5", "--queues", &q, "--control", &control])?
                };
                Rig::ping_until(client, addr, Duration::from_secs(5))?;
                let x = measure(&r, server, client, addr, flows, queues, args.time)?;
                fwd.stop(libc::SIGTERM, Duration::from_secs(10))?;
                println!(
                    "{mode:<7} {queues:<7} {:<8} {run:>4} {flows:>6} {:>8.2} {:>9.2}",
                    "xfwd",
                    x.tcp.gbps(),
                    x.us_per_packet
                );
                xg.push(x.tcp.gbps());
                xc.push(x.us_per_packet);
            }
            let (mk, mx) = (median(&mut kg), median(&mut xg));
            let (ck, cx) = (median(&mut kc), median(&mut xc));
            summary.push(format!(
                "{mode} {queues} queue(s), {flows} flow(s): kernel {mk:.2} Gb/s {ck:.2} µs/pkt | xfwd {mx:.2} Gb/s {cx:.2} µs/pkt | xfwd/kernel: {:.2}× throughput, {:.2}× CPU per packet",
                if mk > 0.0 { mx / mk } else { 0.0 },
                if ck > 0.0 { cx / ck } else { 0.0 }
            ));
        }
    }
    let _ = std::fs::remove_file(&config);
    println!();
    println!("medians of {} run(s) per arm:", args.runs);
    for s in summary {
        println!("  {s}");
    }
    println!(
        "(TCP, {} s per run, sum of sender rates; CPU = the whole machine's busy time per packet delivered to \
         either host, generator and receiver included; the rig ranks paths, it does not predict board figures)",
        args.time
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{cpu_jiffies, median};

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn proc_stat_is_read() {
        let (busy, total) = cpu_jiffies().unwrap();
        assert!(total > 0 && busy <= total);
    }
}
