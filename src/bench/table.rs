//! The table a person reads at a glance, from a report.

use std::fmt::Write as _;

use super::harness::{flow_rtt, idle_cores, rtt, rtt_idle};
use super::report::{ArmResult, Conditions, Report};
use super::stats::Summary;

/// A failure's error as the table shows it: its first 300 characters (report.json has it all).
const ERROR_CHARS: usize = 300;

/// The median of `values` (`None` when there are none).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// xfwd arms: the workers' busy share of their wall time over the measured part of a run, by
/// their own loop accounting, in percent (median of the runs; `None` for other arms).
fn worker_busy(arm: &ArmResult) -> Option<f64> {
    median(arm.runs.iter().filter_map(|r| r.xfwd.as_ref()?.loop_total()?.busy_fraction()).map(|b| b * 100.0).collect())
}

/// `value` with two decimals, or `-` when it was not measured.
fn fig(value: Option<f64>) -> String {
    crate::render::or_dash(value, 2)
}

fn summary_of(report: &Report, figure: &str, arm: &str) -> Option<Summary> {
    report.stats.iter().find(|f| f.figure == figure)?.summaries.iter().find(|(n, _)| n == arm).map(|(_, s)| *s)
}

/// Renders the report's table and comparisons: the conditions, a row per arm, each xfwd arm's
/// own line, the failed runs, the comparisons with the first arm and the warnings.
pub fn render(report: &Report) -> String {
    let mut s = conditions(&report.conditions);
    let columns = Columns::of(report);
    let _ = writeln!(s, "{}", columns.heading());
    for arm in &report.arms {
        let _ = writeln!(s, "{}", columns.row(report, arm));
    }
    for arm in &report.arms {
        if let Some(line) = xfwd_line(arm) {
            let _ = writeln!(s, "{line}");
        }
    }
    if let Some(line) = polls_line(report) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(line) = start_line(report) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(line) = search_line(report) {
        let _ = writeln!(s, "{line}");
    }
    failures(&mut s, report);
    comparisons(&mut s, report, columns.tcp);
    latency(&mut s, report);
    for w in &report.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// A frame-size sweep's reports (one per size, in the order run) side by side: per arm the
/// median rate in Mpps and Gb/s (the NDR where it was searched, else what was delivered),
/// beside 10G Ethernet's line rate at that size (preamble and gap included).
pub fn sweep(reports: &[Report]) -> String {
    let Some(first) = reports.first() else { return String::new() };
    let figure = first.sweep_figure();
    let arms: Vec<&str> = first.arms.iter().map(|a| a.name.as_str()).collect();
    let width = arms.iter().map(|a| a.len()).max().unwrap_or(0).max(17);
    let mut s = format!(
        "\n{} frame-size sweep: {} (median of runs), Mpps / Gb/s (frames with their FCS)\n{:<6} {:>17}",
        first.conditions.mode,
        if figure == "ndr_pps" { "NDR" } else { "delivered" },
        "frame",
        "10G line"
    );
    for a in &arms {
        let _ = write!(s, " {a:>width$}");
    }
    s.push('\n');
    for r in reports {
        let Some(f) = super::args::FrameSize::of(&r.conditions) else { continue };
        let bytes = f.mean_bytes(r.conditions.ip == 6);
        let cell = |pps: Option<f64>| match pps {
            Some(p) => format!("{:.3} / {:.2}", p / 1e6, p * bytes * 8.0 / 1e9),
            None => "-".into(),
        };
        let _ = write!(s, "{:<6} {:>17}", f.label(), cell(Some(line_rate_pps(bytes))));
        for a in &arms {
            let _ = write!(s, " {:>width$}", cell(summary_of(r, r.sweep_figure(), a).map(|m| m.median)));
        }
        s.push('\n');
    }
    s
}

/// 10G Ethernet's frames per second at `bytes` a frame (FCS included), with the 8-byte
/// preamble and the 12-byte gap each frame takes on the wire.
pub fn line_rate_pps(bytes: f64) -> f64 {
    10e9 / ((bytes + 20.0) * 8.0)
}

/// The lines above the table: what ran, on what, and how (after a blank line).
fn conditions(c: &Conditions) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{} {}{} | {} queue(s), {} flow(s), {} s per run{} | {} | XDP {}, AF_XDP {} | kernel {}",
        c.mode,
        c.test,
        if c.ip == 6 { " over IPv6" } else { "" },
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
    for line in [&c.frame_mix, &c.endpoints, &c.pings, &c.queueing, &c.scale.said, &c.search] {
        if !line.is_empty() {
            let _ = writeln!(s, "{line}");
        }
    }
    s
}

/// What the table's columns show: a TCP test's (Gb/s, the rate received, the flows' RTT and
/// fairness) or a packet-rate test's (kpps, loss).
struct Columns {
    tcp: bool,
    /// The main figure's name among the statistics: `gbps` or `delivered_pps`.
    main: &'static str,
    /// Its unit in the table, and the factor from the statistics' unit to it.
    unit: &'static str,
    scale: f64,
    /// The arm column's width: the longest arm name, at least 6.
    width: usize,
}

impl Columns {
    /// The columns for `report`'s test and arms.
    fn of(report: &Report) -> Columns {
        let tcp = report.conditions.test == "tcp";
        let (main, unit) = if tcp { ("gbps", "Gb/s") } else { ("delivered_pps", "kpps") };
        Columns {
            tcp,
            main,
            unit,
            scale: if tcp { 1.0 } else { 1e-3 },
            width: report.arms.iter().map(|a| a.name.len()).max().unwrap_or(3).max(6),
        }
    }

    /// The columns' heads.
    fn heading(&self) -> String {
        let (w, tcp, unit) = (self.width, self.tcp, self.unit);
        format!(
            "{:<w$} {:>3} {:>4} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6} {:>9} {:>17} {:>11} {:>8} {:>8}",
            "arm",
            "n",
            "fail",
            format!("{unit} med"),
            "mean",
            "sd",
            "µs/pkt",
            "fwd µs",
            "box µs",
            if tcp { "rcvd Gb/s" } else { "loss %" },
            "idle cores",
            "busy %",
            "RTT idle",
            "RTT load p50/p99",
            "pings",
            if tcp { "flow RTT" } else { "" },
            if tcp { "fairness" } else { "" }
        )
    }

    /// An arm's row: its runs, its figures (a dash where one was not measured), its RTTs.
    fn row(&self, report: &Report, arm: &ArmResult) -> String {
        let (w, tcp, scale) = (self.width, self.tcp, self.scale);
        let m = summary_of(report, self.main, &arm.name);
        let cpu = summary_of(report, "us_per_packet", &arm.name);
        let fwd = summary_of(report, "forwarding_us_per_packet", &arm.name);
        let loss = (!arm.runs.is_empty())
            .then(|| arm.runs.iter().map(|r| r.loss).sum::<f64>() / arm.runs.len() as f64 * 100.0);
        let fair: Vec<f64> = arm.runs.iter().filter_map(|r| r.fairness).collect();
        // The median of the runs: one run of senders starved by the scheduler moves a mean.
        let fairness = median(fair);
        let (rtts, pings) = load_rtt(arm);
        format!(
            "{:<w$} {:>3} {:>4} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6} {:>9} {:>17} {:>11} {:>8} {:>8}",
            arm.name,
            arm.runs.len(),
            arm.failed.len(),
            fig(m.map(|m| m.median * scale)),
            fig(m.map(|m| m.mean * scale)),
            fig(m.map(|m| m.stddev * scale)),
            fig(cpu.map(|c| c.median)),
            fig(fwd.map(|f| f.median)),
            fig(summary_of(report, "box_us_per_packet", &arm.name).map(|b| b.median)),
            if tcp { fig(median(arm.runs.iter().filter_map(|r| r.received_gbps).collect())) } else { fig(loss) },
            fig(idle_cores(arm)),
            worker_busy(arm).map_or_else(|| "-".into(), |b| format!("{b:.1}")),
            fig(rtt_idle(arm)),
            rtts,
            pings,
            if tcp { fig(flow_rtt(arm)) } else { String::new() },
            if tcp { fairness.map_or_else(|| "-".into(), |f| format!("{f:.3}")) } else { String::new() }
        )
    }
}

/// An arm's RTT under load as the table shows it: `p50/p99 ms`, and the pings it rests on.
fn load_rtt(arm: &ArmResult) -> (String, String) {
    let load = rtt(arm);
    let rtts = match load.p50_ms {
        Some(p50) => format!("{p50:.2}/{} ms", fig(load.p99_ms)),
        None => "-".into(),
    };
    // Answered of sent: how many samples the percentiles rest on, and how many went missing.
    let pings = match (load.samples, load.sent) {
        (0, _) => "-".into(),
        (n, Some(sent)) => format!("{n}/{sent}"),
        (n, None) => n.to_string(),
    };
    (rtts, pings)
}

/// A line per failed run, with the first [`ERROR_CHARS`] characters of its error.
fn failures(s: &mut String, report: &Report) {
    for arm in &report.arms {
        for f in &arm.failed {
            let mut error: String = f.error.chars().take(ERROR_CHARS).collect();
            if f.error.chars().count() > ERROR_CHARS {
                error.push_str(" … (the whole error is in the report)");
            }
            let _ = writeln!(s, "failed: {} run {}: {error}", arm.name, f.run);
        }
    }
}

/// Each arm against the first, figure by figure (the main figure of the other test left out).
fn comparisons(s: &mut String, report: &Report, tcp: bool) {
    let Some(base) = report.arms.first() else {
        return;
    };
    for fig in &report.stats {
        if fig.figure == "delivered_pps" && tcp || fig.figure == "gbps" && !tcp {
            continue;
        }
        for (name, cmp) in &fig.comparisons {
            let verdict =
                cmp.map_or_else(|| "fewer than 2 measured runs on one side: no statistics".into(), |c| c.sentence());
            let _ = writeln!(s, "{name} vs {}, {}: {verdict}", base.name, fig.figure);
        }
    }
}

/// How many frames the box ports' polls took each, per arm (the median of its runs; `-` where
/// not timed), when any arm's were timed: what `box µs` rests on. A poll's own cost (the
/// schedule, the XDP flush) is shared by its frames, so a sender that hands the box one frame
/// a poll gives a higher figure than one that hands it a NIC's batches.
fn polls_line(report: &Report) -> Option<String> {
    let per_arm: Vec<(&str, Option<f64>)> = report
        .arms
        .iter()
        .map(|a| {
            let each = a.runs.iter().filter_map(|r| r.box_cost).filter(|c| c.polls > 0);
            (a.name.as_str(), median(each.map(|c| c.polled_frames as f64 / c.polls as f64).collect()))
        })
        .collect();
    per_arm.iter().any(|(_, f)| f.is_some()).then(|| {
        let arms: Vec<String> = per_arm.iter().map(|(n, f)| format!("{n} {}", fig(*f))).collect();
        format!("box polls, frames per poll (median of runs): {}", arms.join(", "))
    })
}

/// The quantiles of a latency: q of `samples` (ms), `-` where there are too few for it (fewer
/// than 1 / (1 − q) samples: a p99.9 needs 1,000).
pub fn quantile(samples: &[f64], q: f64) -> Option<f64> {
    if samples.is_empty() || (samples.len() as f64) < (1.0 / (1.0 - q)).round() {
        return None;
    }
    super::stats::percentile(samples, q * 100.0)
}

/// Where an arm did not run at the load asked (`rate` pps): what its sender offered when that
/// fell more than 2 % short (the sender shares the CPUs; the RTT is then at that load, not the
/// one asked), and what it lost above 0.1 % (an overloaded path). Medians of its runs; empty
/// when it ran at the load without loss.
fn load_kept(a: &ArmResult, rate: f64) -> String {
    let offered = median(a.runs.iter().map(|r| r.offered_pps).collect());
    let lost = median(a.runs.iter().map(|r| r.loss * 100.0).collect());
    let mut out = String::new();
    if let Some(o) = offered.filter(|o| *o < 0.98 * rate) {
        let _ = write!(out, ", offered {:.1} kpps: the sender fell short", o / 1e3);
    }
    if let Some(l) = lost.filter(|l| *l > 0.1) {
        let _ = write!(out, ", lost {l:.2} %");
    }
    if out.is_empty() {
        out
    } else {
        format!(" [{}]", &out[2..])
    }
}

/// `--latency`: per load, each arm's RTT under it, pooled over its runs.
fn latency(s: &mut String, report: &Report) {
    if report.latency.is_empty() {
        return;
    }
    let base = report.arms.first().map_or("-", |a| a.name.as_str());
    let _ = writeln!(
        s,
        "latency at fixed loads (pings through the path every 5 ms under the load, pooled over runs), ms p50 / p90 / p99 / p99.9 / max (samples):"
    );
    for at in &report.latency {
        let arms: Vec<String> = at
            .arms
            .iter()
            .map(|a| {
                let v: Vec<f64> = a.runs.iter().flat_map(|r| r.rtt_ms.iter().copied()).collect();
                let q = |x: f64| crate::render::or_dash(quantile(&v, x), 3);
                let max = crate::render::or_dash(v.iter().copied().reduce(f64::max), 3);
                format!(
                    "{} {}/{}/{}/{}/{max} ({}){}",
                    a.name,
                    q(0.5),
                    q(0.9),
                    q(0.99),
                    q(0.999),
                    v.len(),
                    load_kept(a, at.rate_pps)
                )
            })
            .collect();
        let _ = writeln!(s, "  {} % of {base}'s NDR ({:.1} kpps): {}", at.percent, at.rate_pps / 1e3, arms.join("; "));
    }
}

/// With a rate search: each arm's NDR and PDR in kpps (median of its runs, `-` where none was
/// found or searched), how many runs found them, and whether the sender was the limit.
fn search_line(report: &Report) -> Option<String> {
    if !report.arms.iter().flat_map(|a| &a.runs).any(|r| r.search.is_some()) {
        return None;
    }
    let arms: Vec<String> = report
        .arms
        .iter()
        .map(|a| {
            let outcomes: Vec<&super::search::Outcome> = a.runs.iter().filter_map(|r| r.search.as_ref()).collect();
            let med = |f: fn(&super::search::Outcome) -> Option<f64>| {
                let v: Vec<f64> = outcomes.iter().filter_map(|o| f(o)).collect();
                (crate::render::or_dash(median(v.clone()).map(|m| m / 1e3), 1), v.len())
            };
            let ((ndr, n), (pdr, m)) = (med(|o| o.ndr_pps), med(|o| o.pdr_pps));
            let limited =
                if outcomes.iter().any(|o| o.sender_limited) { ", at the sender's flat-out rate" } else { "" };
            let trials: usize = outcomes.iter().map(|o| o.trials.len()).sum();
            let short = outcomes.iter().flat_map(|o| &o.trials).filter(|t| t.short).count();
            let short =
                if short > 0 { format!(", {short} with the sender short of the rate asked") } else { String::new() };
            format!("{}: {ndr} / {pdr} ({n}/{m} of {} runs, {trials} trials{short}{limited})", a.name, outcomes.len())
        })
        .collect();
    Some(format!("NDR / PDR kpps (median of runs): {}", arms.join("; ")))
}

/// With the bench's table: how long each arm took from start to forwarding, medians of its
/// runs — the kernel's `ip -batch` of the table, xfwd's start to ready (after the kernel's load
/// with `fib=kernel`); `None` without a table.
fn start_line(report: &Report) -> Option<String> {
    if report.conditions.scale.said.is_empty() {
        return None;
    }
    let arms: Vec<String> = report
        .arms
        .iter()
        .filter_map(|a| {
            let load = median(a.runs.iter().filter_map(|r| r.table_load_s).collect());
            let ready = median(a.runs.iter().filter_map(|r| r.ready_s).collect());
            let said = match (load, ready) {
                (None, None) => return None,
                (Some(l), None) => format!("kernel's table loaded in {l:.2} s"),
                (None, Some(r)) => format!("ready {r:.2} s after start"),
                (Some(l), Some(r)) => format!("kernel's table loaded in {l:.2} s, then ready {r:.2} s after start"),
            };
            Some(format!("{}: {said}", a.name))
        })
        .collect();
    (!arms.is_empty()).then(|| format!("start to forwarding (median of runs): {}", arms.join("; ")))
}

/// What an xfwd arm's own counters said, summed over its runs: how its workers ran and what
/// its queue management did (`None` for other arms and old reports).
fn xfwd_line(arm: &ArmResult) -> Option<String> {
    let runs: Vec<&super::report::XfwdRun> = arm.runs.iter().filter_map(|r| r.xfwd.as_ref()).collect();
    let first = runs.first()?;
    let sched = match first.rt_priority {
        Some(p) => {
            format!("workers SCHED_FIFO {p}, stepped down {} time(s)", runs.iter().map(|r| r.rt_yields).sum::<u64>())
        }
        None => "workers normal threads".into(),
    };
    let mut p99: Vec<u64> = runs.iter().filter_map(|r| r.sojourn_p99_ns).collect();
    p99.sort_unstable();
    let sojourn = p99.get(p99.len() / 2).map_or_else(|| "-".into(), |ns| format!("{:.3} ms", *ns as f64 / 1e6));
    let aqm = first.aqm.as_deref().map_or_else(String::new, |m| format!(" {m}"));
    let fq = if first.aqm.as_deref() == Some("fq-codel") {
        format!(
            "; flow queues: overflow drops {}, high-water {} frames (most of the runs), collisions {}",
            runs.iter().map(|r| r.fq_overflow).sum::<u64>(),
            runs.iter().map(|r| r.fq_high_water).max().unwrap_or(0),
            runs.iter().map(|r| r.fq_collisions).sum::<u64>()
        )
    } else {
        String::new()
    };
    // The loop accounting over all the runs' measured time.
    let mut total = xfwd_dataplane::load::LoopTotals::default();
    for t in runs.iter().filter_map(|r| r.loop_total()) {
        total.accumulate(&t);
    }
    let preempted = total.preempted_fraction().map_or_else(|| "-".into(), |p| format!("{:.1} %", p * 100.0));
    // The XDP path: what the program forwarded itself against what reached the workers.
    let in_program: Option<u64> = runs.iter().map(|r| r.in_program).sum();
    let refused =
        runs.iter().map(|r| r.egress_refused).sum::<Option<u64>>().map_or_else(|| "-".into(), |n| n.to_string());
    let path = in_program.map_or_else(String::new, |n| {
        let all = n + total.frames;
        let share = if all > 0 { format!("{:.1} %", n as f64 * 100.0 / all as f64) } else { "-".into() };
        format!(
            "; XDP path: {n} frames forwarded in the program, {} through the workers ({share} in the program), {refused} refused by a full egress",
            total.frames
        )
    });
    Some(format!(
        "{}: {sched}; AQM{aqm} dropped {}, marked {}{fq}; sojourn p99 {sojourn} (median of runs); {} unstamped; workers busy {} (preempted {preempted}), {} ns per frame, {} frames per round{path}",
        arm.name,
        runs.iter().map(|r| r.aqm_drops).sum::<u64>(),
        runs.iter().map(|r| r.ecn_marks).sum::<u64>(),
        runs.iter().map(|r| r.unstamped).sum::<u64>(),
        total.busy_fraction().map_or_else(|| "-".into(), |b| format!("{:.1} %", b * 100.0)),
        total.ns_per_frame().map_or_else(|| "-".into(), |n| format!("{n:.0}")),
        total.frames_per_round().map_or_else(|| "-".into(), |n| format!("{n:.1}")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{test_report, test_run, ArmResult, FailedRun, RunResult};

    fn row<'a>(table: &'a str, arm: &str) -> Vec<&'a str> {
        let line = table.lines().find(|l| l.starts_with(&format!("{arm} "))).unwrap_or_else(|| panic!("{table}"));
        line.split_whitespace().collect()
    }

    #[test]
    fn failed_runs_are_shown_and_missing_figures_are_dashes() {
        let r = test_report(vec![
            ArmResult {
                name: "kernel".into(),
                runs: vec![test_run(1, 4.0, 1000), test_run(3, 6.0, 1000)],
                failed: vec![FailedRun {
                    run: 2,
                    error: "iperf3: unable to connect stream: Address already in use".into(),
                }],
            },
            ArmResult {
                name: "xfwd".into(),
                runs: Vec::new(),
                failed: (1..=3).map(|run| FailedRun { run, error: "x".repeat(400) }).collect(),
            },
        ]);
        let t = render(&r);
        // kernel: n 2, 1 failed, figures over its two runs.
        let k = row(&t, "kernel");
        assert_eq!(&k[..6], ["kernel", "2", "1", "5.00", "5.00", "1.41"], "{t}");
        // xfwd: nothing measured, every figure a dash, never 0.
        let x = row(&t, "xfwd");
        assert_eq!(&x[..3], ["xfwd", "0", "3"], "{t}");
        assert!(x[3..].iter().all(|f| *f == "-"), "{t}");
        assert!(t.contains("failed: kernel run 2: iperf3: unable to connect stream: Address already in use"), "{t}");
        for run in 1..=3 {
            assert!(
                t.contains(&format!(
                    "failed: xfwd run {run}: {} … (the whole error is in the report)",
                    "x".repeat(300)
                )),
                "{t}"
            );
        }
        // An arm with nothing measured is not compared.
        assert!(!t.contains("xfwd vs kernel"), "{t}");
    }

    #[test]
    fn rtt_columns_give_the_sample_count_and_the_flows_rtt() {
        let mut runs = vec![test_run(1, 4.0, 1000), test_run(2, 4.0, 1000)];
        runs[0].rtt_ms = (1..=300).map(|u| f64::from(u) / 100.0).collect();
        runs[1].rtt_ms = (301..=600).map(|u| f64::from(u) / 100.0).collect();
        runs[1].flows_rtt = vec![Some(crate::rig::FlowRtt { mean_us: 2_600, min_us: 50, max_us: 9_000 }), None];
        runs[0].pings_sent = Some(305);
        runs[1].pings_sent = Some(300);
        let mut few = test_run(1, 4.0, 1000);
        few.pings_sent = None;
        few.rtt_ms = vec![0.2; 40];
        few.flows_rtt = Vec::new();
        let r = test_report(vec![
            ArmResult { name: "kernel".into(), runs, failed: Vec::new() },
            ArmResult { name: "xfwd".into(), runs: vec![few], failed: Vec::new() },
        ]);
        let t = render(&r);
        // p50/p99 over the 600 pooled samples, answered/sent, then the flows' RTT: the median of
        // 0.4, 0.4 (run 1) and 2.6 ms (run 2; its second flow had none).
        let k = row(&t, "kernel");
        assert_eq!(&k[k.len() - 5..], ["3.00/5.94", "ms", "600/605", "0.40", "1.000"], "{t}");
        // 40 samples are too few for a p99; sent not counted; no flow RTT is a dash, never 0.
        let x = row(&t, "xfwd");
        assert_eq!(&x[x.len() - 5..], ["0.20/-", "ms", "40", "-", "1.000"], "{t}");
        assert!(t.contains("pings") && t.contains("flow RTT"), "{t}");
    }

    #[test]
    fn with_a_table_each_arm_says_how_long_it_took_to_forward() {
        let run = |n, load: Option<f64>, ready: Option<f64>| RunResult {
            table_load_s: load,
            ready_s: ready,
            ..test_run(n, 4.0, 1000)
        };
        let mut r = test_report(vec![
            ArmResult {
                name: "kernel".into(),
                runs: vec![run(1, Some(20.0), None), run(2, Some(22.0), None)],
                failed: Vec::new(),
            },
            ArmResult { name: "xfwd".into(), runs: vec![run(1, None, Some(1.5))], failed: Vec::new() },
            ArmResult { name: "xfwd:fib=kernel".into(), runs: vec![run(1, Some(21.0), Some(2.0))], failed: Vec::new() },
            ArmResult { name: "wire".into(), runs: vec![run(1, None, None)], failed: Vec::new() },
        ]);
        // Without a table, no such line.
        assert!(!render(&r).contains("start to forwarding"));
        r.conditions.scale.said = "table: 1000 IPv4 prefixes".into();
        let t = render(&r);
        assert!(t.contains("table: 1000 IPv4 prefixes"), "{t}");
        assert!(
            t.contains("start to forwarding (median of runs): kernel: kernel's table loaded in 21.00 s; xfwd: ready 1.50 s after start; xfwd:fib=kernel: kernel's table loaded in 21.00 s, then ready 2.00 s after start\n"),
            "{t}"
        );
    }

    #[test]
    fn latency_at_fixed_loads_gives_each_arms_quantiles_where_it_has_the_samples_for_them() {
        let with = |n: usize| {
            let mut r = test_run(1, 1.0, 10);
            r.rtt_ms = (1..=n).map(|i| i as f64 / 1000.0).collect();
            r
        };
        let mut r = test_report(vec![ArmResult {
            name: "kernel".into(),
            runs: vec![test_run(1, 4.0, 10)],
            failed: Vec::new(),
        }]);
        assert!(!render(&r).contains("latency at fixed loads"));
        r.latency = vec![crate::bench::report::LatencyAt {
            percent: 50.0,
            rate_pps: 123_456.0,
            arms: vec![
                ArmResult { name: "kernel".into(), runs: vec![with(2000)], failed: Vec::new() },
                ArmResult { name: "xfwd".into(), runs: vec![with(200)], failed: Vec::new() },
            ],
        }];
        for a in &mut r.latency[0].arms {
            a.runs[0].offered_pps = 123_456.0;
        }
        let t = render(&r);
        assert!(
            t.contains("  50 % of kernel's NDR (123.5 kpps): kernel 1.000/1.800/1.980/1.999/2.000 (2000); xfwd 0.100/0.180/0.198/-/0.200 (200)\n"),
            "{t}"
        );
        // An arm whose sender could not keep the load, or that lost frames at it, says so.
        let xfwd = &mut r.latency[0].arms[1].runs[0];
        (xfwd.offered_pps, xfwd.loss) = (25_000.0, 0.02);
        let t = render(&r);
        assert!(
            t.contains(
                "xfwd 0.100/0.180/0.198/-/0.200 (200) [offered 25.0 kpps: the sender fell short, lost 2.00 %]\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn fairness_is_the_median_of_the_runs() {
        let runs: Vec<_> = [0.2, 0.9, 0.95]
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut r = test_run(i as u32 + 1, 4.0, 1000);
                r.fairness = Some(*f);
                r
            })
            .collect();
        let t = render(&test_report(vec![ArmResult { name: "kernel".into(), runs, failed: Vec::new() }]));
        // The mean would be 0.683: one run of starved senders does not move the median.
        assert_eq!(row(&t, "kernel").last(), Some(&"0.900"), "{t}");
    }

    /// A report with something in every part of the table: the conditions' lines, three arms
    /// (one with xfwd's own counters and a failed run, and the wire, for the forwarding
    /// figure), comparisons and a warning; TCP (`udp`: false) or packet rate.
    fn full_report(udp: bool) -> Report {
        use crate::bench::report::XfwdRun;
        use xfwd_dataplane::load::LoopTotals;
        let run = |run: u32, gbps: f64, packets: u64, k: f64| {
            let mut r = test_run(run, gbps, packets);
            r.rtt_ms = (1..=120).map(|u| f64::from(u) * k / 100.0).collect();
            r.pings_sent = Some(125);
            r.received_gbps = Some(gbps * 0.9);
            r.fairness = Some(0.9 + k / 100.0);
            r.offered_pps = packets as f64;
            r.loss = 0.01 * k;
            r
        };
        let xfwd = |aqm: &str| XfwdRun {
            rt_priority: Some(10),
            rt_yields: 2,
            aqm_drops: 30,
            ecn_marks: 4,
            sojourn_p99_ns: Some(1_234_567),
            unstamped: 5,
            aqm: Some(aqm.into()),
            fq_overflow: 6,
            fq_high_water: 700,
            fq_collisions: 8,
            workers: vec![LoopTotals {
                wall_ns: 2_000_000_000,
                work_ns: 1_000_000_000,
                idle_ns: 1_000_000_000,
                preempted_work_ns: 100_000_000,
                rounds_work: 50_000,
                rounds_idle: 1_000,
                frames: 800_000,
                schedstat: true,
                ..LoopTotals::default()
            }],
            in_program: None,
            egress_refused: None,
        };
        let mut kernel = vec![run(1, 4.0, 1_000, 1.0), run(2, 5.0, 1_100, 2.0), run(3, 6.0, 1_050, 3.0)];
        let mut fast = vec![run(1, 7.0, 2_000, 1.5), run(2, 7.5, 2_100, 2.5), run(3, 8.0, 1_900, 0.5)];
        // The box's own time: measured for the kernel arm and the first xfwd arm, whose third
        // run's polls left frames untimed (no figure from it).
        use crate::bench::report::{BoxCost, RunResult};
        let cost = |r: &RunResult, ns_per: u64, process: Option<u64>, timed: u64| BoxCost {
            poll_ns: r.packets * ns_per,
            polls: r.packets / 8,
            polled_frames: r.packets * timed / 100,
            process_ns: process.map(|p| p * r.packets),
        };
        for r in &mut kernel {
            r.box_cost = Some(cost(r, 650, None, 100));
        }
        for (r, timed) in fast.iter_mut().zip([100, 95, 50]) {
            r.box_cost = Some(cost(r, 300, Some(150), timed));
        }
        fast[0].xfwd = Some(xfwd("fq-codel"));
        fast[1].xfwd = Some(xfwd("fq-codel"));
        fast[2].xfwd = Some(XfwdRun { rt_priority: None, ..xfwd("codel") });
        let mut r = test_report(vec![
            ArmResult { name: "kernel".into(), runs: kernel, failed: Vec::new() },
            ArmResult {
                name: "xfwd:poll=busy".into(),
                runs: fast,
                failed: vec![FailedRun { run: 4, error: "xfwd exited with 1".into() }],
            },
            ArmResult { name: "xfwd".into(), runs: vec![run(1, 6.5, 1_500, 1.0)], failed: Vec::new() },
            ArmResult {
                name: "wire".into(),
                runs: vec![run(1, 9.0, 4_000, 0.2), run(2, 9.5, 4_100, 0.3)],
                failed: Vec::new(),
            },
        ]);
        let c = &mut r.conditions;
        c.ip = 6;
        c.omit_s = 2;
        c.endpoints = "iperf3 at nice 5".into();
        c.pings = "pings every 5 ms".into();
        c.queueing = "queues: as each says".into();
        if udp {
            c.test = "udp64".into();
            c.ip = 4;
            c.omit_s = 0;
        }
        r.warnings.push("port 0 queues did not share the load".into());
        r
    }

    #[test]
    fn an_xdp_path_arm_says_what_share_of_its_frames_the_program_forwarded() {
        let mut r = full_report(false);
        for run in &mut r.arms[1].runs {
            if let Some(x) = run.xfwd.as_mut() {
                x.in_program = Some(2_400_000);
                x.egress_refused = Some(1_000);
            }
        }
        let t = render(&r);
        let line = t.lines().find(|l| l.starts_with("xfwd:poll=busy: ")).unwrap_or_else(|| panic!("{t}"));
        assert!(
            line.ends_with("; XDP path: 7200000 frames forwarded in the program, 2400000 through the workers (75.0 % in the program), 3000 refused by a full egress"),
            "{line}"
        );
        // One run without the count (the AF_XDP path, an older report): no share made up.
        r.arms[1].runs[1].xfwd.as_mut().unwrap().egress_refused = None;
        let t = render(&r);
        assert!(
            t.contains("(75.0 % in the program), - refused by a full egress"),
            "a refusal count missing in a run: {t}"
        );
        r.arms[1].runs[0].xfwd.as_mut().unwrap().in_program = None;
        let t = render(&r);
        assert!(!t.contains("XDP path:"), "{t}");
    }

    /// Every line and column of the table, as it was when `render` was pinned.
    #[test]
    fn a_full_table_is_the_pinned_text() {
        for (udp, pinned) in [
            (false, include_str!("../../tests/fixtures/bench-table-tcp.txt")),
            (true, include_str!("../../tests/fixtures/bench-table-udp.txt")),
        ] {
            let t = render(&full_report(udp));
            for (i, (got, want)) in t.lines().zip(pinned.lines()).enumerate() {
                assert_eq!(got, want, "udp {udp}: line {}", i + 1);
            }
            assert_eq!(t, pinned, "udp {udp}");
        }
    }

    #[test]
    fn a_report_with_no_failure_lists_none() {
        let r = test_report(vec![ArmResult::new("kernel")]);
        let t = render(&r);
        assert!(!t.contains("failed:"), "{t}");
        assert_eq!(&row(&t, "kernel")[..3], ["kernel", "0", "0"]);
    }
}
