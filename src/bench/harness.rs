//! `xfwd bench`: the A/B run on a rig it builds itself.
//!
//! Arms run interleaved (A B C A B C …) so that drift on a noisy machine falls on every arm
//! alike. Each run: the arm is set up (kernel bridge or `ip_forward` with the router file's
//! addresses; `xfwd bridge|router`; or nothing, on the direct wire), the traffic runs while
//! /proc/stat is sampled every 0.5 s and pings measure RTT under load, and the arm is torn down.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::probe::poll_time::PollTimer;

use super::report::{ArmResult, Conditions, FailedRun, Report, RunResult, SCHEMA};
use super::scale::{self, Scale};
use super::search;
use super::stats::{percentile, Summary};
use crate::rig::{self, Rig};

use super::args::*;
use super::measure::*;
use super::traffic::*;

/// What every run of one mode shares: the options, the rigs, the files xfwd is started with.
struct Bench {
    /// The options; a latency phase runs the arms again with its own rate.
    pub(super) args: BenchArgs,
    pub(super) mode: BenchMode,
    pub(super) exe: String,
    pub(super) config: String,
    /// The router file of an xfwd arm with `fib=kernel`.
    pub(super) kernel_config: String,
    pub(super) control: String,
    /// `--sender trafgen-xdp`: the clients' hops (the rig's, and the wire's), removed before
    /// the rigs (fields drop in this order).
    pub(super) hops: Vec<rig::XdpHop>,
    pub(super) rig: Rig,
    pub(super) wire: Option<Rig>,
    /// The box ports' NAPI poll timer (`None`: it could not start, and the box's own time is
    /// not measured).
    pub(super) poll: Option<PollTimer>,
    /// The router's scale: the table and destinations every arm gets.
    pub(super) scale: Scale,
}

/// What the xfwd arms reported at start, for the conditions.
pub(super) struct Modes {
    pub(super) xdp: String,
    pub(super) xsk: &'static str,
}

/// One run of one arm: sets the arm up, measures, and tears it down again however the set-up
/// or the measurement ended (xfwd stopped, the kernel arm's bridge or addresses and forwarding
/// removed), so that the next run starts from the bare rig.
///
/// `Ok(Err(e))` is a failed run, to be reported; `Err(e)` means the rig could not be put back
/// (the kernel arm's teardown failed) and no further run could be trusted.
fn one_run(b: &Bench, arm: &Arm, run: u32, modes: &mut Modes) -> Result<Result<RunResult>> {
    let (r, is_wire) = match arm {
        Arm::Wire => (b.wire.as_ref().context("wire rig")?, true),
        _ => (&b.rig, false),
    };
    let mut xfwd = None;
    let (mut table_load_s, mut ready_s) = (None, None);
    let measured = (|| {
        let p = endpoints(b.mode, r, is_wire, b.args.ip)?;
        match arm {
            Arm::Kernel => {
                table_load_s = kernel_up(b.mode, r, true, b.args.ip, &b.scale).context("setting up the kernel arm")?;
            }
            Arm::Xfwd(extra) => {
                let kernel_fib = extra.iter().any(|e| e == FIB_KERNEL);
                if kernel_fib {
                    if b.mode != BenchMode::Router {
                        bail!("fib=kernel is an option of the router");
                    }
                    table_load_s = kernel_config(r, true, false, b.args.ip, &b.scale)
                        .context("giving the kernel the rig's routes")?;
                }
                let config = if kernel_fib { b.kernel_config.clone() } else { b.config.clone() };
                let mut a: Vec<String> = if b.mode == BenchMode::Router {
                    vec!["router".into(), "--config".into(), config]
                } else {
                    vec!["bridge".into(), "eth4".into(), "eth5".into()]
                };
                a.extend(["--queues".into(), b.args.queues.to_string(), "--control".into(), b.control.clone()]);
                a.extend(extra.iter().filter(|e| *e != FIB_KERNEL && !e.starts_with(BIN)).cloned());
                let refs: Vec<&str> = a.iter().map(String::as_str).collect();
                let exe = extra.iter().find_map(|e| e.strip_prefix(BIN)).unwrap_or(&b.exe);
                let started = Instant::now();
                xfwd = Some(r.start_xfwd(exe, &refs)?);
                ready_s = Some(started.elapsed().as_secs_f64());
                // How it attached and bound, from its own stats.
                let json = crate::control::query(Path::new(&b.control), "stats-json")?;
                let rep: xfwd_dataplane::io::Report = serde_json::from_str(&json).context("xfwd's stats JSON")?;
                if let Some(m) = rep.ports.iter().find(|p| p.name == "eth4").and_then(|p| p.xdp_mode.clone()) {
                    modes.xdp = m;
                }
                if rep.zero_copy == Some(true) {
                    modes.xsk = "zero-copy";
                }
            }
            Arm::Wire => {}
        }
        Rig::ping_until(p.client, p.server_addr, Duration::from_secs(5))?;
        if b.scale.any() && !is_wire {
            // The next hops resolved before the run, in every arm: no frame waits for one.
            for hop in next_hops(b.scale.v6) {
                Rig::ping_until(p.client, &hop, Duration::from_secs(5))
                    .with_context(|| format!("resolving next hop {hop} through the box"))?;
            }
        }
        let poll = if is_wire { None } else { b.poll.as_ref() };
        let m = match b.args.frame {
            Some(frame) if !b.args.search.is_empty() => {
                let outcome = search::search(&b.args.search, &search_params(&b.args), |rate| {
                    search_trial(&b.args, r, &p, frame, rate)
                })?;
                // The run's figures at the NDR (the PDR where only it was searched; where no
                // rate passed, at the lowest the search tries).
                let at = outcome.ndr_pps.or(outcome.pdr_pps).unwrap_or(search::MIN_RATE);
                let at_ndr = BenchArgs { rate: (at.floor() as u64).max(1), ..b.args.clone() };
                let m = measure(&at_ndr, r, &p, run, xfwd.as_ref(), &b.control, b.args.frame, poll)?;
                RunResult { search: Some(outcome), ..m }
            }
            _ => measure(&b.args, r, &p, run, xfwd.as_ref(), &b.control, b.args.frame, poll)?,
        };
        Ok(RunResult { table_load_s, ready_s, ..m })
    })();
    // Teardown, whatever happened above. xfwd's own failure to exit cleanly fails the run
    // (its figures are kept out of the statistics) but leaves the rig as it was.
    let mut errors: Vec<String> = measured.as_ref().err().map(|e| format!("{e:#}")).into_iter().collect();
    if let Some(mut x) = xfwd {
        match x.stop(libc::SIGTERM, Duration::from_secs(10)) {
            Ok(st) if st.success() => {}
            Ok(st) => errors.push(format!("xfwd exited with {st}; its output: {}", x.seen.join(" | "))),
            Err(e) => errors.push(format!("stopping xfwd: {e:#}; killed; its output: {}", x.seen.join(" | "))),
        }
    }
    if *arm == Arm::Kernel {
        kernel_down(b.mode, r, b.args.ip, &b.scale).context("tearing down the kernel arm")?;
    }
    if matches!(arm, Arm::Xfwd(extra) if extra.iter().any(|e| e == FIB_KERNEL)) && b.mode == BenchMode::Router {
        kernel_config(r, false, false, b.args.ip, &b.scale).context("taking the rig's routes back from the kernel")?;
    }
    Ok(match measured {
        Ok(m) if errors.is_empty() => Ok(m),
        _ => Err(anyhow::anyhow!(errors.join("; then "))),
    })
}

/// The next hops of the bench's routes for the traffic's family, as text.
fn next_hops(v6: bool) -> Vec<String> {
    if v6 {
        scale::NEXT_HOPS6.iter().map(ToString::to_string).collect()
    } else {
        scale::NEXT_HOPS4.iter().map(ToString::to_string).collect()
    }
}

/// Runs one mode's A/B and returns its report. A run that fails is recorded as failed (in its
/// arm's `failed`, with the error) and the others go on; what ends the bench is a rig that
/// cannot be built or restored, or an interruption.
pub fn run_mode(
    args: &BenchArgs,
    mode: BenchMode,
    out: &std::path::Path,
    tag: &str,
    stop: &std::sync::atomic::AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<Report> {
    let exe = std::env::current_exe().context("finding the xfwd binary")?;
    let exe = exe.to_str().context("xfwd's path is not UTF-8")?.to_owned();
    let arms: Vec<(String, Arm)> =
        args.arms.iter().map(|a| Arm::parse(a).map(|p| (a.clone(), p))).collect::<Result<_>>()?;
    std::fs::create_dir_all("/run/xfwd")?;
    let config = TempFile(PathBuf::from(format!("/run/xfwd/bench-{}-rig-router.toml", std::process::id())));
    let routes = TempFile(PathBuf::from(format!("/run/xfwd/bench-{}-routes.txt", std::process::id())));
    // Preflight kept the scale to the router.
    let scale = args.scale();
    if scale.any() {
        // xfwd's routes file holds the table the kernel arm's batch loads.
        std::fs::write(&routes.0, scale.routes_file())?;
        let file = format!("routes_file = \"{}\"\n{}", routes.0.display(), rig_router(args.ip).1);
        std::fs::write(&config.0, file)?;
    } else {
        std::fs::write(&config.0, rig_router(args.ip).1)?;
    }
    let kernel_config = TempFile(PathBuf::from(format!("/run/xfwd/bench-{}-rig-kernel.toml", std::process::id())));
    std::fs::write(&kernel_config.0, RIG_KERNEL)?;
    let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut warnings = Vec::new();
    let mut bench = Bench::new(args, mode, &arms, exe, &config, &kernel_config, scale, &mut warnings)?;
    let mut modes = Modes { xdp: String::from("-"), xsk: "copy" };
    if args.frame.is_some() && args.rate > 0 && args.queues > 1 {
        warnings.push(format!(
            "trafgen sends from one CPU when a rate is set: the {} queues do not all carry packet-rate traffic (use --rate 0 to spread it)",
            args.queues
        ));
    }
    let results = run_arms(&bench, &arms, stop, progress, &mut modes, &mut warnings)?;
    let mut latency = Vec::new();
    if !args.latency.is_empty() {
        let ndrs: Vec<f64> = results
            .first()
            .map(|a| a.runs.iter().filter_map(|r| r.search.as_ref()?.ndr_pps).collect())
            .unwrap_or_default();
        match Summary::of(&ndrs) {
            None => warnings.push(format!(
                "latency at fixed loads not measured: the baseline arm ({}) has no NDR",
                arms.first().map_or("-", |a| a.0.as_str())
            )),
            Some(ndr) => {
                for &percent in &args.latency {
                    let rate = (ndr.median * percent / 100.0).round().max(1.0);
                    // The same offered rate in every arm, no search: the runs' pings are the
                    // latency samples.
                    bench.args = BenchArgs { rate: rate as u64, search: Vec::new(), ..args.clone() };
                    progress(&format!("{mode}: latency at {percent} % of the baseline's NDR ({rate} pps)"));
                    let arms_at = run_arms(&bench, &arms, stop, progress, &mut modes, &mut warnings)?;
                    latency.push(super::report::LatencyAt { percent, rate_pps: rate, arms: arms_at });
                }
            }
        }
    }
    drop((config, routes));
    let mut report = Report {
        schema: SCHEMA,
        started_unix,
        conditions: conditions(args, mode, &arms, modes, &scale),
        arms: results,
        stats: Vec::new(),
        warnings,
        latency,
    };
    report.compute_stats();
    let path = out.join(format!("report-{tag}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(report)
}

impl Bench {
    /// Builds the rig of `mode` (and the wire's, when an arm runs on it), for xfwd started
    /// as `exe` with the router files `config` and `kernel_config`, at `scale`.
    #[allow(clippy::too_many_arguments, reason = "one mode's whole set-up")]
    pub(super) fn new(
        args: &BenchArgs,
        mode: BenchMode,
        arms: &[(String, Arm)],
        exe: String,
        config: &TempFile,
        kernel_config: &TempFile,
        scale: Scale,
        warnings: &mut Vec<String>,
    ) -> Result<Bench> {
        let mut bench = Bench {
            args: args.clone(),
            mode,
            exe,
            config: config.0.display().to_string(),
            kernel_config: kernel_config.0.display().to_string(),
            control: format!("/run/xfwd/bench-{}-{mode}.sock", std::process::id()),
            rig: match (mode, args.ip) {
                (BenchMode::Router, IpVersion::V4) => Rig::router(args.queues)?,
                (BenchMode::Router, IpVersion::V6) => Rig::router6(args.queues)?,
                (BenchMode::Bridge, _) => Rig::bridge(args.queues)?,
            },
            wire: match (arms.iter().any(|(_, a)| *a == Arm::Wire), args.ip) {
                (false, _) => None,
                (true, IpVersion::V4) => Some(Rig::wire(args.queues)?),
                (true, IpVersion::V6) => Some(Rig::wire6(args.queues)?),
            },
            poll: None,
            hops: Vec::new(),
            scale,
        };
        if scale.any() {
            // The server host answers for the routes' next hops (IPv6's without waiting for
            // duplicate address detection).
            for a in scale::host_addresses(scale.v6) {
                let mut cmd = vec!["addr", "add", a.as_str(), "dev", "eth0"];
                if a.contains(':') {
                    cmd.push("nodad");
                }
                bench.rig.h1.ip(&cmd).context("giving the server host the next hops' addresses")?;
            }
        }
        if hosts_napi(args, arms) {
            bench.rig.hosts_napi()?;
        }
        if let (Some(w), true) = (&bench.wire, args.sender.xdp_frames()) {
            w.hosts_napi()?;
        }
        if args.sender == Sender::TrafgenXdp {
            let rigs = std::iter::once((&bench.rig, false)).chain(bench.wire.as_ref().map(|w| (w, true)));
            for (r, is_wire) in rigs {
                let hop = endpoints(mode, r, is_wire, args.ip)?.client.xdp_hop(args.queues)?;
                bench.hops.push(hop);
            }
        }
        if box_gro(args) {
            bench.rig.box_gro()?;
        }
        match bench.rig.box_ports().and_then(|p| Ok(PollTimer::start(&p)?)) {
            Ok(t) => bench.poll = Some(t),
            Err(e) => warnings.push(format!("the box's own time per frame (box µs) is not measured: {e:#}")),
        }
        Ok(bench)
    }
}

/// Runs every arm `args.runs` times, interleaved (A B C A B C …), and gives each arm's runs
/// and failures; a queue that took far less than another in a run is a warning. `Err` when
/// interrupted or when the rig could not be restored after a run.
fn run_arms(
    bench: &Bench,
    arms: &[(String, Arm)],
    stop: &std::sync::atomic::AtomicBool,
    progress: &mut dyn FnMut(&str),
    modes: &mut Modes,
    warnings: &mut Vec<String>,
) -> Result<Vec<ArmResult>> {
    let (args, mode) = (&bench.args, bench.mode);
    let mut results: Vec<ArmResult> = arms.iter().map(|(n, _)| ArmResult::new(n)).collect();
    for run in 1..=args.runs {
        for (i, (name, arm)) in arms.iter().enumerate() {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Returning drops the rigs: namespaces, xfwd and the temporary files go.
                bail!("interrupted; the rig is removed");
            }
            progress(&format!("{mode}: run {run}/{}, arm {name}", args.runs));
            let outcome = one_run(bench, arm, run, modes)
                .with_context(|| format!("{mode}: {name} run {run}: the rig could not be restored"))?;
            match outcome {
                Ok(m) => {
                    for (port, queues) in m.queue_rx.iter().enumerate() {
                        let max = queues.iter().copied().max().unwrap_or(0);
                        if queues.len() > 1 && queues.iter().any(|&n| n * 10 < max) {
                            warnings.push(format!(
                                "{name} run {run}: port {port} queues did not share the load: {queues:?}"
                            ));
                        }
                    }
                    results[i].runs.push(m);
                }
                Err(e) => {
                    let error = format!("{e:#}");
                    crate::render::progress_line(&format!("xfwd bench: {mode}: {name} run {run} failed: {error}"));
                    results[i].failed.push(FailedRun { run, error });
                }
            }
        }
    }
    Ok(results)
}

/// Whether the hosts get NAPI ([`Rig::hosts_napi`]): an XDP path arm redirects into them, and
/// an XDP sender sends out of the client (on the wire, straight into the server).
fn hosts_napi(args: &BenchArgs, arms: &[(String, Arm)]) -> bool {
    xdp_path(arms) || args.sender.xdp_frames()
}

/// Whether the box's ports get GRO on ([`Rig::box_gro`]): asked for, or needed by the XDP
/// senders, whose frames a veth port without NAPI drops.
pub(super) fn box_gro(args: &BenchArgs) -> bool {
    args.box_gro || args.sender.xdp_frames()
}

/// Whether an arm runs xfwd's XDP path, which needs NAPI at the hosts ([`Rig::hosts_napi`]).
pub(super) fn xdp_path(arms: &[(String, Arm)]) -> bool {
    arms.iter().any(|(_, a)| matches!(a, Arm::Xfwd(o) if o.windows(2).any(|w| w[0] == "--path" && w[1] == "xdp")))
}

/// What one mode's bench ran under, for the report: the options, the machine, how the xfwd
/// arms attached and bound (`modes`), and how the endpoints, queues and pings ran.
pub(super) fn conditions(
    args: &BenchArgs,
    mode: BenchMode,
    arms: &[(String, Arm)],
    modes: Modes,
    scale: &Scale,
) -> Conditions {
    let frame = match args.frame {
        Some(FrameSize::Bytes(n)) => n,
        _ => 0,
    };
    Conditions {
        mode: mode.to_string(),
        test: args.frame.map_or_else(|| "tcp".into(), |f| format!("udp{}", f.label())),
        frame_mix: args.frame.map(|f| f.said(args.ip == IpVersion::V6)).unwrap_or_default(),
        search: search_said(args),
        ip: args.ip.number(),
        queues: args.queues,
        flows: args.flows,
        frame,
        time_s: args.time,
        omit_s: if args.frame.is_some() { 0 } else { args.omit },
        // A search's trials and its run at the NDR set their own rates (in its runs).
        offered_pps: if args.frame.is_some() && args.search.is_empty() { args.rate } else { 0 },
        kernel: command_version("uname", "-r"),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        driver: "veth (namespace rig)".into(),
        xdp_mode: modes.xdp,
        xsk_mode: modes.xsk.into(),
        offloads: offloads_said(args, arms),
        endpoints: endpoints_said(args),
        queueing: queueing_said(arms),
        scale: super::report::ScaleConditions {
            routes: scale.routes,
            routes6: scale.routes6,
            dsts: scale.dsts,
            seed: (scale.routes > 0 || scale.routes6 > 0).then_some(scale.seed),
            length_mix: match (scale.routes, scale.routes6) {
                (0, 0) => String::new(),
                (_, 0) => format!("IPv4: {}", super::tables::mix_said(super::tables::LENGTH_MIX)),
                (0, _) => format!("IPv6: {}", super::tables::mix_said(super::tables::LENGTH_MIX6)),
                _ => format!(
                    "IPv4: {}; IPv6: {}",
                    super::tables::mix_said(super::tables::LENGTH_MIX),
                    super::tables::mix_said(super::tables::LENGTH_MIX6)
                ),
            },
            said: scale.said(),
        },
        pings: format!(
            "RTT: pings from the client host every {PING_INTERVAL_MS} ms at nice {PINGER_NICE}, {IDLE_PINGS} on the idle path before each run, then through the run; an unanswered ping gives no sample"
        ),
        versions: vec![
            ("xfwd".into(), env!("CARGO_PKG_VERSION").into()),
            ("iperf3".into(), command_version("iperf3", "--version")),
            ("trafgen".into(), command_version("trafgen", "--version")),
        ],
    }
}

/// How the rate search ran, in words (the conditions' `search`; empty without one).
fn search_said(args: &BenchArgs) -> String {
    if args.search.is_empty() || args.frame.is_none() {
        return String::new();
    }
    format!(
        "search {} per run: trials of {} s (no pings), bisection from a flat-out trial to {} % of the upper bound, a losing trial repeated once before a bound moves, {} final trial(s) at the rate found, at most {SEARCH_MAX_TRIALS} trials a goal; NDR loss 0, PDR loss ≤ {} %; offered: what the sender sent; the run's other figures measured at the NDR for {} s",
        args.search.iter().map(|g| g.name()).collect::<Vec<_>>().join(", "),
        args.trial,
        args.resolution,
        args.final_trials,
        search::PDR_LOSS * 100.0,
        args.time
    )
}

/// The hosts' and the box's offloads, in words (the conditions' `offloads`).
fn offloads_said(args: &BenchArgs, arms: &[(String, Arm)]) -> String {
    let hosts = if hosts_napi(args, arms) {
        "hosts' TX checksum offload off (needed for AF_XDP on veth) and GRO on (NAPI, needed for XDP redirects into them), in every arm"
    } else {
        "hosts' TX checksum offload off (needed for AF_XDP on veth), in every arm"
    };
    let box_ports = if box_gro(args) {
        "the box's ports GRO on in every arm (NAPI for the kernel arm's, so that its box µs is measured)"
    } else {
        "the box's ports GRO off (the kernel arm's box µs is not measured)"
    };
    format!("{hosts}; {box_ports}; no TSO reaches the box")
}

/// How the traffic's endpoints ran, in words (the conditions' `endpoints`).
fn endpoints_said(args: &BenchArgs) -> String {
    match args.frame {
        None if args.streams > 1 => format!(
            "iperf3 clients and servers at nice {} in every arm, {} flows per client process (-P, consecutive fixed ports), client k pinned to CPU k mod queues, started together",
            rig::ENDPOINT_NICE,
            args.streams
        ),
        None => format!(
            "iperf3 clients and servers at nice {} in every arm, client k pinned to CPU k mod queues, started together",
            rig::ENDPOINT_NICE
        ),
        Some(_) if args.sender == Sender::Xdp => "xfwd's XDP frame generator (BPF_PROG_TEST_RUN live frames, XDP_TX out of the client's eth0: the box receives frames as from a NIC, not socket buffers) on its queues' CPUs, in every arm".into(),
        Some(_) if args.sender == Sender::TrafgenXdp => "trafgen from the client host on its queues' CPUs, at normal priority, into a helper veth whose XDP program redirects each frame into the client's eth0 (the box receives frames as from a NIC, not socket buffers; veth's copy of each socket buffer is the client's), in every arm".into(),
        Some(_) => "trafgen from the client host on its queues' CPUs, at normal priority, in every arm".into(),
    }
}

/// What queues the frames in each arm, in words (the conditions' `queueing`), with xfwd's
/// defaults when an arm runs it with them.
fn queueing_said(arms: &[(String, Arm)]) -> String {
    format!(
        "queues: kernel arm: veth's noqueue and the hosts' own stacks (this kernel has no fq_codel, cake, codel or pie); xfwd arms: as each says below{}",
        if report_has_default_xfwd(arms) {
            format!(
                " (default: --aqm {}, CoDel 5 ms / 100 ms, workers SCHED_FIFO 10 where allowed)",
                xfwd_dataplane::io::AqmMode::default().name()
            )
        } else {
            String::new()
        }
    )
}

/// The fewest samples a p99 is given from: with fewer, the nearest rank of the 99th percentile
/// is the largest sample, and the figure would be a maximum under another name.
pub const P99_MIN_SAMPLES: usize = 100;

/// RTT under load of one arm, from the samples of all its runs pooled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadRtt {
    /// How many samples (answered pings) the percentiles rest on.
    pub samples: usize,
    /// How many pings were sent, when every run counted them: those not among `samples` went
    /// unanswered (lost, or still in flight when the run ended).
    pub sent: Option<u64>,
    /// Median, ms; None without samples.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms; None with fewer than [`P99_MIN_SAMPLES`] samples.
    pub p99_ms: Option<f64>,
}

/// RTT under load of an arm: every run's pings pooled, so that the percentiles rest on all of
/// the arm's samples (a run that queued more weighs by how many of them it holds), rather than
/// on a median of per-run percentiles that each rest on a few.
pub fn rtt(arm: &ArmResult) -> LoadRtt {
    let all: Vec<f64> = arm.runs.iter().flat_map(|r| r.rtt_ms.iter().copied()).collect();
    LoadRtt {
        samples: all.len(),
        sent: arm.runs.iter().map(|r| r.pings_sent).sum(),
        p50_ms: percentile(&all, 50.0),
        p99_ms: if all.len() >= P99_MIN_SAMPLES { percentile(&all, 99.0) } else { None },
    }
}

/// The bulk flows' own RTT in an arm, ms: the median over its flows and runs of each flow's
/// mean sender RTT (iperf3's); None where no flow had one (packet-rate runs, older reports).
pub fn flow_rtt(arm: &ArmResult) -> Option<f64> {
    let means: Vec<f64> =
        arm.runs.iter().flat_map(|r| r.flows_rtt.iter().flatten().map(|f| f.mean_us as f64 / 1000.0)).collect();
    Summary::of(&means).map(|s| s.median)
}

/// Median over the runs of the busy cores with no traffic.
pub fn idle_cores(arm: &ArmResult) -> Option<f64> {
    let mut v: Vec<f64> = arm.runs.iter().filter_map(|r| r.idle_busy_cores).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Median RTT of an arm's runs on the idle path, ms.
pub fn rtt_idle(arm: &ArmResult) -> Option<f64> {
    let all: Vec<f64> = arm.runs.iter().flat_map(|r| r.rtt_idle_ms.iter().copied()).collect();
    percentile(&all, 50.0)
}

#[cfg(test)]
mod tests {
    use super::super::{args::*, preflight::*, traffic::*};
    use super::*;
    use xfwd_dataplane::io::setup::settings::Opt;

    #[test]
    fn arms_parse() {
        assert_eq!(Arm::parse("kernel").unwrap(), Arm::Kernel);
        assert_eq!(Arm::parse("wire").unwrap(), Arm::Wire);
        assert_eq!(Arm::parse("xfwd:poll=busy").unwrap(), Arm::Xfwd(vec!["--poll".into(), "busy".into()]));
        assert_eq!(
            Arm::parse("xfwd:poll=busy+xdp-mode=generic").unwrap(),
            Arm::Xfwd(vec!["--poll".into(), "busy".into(), "--xdp-mode".into(), "generic".into()])
        );
        assert_eq!(
            Arm::parse("xfwd:xdp-mode=generic+sockets=per-queue").unwrap(),
            Arm::Xfwd(vec!["--xdp-mode".into(), "generic".into(), "--sockets".into(), "per-queue".into()])
        );
        assert_eq!(
            Arm::parse("xfwd:fib=kernel+poll=busy").unwrap(),
            Arm::Xfwd(vec![FIB_KERNEL.into(), "--poll".into(), "busy".into()])
        );
        assert_eq!(Arm::parse("xfwd:fib=config").unwrap(), Arm::Xfwd(Vec::new()));
        // Another build of xfwd: the path travels to the run, which starts that binary.
        let exe = std::env::current_exe().unwrap().display().to_string();
        assert_eq!(Arm::parse(&format!("xfwd:bin={exe}")).unwrap(), Arm::Xfwd(vec![format!("{BIN}{exe}")]));
        assert!(Arm::parse("xfwd:bin=/nonexistent/xfwd").is_err());
        assert!(Arm::parse("xfwd:fib=bgp").is_err());
        assert!(Arm::parse("xfwd:fast=yes").is_err());
        assert!(Arm::parse("dpdk").is_err());
        // Every worker option is an arm's option, from the one table, but the queues, which
        // the bench sets for every arm.
        for o in Opt::ALL.iter().filter(|&&o| o != Opt::Queues && o != Opt::HugePages) {
            let flag = o.flag();
            let arm = Arm::parse(&format!("xfwd:{}=1", &flag[2..])).unwrap();
            assert_eq!(arm, Arm::Xfwd(vec![flag.to_owned(), "1".into()]));
        }
        assert!(Arm::parse("xfwd:queues=2").is_err(), "--queues is the bench's own");
    }

    #[test]
    fn ping_output_gives_rtts() {
        let text = "PING 198.18.10.1 (198.18.10.1) 56(84) bytes of data.\n64 bytes from 198.18.10.1: icmp_seq=1 ttl=63 time=0.115 ms\n64 bytes from 198.18.10.1: icmp_seq=2 ttl=63 time=1.02 ms\n\n--- 198.18.10.1 ping statistics ---\n3 packets transmitted, 2 received, 33.3333% packet loss, time 21ms\nrtt min/avg/max/mdev = 0.115/0.567/1.020/0.452 ms\n";
        assert_eq!(parse_ping_rtts(text), vec![0.115, 1.02]);
        assert_eq!(parse_ping_sent(text), Some(3));
        // Killed before its summary: the count is unknown, not 0.
        assert_eq!(parse_ping_sent(text.split("\n\n").next().unwrap()), None);
    }

    fn run_with_rtts(run: u32, rtt_ms: Vec<f64>) -> RunResult {
        RunResult { rtt_ms, ..super::super::report::test_run(run, 1.0, 10) }
    }

    #[test]
    fn rtt_percentiles_pool_every_run_of_an_arm() {
        // Run 1 answered 300 pings of 1..=300 µs, run 2 300 of 301..=600 µs: pooled, the median
        // is 300 µs and the p99 594 µs (rank 594 of 600); a median of the two runs' own
        // percentiles would give 450.5 and 448.5 µs.
        let us = |r: std::ops::RangeInclusive<u32>| r.map(|u| f64::from(u) / 1000.0).collect::<Vec<_>>();
        let mut arm = ArmResult::new("xfwd");
        arm.runs = vec![run_with_rtts(1, us(1..=300)), run_with_rtts(2, us(301..=600))];
        arm.runs[0].pings_sent = Some(310);
        arm.runs[1].pings_sent = Some(300);
        let r = rtt(&arm);
        assert_eq!((r.samples, r.sent), (600, Some(610)));
        assert_eq!(r.p50_ms, Some(0.3));
        assert_eq!(r.p99_ms, Some(0.594));
        // Under 100 samples the 99th percentile's nearest rank is the largest sample: no p99.
        arm.runs = vec![run_with_rtts(1, us(1..=60)), run_with_rtts(2, us(61..=99))];
        let r = rtt(&arm);
        assert_eq!((r.samples, r.p50_ms, r.p99_ms), (99, Some(0.05), None));
        arm.runs.push(run_with_rtts(3, vec![5.0]));
        arm.runs[2].pings_sent = None;
        let r = rtt(&arm);
        assert_eq!((r.samples, r.p99_ms), (100, Some(0.099)));
        // One run that did not count what it sent: the arm's count is unknown.
        assert_eq!(r.sent, None);
        // No run, no sample: nothing, and a count of 0.
        assert_eq!(rtt(&ArmResult::new("kernel")), LoadRtt { samples: 0, sent: Some(0), p50_ms: None, p99_ms: None });
    }

    #[test]
    fn flow_rtt_is_the_median_over_flows_and_runs() {
        use crate::rig::FlowRtt;
        let f = |mean_us| Some(FlowRtt { mean_us, min_us: 1, max_us: 99_999 });
        let mut arm = ArmResult::new("xfwd");
        let mut r1 = run_with_rtts(1, Vec::new());
        r1.flows_rtt = vec![f(100), None, f(9_000)];
        let mut r2 = run_with_rtts(2, Vec::new());
        r2.flows_rtt = vec![f(200), f(300)];
        arm.runs = vec![r1, r2];
        // Means 100, 200, 300, 9000 µs (the flow without one left out): median 250 µs.
        assert_eq!(flow_rtt(&arm), Some(0.25));
        for r in &mut arm.runs {
            r.flows_rtt = vec![None; 2];
        }
        assert_eq!(flow_rtt(&arm), None);
    }

    /// `xfwd bench` options from its command line.
    fn bench_args(line: &[&str]) -> BenchArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let mut args = <Cli as clap::Parser>::parse_from(std::iter::once("bench").chain(line.iter().copied())).bench;
        preset(&mut args);
        args
    }

    /// Arms as parsed from `--arm`.
    fn arms(line: &[&str]) -> Vec<(String, Arm)> {
        line.iter().map(|a| (a.to_string(), Arm::parse(a).unwrap())).collect()
    }

    /// How xfwd arms attached, for conditions.
    fn modes() -> Modes {
        Modes { xdp: "generic".into(), xsk: "copy" }
    }

    #[test]
    fn conditions_say_what_ran_and_how() {
        let tcp = bench_args(&["--streams", "4", "--omit", "3"]);
        let c = conditions(&tcp, BenchMode::Router, &arms(&["kernel", "xfwd"]), modes(), &tcp.scale());
        assert_eq!((c.test.as_str(), c.frame, c.omit_s, c.offered_pps, c.ip), ("tcp", 0, 3, 0, 4));
        assert_eq!((c.mode.as_str(), c.xdp_mode.as_str(), c.xsk_mode.as_str()), ("router", "generic", "copy"));
        assert_eq!(
            c.endpoints,
            "iperf3 clients and servers at nice 19 in every arm, 4 flows per client process (-P, consecutive fixed ports), client k pinned to CPU k mod queues, started together"
        );
        assert_eq!(
            c.queueing,
            "queues: kernel arm: veth's noqueue and the hosts' own stacks (this kernel has no fq_codel, cake, codel or pie); xfwd arms: as each says below (default: --aqm fq-codel, CoDel 5 ms / 100 ms, workers SCHED_FIFO 10 where allowed)"
        );
        assert_eq!(
            c.pings,
            "RTT: pings from the client host every 5 ms at nice -10, 100 on the idle path before each run, then through the run; an unanswered ping gives no sample"
        );
        assert_eq!(c.versions[0], ("xfwd".to_owned(), env!("CARGO_PKG_VERSION").to_owned()));
        let one =
            conditions(&bench_args(&[]), BenchMode::Bridge, &arms(&["kernel"]), modes(), &bench_args(&[]).scale());
        assert_eq!(
            one.endpoints,
            "iperf3 clients and servers at nice 19 in every arm, client k pinned to CPU k mod queues, started together"
        );
        assert!(one.queueing.ends_with("xfwd arms: as each says below"), "{}", one.queueing);
        assert!(!one.offloads.contains("and GRO on"), "{}", one.offloads);
        assert!(one.offloads.contains("the box's ports GRO off (the kernel arm's box µs is not measured)"));
        let gro = conditions(
            &bench_args(&["--box-gro"]),
            BenchMode::Bridge,
            &arms(&["kernel"]),
            modes(),
            &bench_args(&[]).scale(),
        );
        assert!(gro.offloads.contains("the box's ports GRO on in every arm"), "{}", gro.offloads);
        let xdp =
            conditions(&tcp, BenchMode::Router, &arms(&["kernel", "xfwd", "xfwd:path=xdp"]), modes(), &tcp.scale());
        assert!(xdp.offloads.contains("GRO on (NAPI, needed for XDP redirects into them), in every arm"));
        let udp = bench_args(&["--frame", "64", "--ip", "6", "--rate", "5000"]);
        let c = conditions(&udp, BenchMode::Router, &arms(&["xfwd:poll=busy"]), modes(), &udp.scale());
        assert_eq!((c.test.as_str(), c.frame, c.omit_s, c.offered_pps, c.ip), ("udp64", 64, 0, 5000, 6));
        assert_eq!(c.endpoints, "trafgen from the client host on its queues' CPUs, at normal priority, in every arm");
        // xfwd's own generator: said, and the box's ports get the NAPI its frames need.
        let gen = bench_args(&["--frame", "64", "--sender", "xdp"]);
        let g = conditions(&gen, BenchMode::Router, &arms(&["kernel", "xfwd"]), modes(), &gen.scale());
        assert!(
            g.endpoints.starts_with("xfwd's XDP frame generator (BPF_PROG_TEST_RUN live frames"),
            "{}",
            g.endpoints
        );
        assert!(
            g.offloads.contains("and GRO on (NAPI") && g.offloads.contains("the box's ports GRO on"),
            "{}",
            g.offloads
        );
        // It sends a packet-rate test's frames: refused without one.
        let e = preflight_inner(&bench_args(&["--sender", "xdp"]), Path::new(".")).unwrap_err();
        assert!(e.to_string().contains("--sender xdp sends the frames of a packet-rate test"), "{e}");
        preflight_inner(&gen, Path::new(".")).unwrap();
        // trafgen through the client's XDP hop: the same NAPI for the box, said as what it is.
        let hop = bench_args(&["--frame", "64", "--sender", "trafgen-xdp"]);
        let h = conditions(&hop, BenchMode::Router, &arms(&["kernel", "xfwd"]), modes(), &hop.scale());
        assert!(h.endpoints.starts_with("trafgen from the client host"), "{}", h.endpoints);
        assert!(h.endpoints.contains("helper veth whose XDP program redirects each frame"), "{}", h.endpoints);
        assert!(h.offloads.contains("the box's ports GRO on"), "{}", h.offloads);
        let e = preflight_inner(&bench_args(&["--sender", "trafgen-xdp"]), Path::new(".")).unwrap_err();
        assert!(e.to_string().contains("--sender trafgen-xdp sends the frames"), "{e}");
        preflight_inner(&hop, Path::new(".")).unwrap();
        assert!(c.queueing.ends_with("xfwd arms: as each says below"), "{}", c.queueing);
    }

    #[test]
    fn the_scale_is_the_routers_and_said_in_the_conditions() {
        let ok = bench_args(&["--frame", "64", "--routes", "1000", "--dsts", "300", "--seed", "7"]);
        preflight_inner(&ok, Path::new(".")).unwrap();
        let c = conditions(&ok, BenchMode::Router, &arms(&["kernel", "xfwd"]), modes(), &ok.scale());
        assert_eq!((c.scale.routes, c.scale.routes6, c.scale.dsts, c.scale.seed), (1000, 0, 300, Some(7)));
        assert!(c.scale.length_mix.starts_with("IPv4: /8 0.1 %"), "{}", c.scale.length_mix);
        assert!(c.scale.said.contains("300 destinations from 198.18.64.0 up"), "{}", c.scale.said);
        let none = bench_args(&[]);
        let c = conditions(&none, BenchMode::Router, &arms(&["kernel"]), modes(), &none.scale());
        assert_eq!(c.scale, Default::default());
        for (args, said) in [
            (&["--mode", "bridge", "--routes", "10"][..], "are the router's"),
            (&["--dsts", "10"][..], "give --frame"),
            (&["--frame", "64", "--dsts", "10", "--sender", "xdp"][..], "sends to one destination"),
            (&["--frame", "64", "--dsts", "114689"][..], "at most 114688"),
            (&["--routes6", "10"][..], "add --ip 6"),
        ] {
            let e = preflight_inner(&bench_args(args), Path::new(".")).unwrap_err();
            assert!(e.to_string().contains(said), "{args:?}: {e}");
        }
        preflight_inner(
            &bench_args(&["--ip", "6", "--frame", "78", "--routes6", "10", "--dsts", "200000"]),
            Path::new("."),
        )
        .unwrap();
        for (args, said) in [
            (&["--frame", "64", "--latency", "50"][..], "add --search ndr"),
            (&["--frame", "64", "--search", "pdr", "--latency", "50"][..], "add --search ndr"),
            (&["--frame", "64", "--search", "ndr", "--latency", "0"][..], "above 0 and at most 100"),
            (&["--search", "ndr"][..], "give --frame"),
            (&["--frame", "64", "--search", "ndr", "--resolution", "0"][..], "--resolution 0"),
            (&["--lookups", "--dsts", "5"][..], "--lookups sends no traffic"),
        ] {
            let e = preflight_inner(&bench_args(args), Path::new(".")).unwrap_err();
            assert!(e.to_string().contains(said), "{args:?}: {e}");
        }
        preflight_inner(
            &bench_args(&["--frame", "64", "--search", "ndr,pdr", "--latency", "10,50,90"]),
            Path::new("."),
        )
        .unwrap();
    }

    #[test]
    fn the_generator_is_paced_never_ahead_of_its_rate_and_flat_out_in_full_batches() {
        // A send that takes as long as the kernel's set-up does.
        let calls = std::cell::RefCell::new(Vec::new());
        let start = Instant::now();
        let sent = pace(Duration::from_millis(300), 20_000, |n| {
            calls.borrow_mut().push((start.elapsed(), n));
            std::thread::sleep(Duration::from_millis(5));
            Ok(())
        })
        .unwrap();
        let calls = calls.into_inner();
        assert_eq!(sent, calls.iter().map(|&(_, n)| u64::from(n)).sum::<u64>());
        // Never ahead: by each call, at most what fell due at 20 kpps.
        let mut so_far = 0u64;
        for &(at, n) in &calls {
            so_far += u64::from(n);
            assert!(n >= MIN_BATCH, "{calls:?}");
            assert!(so_far as f64 <= 20_000.0 * at.as_secs_f64() + 1.0, "{so_far} by {at:?}: {calls:?}");
        }
        let flat = std::cell::Cell::new(0);
        let sent = pace(Duration::from_millis(20), 0, |n| {
            assert_eq!(n, FLAT_OUT_BATCH);
            flat.set(flat.get() + 1);
            std::thread::sleep(Duration::from_millis(5));
            Ok(())
        })
        .unwrap();
        assert_eq!(sent, u64::from(FLAT_OUT_BATCH) * flat.get());
        // A send that fails ends the run with its error.
        let e = pace(Duration::from_secs(5), 0, |_| bail!("gone")).unwrap_err();
        assert_eq!(e.to_string(), "gone");
    }

    #[test]
    fn frame_sizes_sweep_and_imix_is_csits() {
        let a = bench_args(&["--frame", "64,128,imix"]);
        assert_eq!(a.frames, [FrameSize::Bytes(64), FrameSize::Bytes(128), FrameSize::Imix]);
        assert_eq!(a.frame, Some(FrameSize::Bytes(64)), "the first until a sweep steps on");
        assert_eq!(FrameSize::Imix.cycle(false), [(64, 28), (570, 16), (1518, 4)]);
        assert_eq!(FrameSize::Imix.cycle(true)[0], (78, 28));
        assert!((FrameSize::Imix.mean_bytes(false) - 353.83).abs() < 0.01);
        let imix = BenchArgs { frame: Some(FrameSize::Imix), ..a.clone() };
        let c = conditions(&imix, BenchMode::Router, &arms(&["kernel"]), modes(), &imix.scale());
        assert_eq!((c.test.as_str(), c.frame), ("udpimix", 0));
        assert_eq!(c.frame_mix, "IMIX (CSIT's): 28×64, 16×570, 4×1518 in that order, repeated; mean 353.8 bytes");
        assert_eq!(FrameSize::of(&c), Some(FrameSize::Imix));
        for bad in ["63", "9019", "jumbo"] {
            assert!(parse_frame(bad).is_err(), "{bad}");
        }
        let e = preflight_inner(&bench_args(&["--frame", "imix", "--sender", "xdp"]), Path::new(".")).unwrap_err();
        assert!(e.to_string().contains("--sender xdp sends one frame size"), "{e}");
        // IPv6's IMIX starts at 78: allowed; a 64-byte size in a sweep is not.
        preflight_inner(&bench_args(&["--ip", "6", "--frame", "imix,78"]), Path::new(".")).unwrap();
        let e = preflight_inner(&bench_args(&["--ip", "6", "--frame", "78,64"]), Path::new(".")).unwrap_err();
        assert!(e.to_string().contains("--frame 64"), "{e}");
    }

    #[test]
    fn trafgen_says_what_it_sent() {
        let out = "     2 packets to schedule\n   152 bytes in total\nRunning! Hang up with ^C!\n\n\n     2438656 packets outgoing\n   146319360 bytes outgoing\n";
        assert_eq!(trafgen_sent(out), Some(2_438_656));
        assert_eq!(trafgen_sent("     1 packets to schedule\n"), None);
    }

    #[test]
    fn trafgen_config_has_the_flows_and_the_frame_size() {
        let c = trafgen_config("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.30.2", "198.18.10.1", 256, 64, 0);
        assert!(c.contains("udp(sp=dinc(1024, 1279), dp=9)"), "{c}");
        assert!(c.contains("fill(0x00, 18)"), "64 − FCS − headers = 18 bytes of payload: {c}");
        // One flow: a fixed port (trafgen refuses dinc(1024, 1024)).
        let c = trafgen_config("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.30.2", "198.18.10.1", 1, 64, 1);
        assert!(c.contains("udp(sp=1024, dp=9)"), "{c}");
        assert!(c.contains("da=198.18.10.1,"), "{c}");
        // Many destinations: trafgen counts through them (IPv4: the whole address; IPv6: its
        // last 32 bits), checksums recomputed per frame.
        let c = trafgen_config("02:00:00:00:00:01", "02:00:00:00:00:02", "198.18.30.2", "198.18.64.0", 4, 64, 100_000);
        assert!(c.contains(&format!("da=dinc({}, {})", 0xC612_4000u32, 0xC612_4000u32 + 99_999)), "{c}");
        let c = trafgen_config("02:00:00:00:00:01", "02:00:00:00:00:02", "2001:2:0:30::2", "2001:2:0:8000::", 4, 78, 3);
        assert!(c.contains("ipv6(sa=2001:2:0:30::2, da=2001:2:0:8000::, da[12:4]=dinc(0, 2), hl=64)"), "{c}");
    }
}
