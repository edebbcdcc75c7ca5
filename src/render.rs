//! Text for people: the periodic one-line-per-port stats, `xfwd show stats` (the tables' are in
//! `show`), and
//! the progress line of `xfwd bench` and `xfwd monitor` (on a terminal only).

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use xfwd_dataplane::io::{PortInfo, PortReport, Report};
use xfwd_dataplane::load::{self, LoopTotals};
use xfwd_dataplane::stats::{CounterRow, PORT_COUNTERS, WORKER_COUNTERS, XSK_COUNTERS};

fn rate(now: u64, before: u64, dt: Duration) -> String {
    let secs = dt.as_secs_f64();
    if secs <= 0.0 {
        return "-".into();
    }
    let r = now.saturating_sub(before) as f64 / secs;
    if r >= 1e6 {
        format!("{:.2} Mpps", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1} kpps", r / 1e3)
    } else {
        format!("{r:.0} pps")
    }
}

fn xdp(p: &PortReport, name: &str) -> u64 {
    p.xdp.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
}

/// One line for one port: totals, rates since `prev` (over `dt`), non-zero drop reasons.
pub fn port_line(p: &PortReport, prev: Option<&PortReport>, dt: Duration) -> String {
    let t = &p.total;
    let mut s =
        format!("{}: rx {} tx {} flooded {} dropped {}", p.name, t.rx_frames, t.tx_frames, t.flooded, t.dropped());
    if let Some(prev) = prev {
        let _ = write!(
            s,
            " | rx {} tx {}",
            rate(t.rx_frames, prev.total.rx_frames, dt),
            rate(t.tx_frames, prev.total.tx_frames, dt)
        );
    }
    for (reason, n) in t.drops.iter().filter(|(_, n)| *n > 0) {
        let _ = write!(s, " {reason}={n}");
    }
    let _ = write!(s, " | xdp redirected {} no-socket {}", xdp(p, "redirected"), xdp(p, "pass-no-socket"));
    if let Some(q) = p.missed_queue {
        let _ = write!(s, " (highest queue {q})");
    }
    if t.xsk.rx_dropped > 0 {
        let _ = write!(s, " xsk-rx-dropped {}", t.xsk.rx_dropped);
    }
    s
}

/// The frame accounting of every UMEM, one line each: a worker's own (per-queue layout), or
/// the one the workers share (per-CPU layout).
pub fn frame_lines(r: &Report) -> Vec<String> {
    r.pools
        .iter()
        .map(|pool| {
            let f = pool.frames;
            // A UMEM of its own per port (per-CPU layout) is named by its port.
            let port = if pool.ports.len() == 1 && r.ports.len() > 1 {
                format!(" on {}", pool.ports[0])
            } else {
                String::new()
            };
            let who = match pool.workers {
                (a, b) if a == b => format!("queue {a}{port}"),
                (a, b) => format!("queues {a}-{b}{port}"),
            };
            format!(
                "{who}: frames total {} free {} queued {} fill {} (ring {} rx {} kernel {}) tx {} (ring {} completion {} kernel {}) unaccounted {}",
                f.total,
                f.free,
                f.queued,
                f.fill,
                f.fill_ring,
                f.rx_ring,
                f.rx_kernel,
                f.tx,
                f.tx_ring,
                f.completion,
                f.tx_kernel,
                f.unaccounted()
            )
        })
        .collect()
}

/// A sojourn quantile of a histogram (the floor of its bucket), `-` where nothing was measured.
fn sojourn(hist: &[u64], q: f64) -> String {
    match xfwd_dataplane::stats::sojourn_quantile(hist, q) {
        None => "-".into(),
        Some(ns) if ns < 1_000 => format!("{ns} ns"),
        Some(ns) if ns < 1_000_000 => format!("{:.0} µs", ns as f64 / 1e3),
        Some(ns) => format!("{:.1} ms", ns as f64 / 1e6),
    }
}

/// `part` as a percentage of `whole`, `-` when `whole` is zero (nothing measured).
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

/// `x` with `digits` decimals, `-` when it was not measured.
pub fn or_dash(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// A worker's loop accounting over the time `t` covers: where its time went, the cost of a
/// frame, and the frames per round with work (see `xfwd_dataplane::load`).
pub fn load_lines(t: &LoopTotals) -> Vec<String> {
    let w = t.wall_ns;
    let preempted = if t.schedstat { percent(t.preempted_ns(), w) } else { "-".into() };
    let mut hist = String::new();
    for (b, n) in t.batches.iter().enumerate().filter(|(_, n)| **n > 0) {
        let lo = load::batch_floor(b);
        let label = match b {
            0 | 1 => lo.to_string(),
            _ if b == load::BATCH_BUCKETS - 1 => format!("{lo}+"),
            _ => format!("{lo}-{}", 2 * lo - 1),
        };
        let _ = write!(hist, "{}{label}: {n}", if hist.is_empty() { "" } else { ", " });
    }
    vec![
        format!(
            "loop since start ({:.1} s): busy {}, idle {}, preempted {}; rounds with work {} (decide {}, tx {}, reap {}), asleep {}",
            w as f64 / 1e9,
            percent(t.busy_ns(), w),
            percent(t.idle_net_ns(), w),
            preempted,
            percent(t.work_ns, w),
            percent(t.decide_ns, w),
            percent(t.tx_ns, w),
            percent(t.reap_ns, w),
            percent(t.sleep_ns, w),
        ),
        format!(
            "  {} ns per frame, {} frames per round with work; rounds {} with work, {} without",
            or_dash(t.ns_per_frame(), 0),
            or_dash(t.frames_per_round(), 1),
            t.rounds_work,
            t.rounds_idle
        ),
        format!("  frames per round: {}", if hist.is_empty() { "-" } else { &hist }),
    ]
}

/// The words of the counters `show stats` prints on a port's first line, as traffic.
const TRAFFIC: [&str; 4] = ["rx-frames", "rx-bytes", "tx-frames", "tx-bytes"];

/// `word value, word value, …` for the counters `rows` of `snap`, in their declared order.
fn listed<'a, S: 'static>(rows: impl Iterator<Item = &'a CounterRow<S>>, snap: &S) -> String {
    rows.map(|c| format!("{} {}", c.word, (c.get)(snap))).collect::<Vec<_>>().join(", ")
}

/// The XDP path's line of `show stats`: its table writes (router) or station writes (bridge)
/// and the egress ports that take no redirected frames.
fn xdp_path_line(s: &mut String, r: &Report, f: &xfwd_dataplane::io::program::fast::FastReport) {
    let failed = f.last_error.as_ref().map_or_else(String::new, |e| format!(" (last: {e})"));
    let off: Vec<&str> = f.no_redirects.iter().filter_map(|&p| r.ports.get(p)).map(|p| p.name.as_str()).collect();
    let off = if off.is_empty() { "none".to_owned() } else { off.join(", ") };
    let _ = if r.neighbors.is_some() {
        writeln!(
            s,
            "xdp path: {} routes, {} tables swapped in whole, {} route and {} neighbour writes, {} failed writes{failed}, {} neighbours left to the workers (no room in the program's maps); egress ports taking no redirects (their frames to the workers): {off}",
            f.routes, f.swaps, f.route_writes, f.neighbor_writes, f.errors, f.left_out
        )
        .and_then(|()| match f.delay_us {
            Some((p50, p99, max)) => {
                writeln!(s, "kernel change to the XDP program: median {p50} µs, p99 {p99} µs, max {max} µs")
            }
            None => Ok(()),
        })
    } else {
        writeln!(
            s,
            "xdp path: {} station writes, {} stations refreshed from the program's forwarding, {} failed writes{failed}, {} stations left to the workers (no room in the program's map); ports taking no redirects (flooding and their frames to the workers): {off}",
            f.neighbor_writes, f.refreshed, f.errors, f.left_out
        )
    };
}

/// The kernel-mirrored routes' lines of `show stats` (kernel mode).
fn kernel_lines(s: &mut String, k: &xfwd_dataplane::routes::kernel::SyncReport) {
    let latency = match k.latency_us {
        Some((p50, p99, max)) => format!("median {p50} µs, p99 {p99} µs, max {max} µs"),
        None => "-".into(),
    };
    let _ = writeln!(
        s,
        "kernel routes: {} mirrored ({} not used), {} notifications, {} updates applied, {} resyncs ({} after overruns, {} after undecoded notifications, {} interrupted dumps), {} whole builds, {} copies, {} failures, {} addresses the XDP map refused; last full sync {} ms",
        k.routes,
        k.ignored,
        k.messages,
        k.updates,
        k.resyncs,
        k.overruns,
        k.undecoded,
        k.dumps_interrupted,
        k.full_builds,
        k.copies,
        k.build_errors,
        k.local_map_errors,
        k.last_sync_us / 1000
    );
    let _ = writeln!(s, "kernel change to workers: {latency}");
    if k.rules_not_followed > 0 {
        let _ = writeln!(
            s,
            "kernel routes: {} policy rule(s) added since start route by tables xfwd does not mirror: the kernel path and xfwd differ for their packets; restart xfwd to be told which",
            k.rules_not_followed
        );
    }
}

/// The full picture for `xfwd show stats`.
pub fn stats_detail(r: &Report, ports: &[PortInfo], all: bool) -> String {
    // Drop reasons and the XDP program's verdicts: those that happened, or (`all`) every one.
    let counts = |c: &[(String, u64)]| {
        let shown: Vec<String> = c.iter().filter(|(_, v)| all || *v > 0).map(|(n, v)| format!("{n} {v}")).collect();
        if shown.is_empty() {
            "none (show stats -a: every one)".to_owned()
        } else {
            shown.join(", ")
        }
    };
    let mut s = String::new();
    if let Some(at) = &r.cleared {
        let _ = writeln!(s, "counters since they were cleared at {at} (xfwd clear stats)");
    }
    for (i, p) in r.ports.iter().enumerate() {
        let t = &p.total;
        let info = ports.get(i);
        let _ = writeln!(
            s,
            "{} (ifindex {}, mac {})",
            p.name,
            info.map_or(0, |i| i.ifindex),
            info.map_or_else(String::new, |i| i.mac.to_string())
        );
        let _ = writeln!(
            s,
            "  rx {} frames {} bytes, tx {} frames {} bytes",
            t.rx_frames, t.rx_bytes, t.tx_frames, t.tx_bytes
        );
        let _ = writeln!(s, "  {}", listed(PORT_COUNTERS.iter().filter(|c| !TRAFFIC.contains(&c.word)), t));
        let _ = writeln!(s, "  drops: {}", counts(&t.drops));
        let _ = writeln!(s, "  xdp: {}", counts(&p.xdp));
        let _ = writeln!(s, "  xsk: {}", listed(XSK_COUNTERS.iter(), &t.xsk));
        for (q, pq) in p.per_queue.iter().enumerate() {
            let _ = writeln!(s, "  queue {q}: rx {} tx {} dropped {}", pq.rx_frames, pq.tx_frames, pq.dropped());
        }
    }
    for q in &r.queues {
        let _ = writeln!(
            s,
            "queue {} on core {}: sojourn p50 {} p99 {} max {}",
            q.queue,
            q.core.map_or_else(|| "-".into(), |c| c.to_string()),
            sojourn(&q.sojourn, 0.5),
            sojourn(&q.sojourn, 0.99),
            sojourn(&q.sojourn, 1.0),
        );
        let _ = writeln!(s, "  {}", listed(WORKER_COUNTERS.iter(), q));
        for line in load_lines(&q.load) {
            let _ = writeln!(s, "  {line}");
        }
    }
    for line in frame_lines(r) {
        let _ = writeln!(s, "{line}");
    }
    if !r.threads.is_empty() {
        let beats: Vec<String> = r
            .threads
            .iter()
            .map(|t| format!("{} {}", t.name, t.age_ms.map_or_else(|| "-".into(), |ms| format!("{ms} ms"))))
            .collect();
        let _ = writeln!(s, "threads, since each last went round its loop: {}", beats.join(", "));
    }
    if let Some(f) = &r.xdp_path {
        xdp_path_line(&mut s, r, f);
    }
    if let Some((n, cap)) = r.neighbors {
        let _ = writeln!(s, "neighbors: {n} of {cap} entries");
        let _ = writeln!(s, "arp: {}", r.arp.iter().map(|(n, v)| format!("{n} {v}")).collect::<Vec<_>>().join(", "));
        if let Some((n, cap)) = r.neighbors6 {
            let _ = writeln!(s, "neighbors6: {n} of {cap} entries");
            let _ =
                writeln!(s, "ndp: {}", r.ndp.iter().map(|(n, v)| format!("{n} {v}")).collect::<Vec<_>>().join(", "));
        }
        if let Some(k) = &r.kernel {
            kernel_lines(&mut s, k);
        }
        let icmp: u64 = r.ports.iter().map(|p| p.total.icmp_sent).sum();
        let limited: u64 = r.queues.iter().map(|q| q.icmp_rate_limited).sum();
        let gleaned: u64 = r.ports.iter().map(|p| p.total.gleaned).sum();
        let _ = writeln!(s, "icmp errors sent {icmp}, rate-limited {limited}; frames gleaned {gleaned}");
    } else {
        let _ = writeln!(s, "fdb: {} of {} entries", r.fdb_entries, r.fdb_capacity);
    }
    if r.xdp_foreign > 0 {
        let _ = writeln!(s, "xdp: {} frames on interfaces that are not ports", r.xdp_foreign);
    }
    s
}

/// A progress line on standard error, redrawn in place: only when standard error is a
/// terminal, so that a file, a pipe or a journal never gets escape codes or half lines.
pub fn progress(line: &str) {
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }
}

/// Clears the progress line (on a terminal; nothing to clear elsewhere).
pub fn progress_done() {
    progress("");
}

/// Writes `line` on standard error in place of the progress line, if one is shown.
pub fn progress_line(line: &str) {
    progress_done();
    eprintln!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use xfwd_dataplane::stats::{PortSnapshot, QueueSnapshot};

    /// Every counter declared in `stats.rs` is in `show stats`, under its word, with its own
    /// value: adding one there is enough for it to be shown.
    #[test]
    fn show_stats_lists_every_declared_counter_with_its_value() {
        let (mut port, mut queue, mut n, mut want) = (PortSnapshot::default(), QueueSnapshot::default(), 1000, vec![]);
        for c in PORT_COUNTERS {
            n += 1;
            *(c.get_mut)(&mut port) = n;
            if !TRAFFIC.contains(&c.word) {
                want.push(format!("{} {n}", c.word));
            }
        }
        for c in XSK_COUNTERS {
            n += 1;
            *(c.get_mut)(&mut port.xsk) = n;
            want.push(format!("{} {n}", c.word));
        }
        for c in WORKER_COUNTERS {
            n += 1;
            *(c.get_mut)(&mut queue) = n;
            want.push(format!("{} {n}", c.word));
        }
        let empty =
            serde_json::json!({"ports": [], "queues": [], "fdb_entries": 0, "fdb_capacity": 0, "xdp_foreign": 0});
        let mut r: Report = serde_json::from_value(empty).unwrap();
        r.ports.push(PortReport {
            name: "eth4".into(),
            total: port.clone(),
            per_queue: vec![port],
            xdp: Vec::new(),
            missed_queue: None,
            driver: None,
            xdp_mode: None,
        });
        r.queues.push(queue);
        let text = stats_detail(&r, &[], true);
        assert!(text.contains("  rx 1001 frames 1002 bytes, tx 1003 frames 1004 bytes\n"), "{text}");
        for w in &want {
            assert!(text.contains(&format!("{w},")) || text.contains(&format!("{w}\n")), "`{w}` not in:\n{text}");
        }
    }
}
