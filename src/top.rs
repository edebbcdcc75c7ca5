//! `xfwd top`: a live view of a running xfwd — per port rates, drops by reason, each worker's
//! real load and the rings' fill — refreshed every interval from its control socket.
//!
//! On a terminal it takes the screen (crossterm: raw mode, alternate screen) and quits on `q`
//! (or Esc, Ctrl-C); otherwise it prints plain blocks of lines, one per interval, for logs and
//! pipes. The text of a frame is built by [`frame`], which reads two snapshots and nothing else.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use xfwd_dataplane::io::Report;

use crate::render::{or_dash, percent};

/// `xfwd top`'s options.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// The running xfwd's control socket.
    #[arg(long, default_value = crate::control::DEFAULT_PATH)]
    pub control: PathBuf,
    /// Time between refreshes.
    #[arg(long, default_value = "1s", value_parser = xfwd_config::parse_duration)]
    pub interval: Duration,
    /// Stop after this many refreshes [default: run until q, or until interrupted].
    #[arg(long)]
    pub count: Option<u64>,
}

/// `n` per second over `secs`, with a k/M/G suffix; `-` when not measured.
fn per_sec(n: Option<u64>, secs: f64, unit: &str) -> String {
    match n {
        Some(n) if secs > 0.0 => {
            let r = n as f64 / secs;
            let (v, p) = if r >= 1e9 {
                (r / 1e9, "G")
            } else if r >= 1e6 {
                (r / 1e6, "M")
            } else if r >= 1e3 {
                (r / 1e3, "k")
            } else {
                (r, "")
            };
            format!("{v:.1} {p}{unit}")
        }
        _ => "-".into(),
    }
}

/// The lines of one refresh: `now`, with rates since `prev` taken `dt` before (the first
/// refresh has no rates: `-`).
pub fn frame(now: &Report, prev: Option<&Report>, dt: Duration) -> Vec<String> {
    let secs = dt.as_secs_f64();
    let mut out = Vec::new();
    out.push(format!(
        "{:<10} {:>12} {:>14} {:>12} {:>14} {:>12}",
        "port", "rx pkt/s", "rx bit/s", "tx pkt/s", "tx bit/s", "dropped/s"
    ));
    let mut drops: Vec<(String, u64)> = Vec::new();
    for (i, p) in now.ports.iter().enumerate() {
        let t = &p.total;
        let b = prev.and_then(|r| r.ports.get(i)).map(|q| &q.total);
        let d = |f: fn(&xfwd_dataplane::stats::PortSnapshot) -> u64| b.map(|b| f(t).saturating_sub(f(b)));
        out.push(format!(
            "{:<10} {:>12} {:>14} {:>12} {:>14} {:>12}",
            p.name,
            per_sec(d(|s| s.rx_frames), secs, ""),
            per_sec(d(|s| s.rx_bytes * 8), secs, "b"),
            per_sec(d(|s| s.tx_frames), secs, ""),
            per_sec(d(|s| s.tx_bytes * 8), secs, "b"),
            per_sec(d(|s| s.dropped()), secs, ""),
        ));
        if let Some(b) = b {
            for ((name, n), (_, m)) in t.drops.iter().zip(&b.drops) {
                let k = n.saturating_sub(*m);
                if k == 0 {
                    continue;
                }
                match drops.iter_mut().find(|(r, _)| r == name) {
                    Some((_, v)) => *v += k,
                    None => drops.push((name.clone(), k)),
                }
            }
        }
    }
    drops.sort_by_key(|d| std::cmp::Reverse(d.1));
    let drops = if prev.is_none() {
        "-".to_owned()
    } else if drops.is_empty() {
        "none".to_owned()
    } else {
        drops.iter().map(|(r, n)| format!("{r} {}", per_sec(Some(*n), secs, ""))).collect::<Vec<_>>().join(", ")
    };
    out.push(format!("drops/s by reason: {drops}"));
    out.push(String::new());
    out.push(format!(
        "{:<6} {:>5} {:>8} {:>10} {:>9} {:>12} {:>9} {:>12} {:>10}",
        "worker", "core", "busy", "preempted", "ns/frame", "frames/round", "sleeps/s", "sojourn p99", "fq frames"
    ));
    for (i, q) in now.queues.iter().enumerate() {
        let before = prev.and_then(|r| r.queues.get(i));
        // Since the previous refresh; the first covers the time since start.
        let l = before.map_or(q.load, |b| q.load.since(&b.load));
        let mut hist = q.sojourn.clone();
        if let Some(b) = before {
            for (h, o) in hist.iter_mut().zip(&b.sojourn) {
                *h = h.saturating_sub(*o);
            }
        }
        let p99 = xfwd_dataplane::stats::sojourn_quantile(&hist, 0.99)
            .map_or_else(|| "-".into(), |ns| format!("{:.3} ms", ns as f64 / 1e6));
        out.push(format!(
            "{:<6} {:>5} {:>8} {:>10} {:>9} {:>12} {:>9} {:>12} {:>10}",
            q.queue,
            q.core.map_or_else(|| "-".into(), |c| c.to_string()),
            percent(l.busy_ns(), l.wall_ns),
            if l.schedstat { percent(l.preempted_ns(), l.wall_ns) } else { "-".into() },
            or_dash(l.ns_per_frame(), 0),
            or_dash(l.frames_per_round(), 1),
            per_sec(before.map(|b| q.sleeps.saturating_sub(b.sleeps)), secs, ""),
            p99,
            q.fq_backlog,
        ));
    }
    out.push(String::new());
    for (i, pool) in now.pools.iter().enumerate() {
        let f = pool.frames;
        out.push(format!(
            "umem {i} ({}): {} frames: free {}, queued {}, fill ring {}, rx ring {}, tx ring {}, completion ring {}, in the kernel {}",
            pool.ports.join(","),
            f.total,
            f.free,
            f.queued,
            f.fill_ring,
            f.rx_ring,
            f.tx_ring,
            f.completion,
            f.rx_kernel + f.tx_kernel
        ));
    }
    out
}

/// Restores the terminal when dropped (on every way out, errors included).
struct Screen;

impl Screen {
    fn take() -> Result<Screen> {
        terminal::enable_raw_mode().context("putting the terminal in raw mode")?;
        let s = Screen;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(s)
    }

    fn draw(&self, title: &str, lines: &[String]) -> Result<()> {
        let mut o = std::io::stdout().lock();
        execute!(o, cursor::MoveTo(0, 0), terminal::Clear(terminal::ClearType::All))?;
        let width = terminal::size().map_or(200, |(w, _)| usize::from(w));
        for l in std::iter::once(title).chain(lines.iter().map(String::as_str)) {
            let l: String = l.chars().take(width).collect();
            write!(o, "{l}\r\n")?;
        }
        o.flush()?;
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

fn fetch(control: &Path) -> Result<Report> {
    let json = crate::control::query(control, "stats-json")?;
    serde_json::from_str(&json).context("xfwd's stats JSON")
}

/// Waits up to `d` for a key; returns whether it asks to quit.
fn quit_within(d: Duration) -> Result<bool> {
    let deadline = Instant::now() + d;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !event::poll(left)? {
            return Ok(false);
        }
        if let Event::Key(k) = event::read()? {
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
            if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                return Ok(true);
            }
        }
    }
}

/// Runs `xfwd top`.
pub fn run(args: &TopArgs) -> Result<()> {
    let tty = std::io::stdout().is_terminal();
    let mut prev: Option<(Report, Instant)> = None;
    let screen = if tty { Some(Screen::take()?) } else { None };
    let mut shown = 0u64;
    loop {
        let now = fetch(&args.control)?;
        let at = Instant::now();
        let lines = frame(&now, prev.as_ref().map(|(r, _)| r), prev.as_ref().map_or(Duration::ZERO, |(_, t)| at - *t));
        let title = format!(
            "xfwd top: {} every {:.1} s{}",
            args.control.display(),
            args.interval.as_secs_f64(),
            if tty { ", q quits" } else { "" }
        );
        match &screen {
            Some(s) => s.draw(&title, &lines)?,
            None => {
                let mut o = std::io::stdout().lock();
                writeln!(o, "{title}")?;
                for l in &lines {
                    writeln!(o, "{l}")?;
                }
                writeln!(o)?;
                o.flush()?;
            }
        }
        prev = Some((now, at));
        shown += 1;
        if args.count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
        if screen.is_some() {
            if quit_within(args.interval)? {
                return Ok(());
            }
        } else {
            std::thread::sleep(args.interval);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xfwd_dataplane::io::PortReport;
    use xfwd_dataplane::stats::{PortSnapshot, QueueSnapshot};

    fn report(rx: u64, drops: u64, busy_ns: u64, wall_ns: u64) -> Report {
        let mut total = PortSnapshot { rx_frames: rx, rx_bytes: rx * 1000, tx_frames: rx, ..Default::default() };
        total.drops = vec![("no-route".into(), drops), ("ttl-exceeded".into(), 0)];
        let port = |name: &str| PortReport {
            name: name.into(),
            total: total.clone(),
            per_queue: vec![total.clone()],
            xdp: Vec::new(),
            missed_queue: None,
            driver: None,
            xdp_mode: None,
        };
        let mut q = QueueSnapshot { queue: 0, core: Some(1), ..Default::default() };
        q.load.wall_ns = wall_ns;
        q.load.work_ns = busy_ns;
        q.load.frames = rx;
        serde_json::from_value(serde_json::json!({
            "ports": [serde_json::to_value(port("eth4")).unwrap(), serde_json::to_value(port("eth5")).unwrap()],
            "queues": [serde_json::to_value(q).unwrap()],
            "fdb_entries": 0, "fdb_capacity": 0, "xdp_foreign": 0
        }))
        .unwrap()
    }

    #[test]
    fn a_refresh_gives_rates_since_the_last_and_dashes_before_it() {
        let a = report(1_000, 0, 0, 1_000_000_000);
        let b = report(3_000, 10, 250_000_000, 2_000_000_000);
        let first = frame(&a, None, Duration::ZERO).join("\n");
        assert!(first.contains("eth4") && first.contains("eth5"), "{first}");
        assert!(first.contains("drops/s by reason: -"), "{first}");
        let next = frame(&b, Some(&a), Duration::from_secs(2)).join("\n");
        // 2,000 frames of 1,000 bytes in 2 s: 1 kpkt/s, 8 Mb/s.
        assert!(next.contains("1.0 k") && next.contains("8.0 Mb"), "{next}");
        // 10 drops on each port in 2 s.
        assert!(next.contains("drops/s by reason: no-route 10.0"), "{next}");
        // The worker was busy 250 ms of the last second: 25 %, 125 µs for each of 2,000 frames.
        let w = next.lines().find(|l| l.starts_with("0 ")).unwrap();
        assert!(w.contains("25.0 %") && w.contains("125000"), "{w}");
    }
}
