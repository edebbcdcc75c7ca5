//! The table a person reads at a glance, from a report.

use std::fmt::Write as _;

use super::harness::{idle_cores, rtt, rtt_idle};
use super::report::Report;
use super::stats::Summary;

fn summary_of(report: &Report, figure: &str, arm: &str) -> Option<Summary> {
    report.stats.iter().find(|f| f.figure == figure)?.summaries.iter().find(|(n, _)| n == arm).map(|(_, s)| *s)
}

/// Renders the report's table and comparisons.
pub fn render(report: &Report) -> String {
    let c = &report.conditions;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{} {} | {} queue(s), {} flow(s), {} s per run{} | {} | XDP {}, AF_XDP {} | kernel {}",
        c.mode,
        c.test,
        c.queues,
        c.flows,
        c.time_s,
        if c.omit_s > 0 { format!(" ({} omitted)", c.omit_s) } else { String::new() },
        c.driver,
        c.xdp_mode,
        c.xsk_mode,
        c.kernel
    );
    let _ = writeln!(s, "{}", c.offloads);
    let tcp = c.test == "tcp";
    let (main, unit) = if tcp { ("gbps", "Gb/s") } else { ("delivered_pps", "kpps") };
    let scale = if tcp { 1.0 } else { 1e-3 };
    let w = report.arms.iter().map(|a| a.name.len()).max().unwrap_or(3).max(6);
    let _ = writeln!(
        s,
        "{:<w$} {:>3} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>17} {:>8}",
        "arm",
        "n",
        format!("{unit} med"),
        "mean",
        "sd",
        "µs/pkt",
        "fwd µs",
        if tcp { "" } else { "loss %" },
        "idle cores",
        "RTT idle",
        "RTT load p50/p99",
        if tcp { "fairness" } else { "" }
    );
    for arm in &report.arms {
        let m = summary_of(report, main, &arm.name);
        let cpu = summary_of(report, "us_per_packet", &arm.name);
        let fwd = summary_of(report, "forwarding_us_per_packet", &arm.name);
        let loss = arm.runs.iter().map(|r| r.loss).sum::<f64>() / arm.runs.len().max(1) as f64 * 100.0;
        let fair: Vec<f64> = arm.runs.iter().filter_map(|r| r.fairness).collect();
        let fairness = if fair.is_empty() {
            String::new()
        } else {
            format!("{:.3}", fair.iter().sum::<f64>() / fair.len() as f64)
        };
        let rtts = rtt(arm).map_or_else(|| "-".into(), |(p50, p99)| format!("{p50:.2}/{p99:.2} ms"));
        let idle = rtt_idle(arm).map_or_else(|| "-".into(), |p| format!("{p:.2}"));
        let idle_cores = idle_cores(arm).map_or_else(|| "-".into(), |c| format!("{c:.2}"));
        let _ = writeln!(
            s,
            "{:<w$} {:>3} {:>9.2} {:>9.2} {:>8.2} {:>9.2} {:>9} {:>9} {:>10} {:>9} {:>17} {:>8}",
            arm.name,
            arm.runs.len(),
            m.map_or(0.0, |m| m.median * scale),
            m.map_or(0.0, |m| m.mean * scale),
            m.map_or(0.0, |m| m.stddev * scale),
            cpu.map_or(0.0, |c| c.median),
            fwd.map_or_else(|| "-".into(), |f| format!("{:.2}", f.median)),
            if tcp { String::new() } else { format!("{loss:.2}") },
            idle_cores,
            idle,
            rtts,
            fairness
        );
    }
    if let Some(base) = report.arms.first() {
        for fig in &report.stats {
            if fig.figure == "delivered_pps" && tcp || fig.figure == "gbps" && !tcp {
                continue;
            }
            for (name, cmp) in &fig.comparisons {
                let verdict = cmp.map_or_else(|| "fewer than 2 runs: no statistics".into(), |c| c.sentence());
                let _ = writeln!(s, "{name} vs {}, {}: {verdict}", base.name, fig.figure);
            }
        }
    }
    for w in &report.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
