//! Per-core CPU time from /proc/stat, sampled at a fixed interval during a run, as the reference
//! measurement did with `top -d 0.5`: user, system, softirq, idle, and the rest (nice, iowait,
//! irq, steal) as `other`, in percent of each interval.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// One CPU's cumulative times, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// user (guest time included, as the kernel counts it)
    pub user: u64,
    /// nice
    pub nice: u64,
    /// system
    pub system: u64,
    /// idle
    pub idle: u64,
    /// iowait
    pub iowait: u64,
    /// hardware interrupts
    pub irq: u64,
    /// software interrupts (where the kernel forwards packets)
    pub softirq: u64,
    /// stolen by the hypervisor
    pub steal: u64,
}

/// Parses /proc/stat: the per-CPU lines (`cpu0`, `cpu1`, …) in CPU order, without the total.
pub fn parse(text: &str) -> Result<Vec<CpuTimes>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let Some(idx) = name.strip_prefix("cpu").filter(|r| !r.is_empty()) else { continue };
        let idx: usize = idx.parse().with_context(|| format!("/proc/stat: `{name}`"))?;
        let v: Vec<u64> =
            words.map(|w| w.parse().with_context(|| format!("/proc/stat {name}: `{w}`"))).collect::<Result<_>>()?;
        let f = |i: usize| v.get(i).copied().unwrap_or(0);
        if out.len() <= idx {
            out.resize(idx + 1, CpuTimes::default());
        }
        out[idx] = CpuTimes {
            user: f(0),
            nice: f(1),
            system: f(2),
            idle: f(3),
            iowait: f(4),
            irq: f(5),
            softirq: f(6),
            steal: f(7),
        };
    }
    anyhow::ensure!(!out.is_empty(), "/proc/stat has no per-CPU lines");
    Ok(out)
}

/// Reads /proc/stat now.
pub fn read() -> Result<Vec<CpuTimes>> {
    parse(&std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?)
}

/// One CPU's use over an interval, percent.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Shares {
    /// user
    pub usr: f64,
    /// system
    pub sys: f64,
    /// softirq
    pub softirq: f64,
    /// idle
    pub idle: f64,
    /// nice + iowait + irq + steal
    pub other: f64,
}

impl Shares {
    /// The shares between two readings of the same CPU (all zero if no time passed).
    pub fn between(a: &CpuTimes, b: &CpuTimes) -> Shares {
        // Each field's own advance: the kernel's idle and iowait counts may step back a tick
        // between two reads, so the total is the sum of the advances (not the difference of
        // the totals), which keeps the shares summing to 100.
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
        let (usr, sys, softirq, idle) =
            (d(a.user, b.user), d(a.system, b.system), d(a.softirq, b.softirq), d(a.idle, b.idle));
        let other = d(a.nice, b.nice) + d(a.iowait, b.iowait) + d(a.irq, b.irq) + d(a.steal, b.steal);
        let total = usr + sys + softirq + idle + other;
        if total <= 0.0 {
            return Shares::default();
        }
        let pct = |x: f64| x * 100.0 / total;
        Shares { usr: pct(usr), sys: pct(sys), softirq: pct(softirq), idle: pct(idle), other: pct(other) }
    }

    /// Busy percent (everything but idle).
    pub fn busy(&self) -> f64 {
        100.0 - self.idle
    }
}

/// One sample: time since the run started and every CPU's shares over the last interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since sampling started (end of the interval).
    pub t_ms: u64,
    /// Per CPU, in CPU order.
    pub cpus: Vec<Shares>,
}

/// Samples /proc/stat every `every` on a thread until stopped (or dropped: a run that fails
/// half-way leaves no sampling thread behind).
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    /// Time of the latest sample, ms since sampling started (0: none yet).
    last_ms: Arc<AtomicU64>,
    every: Duration,
    handle: Option<JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    /// Starts sampling.
    pub fn start(every: Duration) -> Result<Sampler> {
        let first = read()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let last_ms = Arc::new(AtomicU64::new(0));
        let last = Arc::clone(&last_ms);
        let handle = std::thread::Builder::new().name("xfwd-cpu".into()).spawn(move || {
            let start = Instant::now();
            let mut prev = first;
            let mut out = Vec::new();
            let mut next = every;
            while !flag.load(Ordering::Relaxed) {
                let elapsed = start.elapsed();
                if elapsed < next {
                    std::thread::sleep((next - elapsed).min(Duration::from_millis(50)));
                    continue;
                }
                next += every;
                let Ok(now) = read() else { continue };
                let cpus = prev.iter().zip(&now).map(|(a, b)| Shares::between(a, b)).collect();
                out.push(Sample { t_ms: elapsed.as_millis() as u64, cpus });
                last.store(elapsed.as_millis() as u64, Ordering::Release);
                prev = now;
            }
            out
        })?;
        Ok(Sampler { stop, last_ms, every, handle: Some(handle) })
    }

    /// Stops once a sample ends at or after `at` (time since sampling started), so that the
    /// samples cover everything up to it: a sampler stopped right after a run would otherwise
    /// end up to an interval before the run did (longer when its thread is starved). Waits at
    /// most ten intervals (at least 5 s) for that sample.
    pub fn stop_after(self, at: Duration) -> Vec<Sample> {
        let deadline = Instant::now() + (self.every * 10).max(Duration::from_secs(5));
        let at_ms = at.as_millis() as u64;
        while self.last_ms.load(Ordering::Acquire) < at_ms && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop()
    }

    /// Stops and returns the samples.
    pub fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Per-CPU averages over `samples`.
pub fn averages(samples: &[Sample]) -> Vec<Shares> {
    let Some(n) = samples.iter().map(|s| s.cpus.len()).max() else { return Vec::new() };
    (0..n)
        .map(|c| {
            let v: Vec<&Shares> = samples.iter().filter_map(|s| s.cpus.get(c)).collect();
            let k = v.len().max(1) as f64;
            Shares {
                usr: v.iter().map(|s| s.usr).sum::<f64>() / k,
                sys: v.iter().map(|s| s.sys).sum::<f64>() / k,
                softirq: v.iter().map(|s| s.softirq).sum::<f64>() / k,
                idle: v.iter().map(|s| s.idle).sum::<f64>() / k,
                other: v.iter().map(|s| s.other).sum::<f64>() / k,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_100_when_a_counter_steps_back() {
        // The kernel's iowait (and idle, with NO_HZ) may read a tick lower than before.
        let a = CpuTimes { user: 100, system: 50, idle: 1000, iowait: 20, ..Default::default() };
        let b = CpuTimes { user: 130, system: 60, idle: 1009, iowait: 19, ..Default::default() };
        let s = Shares::between(&a, &b);
        let sum = s.usr + s.sys + s.softirq + s.idle + s.other;
        assert!((sum - 100.0).abs() < 1e-9, "{s:?} sums to {sum}");
        assert!((s.usr - 3000.0 / 49.0).abs() < 1e-9, "{s:?}");
    }

    // A real /proc/stat from a two-CPU machine, then the same 0.5 s later.
    const BEFORE: &str = "cpu  1000 10 2000 50000 30 0 400 5 0 0\n\
cpu0 600 5 1200 24000 10 0 300 3 0 0\n\
cpu1 400 5 800 26000 20 0 100 2 0 0\n\
intr 12345 0 0\nctxt 999\nbtime 1700000000\nprocesses 42\nprocs_running 1\nprocs_blocked 0\nsoftirq 1 2 3\n";
    const AFTER: &str = "cpu  1050 10 2030 50050 30 0 430 5 0 0\n\
cpu0 620 5 1210 24000 10 0 315 3 0 0\n\
cpu1 430 5 820 26050 20 0 115 2 0 0\n\
intr 12399 0 0\n";

    #[test]
    fn parses_per_cpu_lines_only() {
        let b = parse(BEFORE).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(
            b[0],
            CpuTimes { user: 600, nice: 5, system: 1200, idle: 24000, iowait: 10, irq: 0, softirq: 300, steal: 3 }
        );
        assert!(parse("intr 1 2\n").is_err());
        assert!(parse("cpu0 1 x 3\n").is_err());
    }

    #[test]
    fn shares_sum_to_100_per_cpu() {
        let (b, a) = (parse(BEFORE).unwrap(), parse(AFTER).unwrap());
        let s0 = Shares::between(&b[0], &a[0]);
        // cpu0: +20 user, +10 system, +15 softirq, +0 idle over 45 ticks.
        assert!((s0.usr - 20.0 / 45.0 * 100.0).abs() < 1e-9);
        assert!((s0.softirq - 15.0 / 45.0 * 100.0).abs() < 1e-9);
        assert_eq!(s0.idle, 0.0);
        for (x, y) in b.iter().zip(&a) {
            let s = Shares::between(x, y);
            assert!((s.usr + s.sys + s.softirq + s.idle + s.other - 100.0).abs() < 1e-9);
        }
        assert_eq!(Shares::between(&b[0], &b[0]), Shares::default());
    }

    #[test]
    fn the_sampler_samples_this_machine() {
        let s = Sampler::start(Duration::from_millis(100)).unwrap();
        std::thread::sleep(Duration::from_millis(250));
        // Stopped after 250 ms, the samples reach at least that far, however late the
        // sampling thread ran (a sample ends at its time; intervals are caught up).
        let samples = s.stop_after(Duration::from_millis(250));
        let last = samples.last().map_or(0, |s| s.t_ms);
        assert!(last >= 250, "the last sample ends at {last} ms: {} samples", samples.len());
        for smp in &samples {
            for c in &smp.cpus {
                let sum = c.usr + c.sys + c.softirq + c.idle + c.other;
                assert!(sum == 0.0 || (sum - 100.0).abs() < 1e-6, "{c:?}");
            }
        }
        assert_eq!(averages(&samples).len(), samples[0].cpus.len());
    }
}
