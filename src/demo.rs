//! `xfwd demo`: the bridge, kernel path against xfwd, on a rig built and removed here.
//!
//! For each queue count asked for, it builds the bridge rig, then alternates the two arms
//! (Linux bridge, then `xfwd bridge`) `--runs` times, each arm carrying `queues` TCP flows from
//! h1 to h2 (one per queue, the client pinned to that queue's CPU) for `--time` seconds, and
//! prints the summed sender rates. The hosts' TX offloads are off in both arms (AF_XDP on veth
//! needs it), so the kernel arm does not get 64 KB TSO segments either.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::rig::{self, Rig};

/// Options of `xfwd demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
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

fn kernel_bridge_up(r: &Rig) -> Result<()> {
    r.boxns.ip(&["link", "add", "br0", "type", "bridge"])?;
    r.boxns.ip(&["link", "set", "eth4", "master", "br0"])?;
    r.boxns.ip(&["link", "set", "eth5", "master", "br0"])?;
    r.boxns.ip(&["link", "set", "br0", "up"])?;
    Ok(())
}

fn kernel_bridge_down(r: &Rig) -> Result<()> {
    r.boxns.ip(&["link", "del", "br0"])?;
    Ok(())
}

/// Runs the demo and prints its table.
pub fn run(args: &DemoArgs) -> Result<()> {
    let exe = std::env::current_exe().context("finding the xfwd binary")?;
    let exe = exe.to_str().context("xfwd's path is not UTF-8")?.to_owned();
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    println!("xfwd demo: Linux bridge vs xfwd bridge on a namespace rig (veth, host TX offload off)");
    println!("{:<7} {:<13} {:>4} {:>8}   xfwd frames (rx on eth4 / via AF_XDP)", "queues", "arm", "run", "Gb/s");
    let mut summary = Vec::new();
    for &queues in &args.queues {
        if queues > ncpu {
            println!("{queues} queues: skipped, this machine has {ncpu} CPU(s)");
            continue;
        }
        let r = Rig::bridge(queues).context("building the rig (needs root, iproute2, ethtool)")?;
        let control = format!("/run/xfwd/demo-{}-{queues}.sock", std::process::id());
        let (mut kernel, mut xfwd) = (Vec::new(), Vec::new());
        for run in 1..=args.runs {
            kernel_bridge_up(&r)?;
            Rig::ping_until(&r.h1, rig::H2_ADDR, Duration::from_secs(5))?;
            let k = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, queues, queues, args.time)?;
            kernel_bridge_down(&r)?;
            println!("{queues:<7} {:<13} {run:>4} {:>8.2}", "linux-bridge", k.gbps());
            kernel.push(k.gbps());

            let q = queues.to_string();
            let mut fwd = r.start_xfwd(&exe, &["bridge", "eth4", "eth5", "--queues", &q, "--control", &control])?;
            Rig::ping_until(&r.h1, rig::H2_ADDR, Duration::from_secs(5))?;
            let x = rig::iperf3_tcp(&r.h2, &r.h1, rig::H2_ADDR, queues, queues, args.time)?;
            let stats = crate::control::query(std::path::Path::new(&control), "stats-json")?;
            let report: xfwd_dataplane::io::forwarder::Report = serde_json::from_str(&stats)?;
            fwd.stop(libc::SIGTERM, Duration::from_secs(10))?;
            let p = &report.ports[0];
            let redirected = p.xdp.iter().find(|(n, _)| n == "redirected").map_or(0, |(_, v)| *v);
            println!("{queues:<7} {:<13} {run:>4} {:>8.2}   {} / {}", "xfwd", x.gbps(), p.total.rx_frames, redirected);
            xfwd.push(x.gbps());
        }
        let (mk, mx) = (median(&mut kernel), median(&mut xfwd));
        summary.push(format!(
            "{queues} queue(s): linux-bridge median {mk:.2} Gb/s, xfwd median {mx:.2} Gb/s, xfwd/kernel {:.2}",
            if mk > 0.0 { mx / mk } else { 0.0 }
        ));
        drop(r);
    }
    println!();
    for s in summary {
        println!("{s}");
    }
    println!(
        "(TCP, {} s per run, sum of sender rates; the rig is for correctness and ratios, not board figures)",
        args.time
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
