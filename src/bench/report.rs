//! `report.json`: every raw sample of an A/B run and the conditions it ran under.
//!
//! Schema version 1 (the `schema` field), documented in docs/bench.md under "`report-<mode>.json`". Fields
//! are only ever added; a reader accepts unknown ones.

use serde::{Deserialize, Serialize};

use super::cpu::{Sample, Shares};
use super::stats::{Comparison, Summary};
use crate::rig::FlowRtt;

/// The schema version this build writes.
pub const SCHEMA: u32 = 1;

/// What was measured, and how.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Conditions {
    /// `router` or `bridge`.
    pub mode: String,
    /// The test: `tcp` (iperf3, sum of sender rates) or `udp64` (64-byte frames, packet rate).
    pub test: String,
    /// The IP version of the traffic (4 in reports from before IPv6).
    #[serde(default = "ipv4")]
    pub ip: u8,
    /// Queues per port (and workers).
    pub queues: u32,
    /// Flows.
    pub flows: u32,
    /// Frame size for packet-rate tests (0 for TCP, and for a mix).
    pub frame: u32,
    /// A packet-rate test's mix of sizes, in words (empty: one size, TCP, and reports from
    /// before mixes).
    #[serde(default)]
    pub frame_mix: String,
    /// How the rate search ran, in words (empty: no search).
    #[serde(default)]
    pub search: String,
    /// Seconds per run, and seconds omitted at its start.
    pub time_s: u32,
    /// See `time_s`.
    pub omit_s: u32,
    /// Offered rate for packet-rate tests, packets per second (0: as fast as it goes).
    pub offered_pps: u64,
    /// `uname -r`.
    pub kernel: String,
    /// CPUs of the machine.
    pub cpus: usize,
    /// Where the ports are: `veth (namespace rig)` or the interfaces of a real box.
    pub driver: String,
    /// XDP attach mode the xfwd arm got.
    pub xdp_mode: String,
    /// AF_XDP bind mode: `copy` or `zero-copy`.
    pub xsk_mode: String,
    /// Offloads, in words (hosts' TX checksum offload is off on the rig, in every arm).
    pub offloads: String,
    /// How the traffic's endpoints ran, in words (on the rig: iperf3 at a low priority, pinned
    /// per queue); empty in reports from before it was said.
    #[serde(default)]
    pub endpoints: String,
    /// How RTT was measured, in words (ping interval, idle and under load); empty where no
    /// pings ran (`xfwd load`) and in reports from before it was said.
    #[serde(default)]
    pub pings: String,
    /// What queues the frames in each arm, in words; empty in reports from before it was said.
    #[serde(default)]
    pub queueing: String,
    /// The router's scale (`--routes`, `--routes6`, `--dsts`, `--seed`; zeros and no seed
    /// where the rig's own routes ran alone, and in reports from before them).
    #[serde(default)]
    pub scale: ScaleConditions,
    /// Versions: xfwd, iperf3, trafgen.
    pub versions: Vec<(String, String)>,
}

fn ipv4() -> u8 {
    4
}

/// The table and destinations a router bench ran with, the same in every arm.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScaleConditions {
    /// IPv4 prefixes of the full table.
    pub routes: u32,
    /// IPv6 prefixes of the full table.
    pub routes6: u32,
    /// The traffic's destinations, each with its own host route (0: the server's address).
    pub dsts: u32,
    /// The tables' seed (`None`: no table was drawn).
    pub seed: Option<u64>,
    /// The IPv4 and IPv6 tables' prefix-length mixes, in words.
    pub length_mix: String,
    /// All of it in words, as the table prints it (empty: the rig's routes alone).
    pub said: String,
}

/// What xfwd said of one run: its workers' scheduling and its queue management.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct XfwdRun {
    /// The workers' SCHED_FIFO priority (`None`: normal threads).
    pub rt_priority: Option<u8>,
    /// Times a worker stepped down to a normal thread's share under sustained load.
    pub rt_yields: u64,
    /// Frames CoDel dropped (on the RX rings, or per flow queue).
    pub aqm_drops: u64,
    /// Frames CoDel marked CE instead.
    pub ecn_marks: u64,
    /// The 99th percentile of the received frames' sojourn between the XDP program and the
    /// worker, ns (`None`: none stamped).
    pub sojourn_p99_ns: Option<u64>,
    /// Frames that reached a worker without a stamp.
    pub unstamped: u64,
    /// The queue management, as `--aqm` names it (`None` in reports from before it was said).
    #[serde(default)]
    pub aqm: Option<String>,
    /// Flow queues: frames dropped from the fattest flow for want of a slot.
    #[serde(default)]
    pub fq_overflow: u64,
    /// Flow queues: the most frames one port's queues held at once in a worker.
    #[serde(default)]
    pub fq_high_water: u64,
    /// Flow queues: frames whose flow shared another's queue (its set of the table was full).
    #[serde(default)]
    pub fq_collisions: u64,
    /// Each worker's loop accounting over the measured time (empty in reports from before it
    /// was recorded).
    #[serde(default)]
    pub workers: Vec<xfwd_dataplane::load::LoopTotals>,
    /// The XDP path (`--path xdp`): frames the program forwarded or flooded itself over the
    /// measured time (`None`: the AF_XDP path, or a report from before it was said).
    #[serde(default)]
    pub in_program: Option<u64>,
    /// The XDP path: of [`XfwdRun::in_program`], the frames the egress's driver refused (its
    /// queue full: veth's peer ring; there is no queue of xfwd's in between), as xfwd reads
    /// them from the driver every second. `None` as for `in_program`.
    #[serde(default)]
    pub egress_refused: Option<u64>,
}

impl XfwdRun {
    /// The workers' loop accounting over the run, summed.
    pub fn loop_total(&self) -> Option<xfwd_dataplane::load::LoopTotals> {
        let mut t = xfwd_dataplane::load::LoopTotals::default();
        for w in &self.workers {
            t.accumulate(w);
        }
        (!self.workers.is_empty()).then_some(t)
    }
}

/// One run of one arm.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    /// 1-based run number (arms interleave: A1 B1 A2 B2 …).
    pub run: u32,
    /// TCP: per-flow sender rates, bits per second.
    pub flows_bps: Vec<f64>,
    /// TCP: their sum, Gb/s (the reference method's figure).
    pub gbps: f64,
    /// TCP: per flow, in the order of `flows_bps`, the sender's RTT as iperf3 read it from the
    /// kernel (null where it gave none; empty for packet-rate runs and in reports from before
    /// it was recorded).
    #[serde(default)]
    pub flows_rtt: Vec<Option<FlowRtt>>,
    /// Packet rate offered by the generator (packets per second), 0 when not measured.
    pub offered_pps: f64,
    /// Packet rate delivered to the receiving host(s).
    pub delivered_pps: f64,
    /// 1 − delivered/offered, when offered is known.
    pub loss: f64,
    /// Packets delivered to either host during the run.
    pub packets: u64,
    /// The whole machine's busy CPU-seconds during the run.
    pub busy_cpu_s: f64,
    /// busy_cpu_s per delivered packet, microseconds.
    pub us_per_packet: f64,
    /// What the box itself spent, measured directly: its ports' NAPI polls and xfwd's threads
    /// (`None`: not measured, e.g. on the wire, or in reports from before it was).
    #[serde(default)]
    pub box_cost: Option<BoxCost>,
    /// Per-core samples every 0.5 s.
    pub cpu: Vec<Sample>,
    /// Per-core averages over the run.
    pub cpu_avg: Vec<Shares>,
    /// xfwd arms: frames received per port and queue (`[port][queue]`).
    pub queue_rx: Vec<Vec<u64>>,
    /// Jain's fairness index over the bytes each flow's server received in the measured time
    /// (in reports from before it was said, over the senders' rates).
    pub fairness: Option<f64>,
    /// TCP: what the servers received in the measured time, Gb/s (`None` for packet-rate runs
    /// and older reports). Beside the reference method's sum of sender rates: with hundreds of
    /// flows what the senders wrote into their socket buffers counts as sent.
    #[serde(default)]
    pub received_gbps: Option<f64>,
    /// Round-trip times of pings sent during the run, milliseconds (one per answered ping:
    /// how many a percentile rests on).
    pub rtt_ms: Vec<f64>,
    /// Pings sent during the run, as ping counted them: the ones missing from `rtt_ms` went
    /// unanswered. None where not counted (`xfwd load`, older reports).
    #[serde(default)]
    pub pings_sent: Option<u64>,
    /// Round-trip times of pings sent just before the run, on the idle path, milliseconds.
    #[serde(default)]
    pub rtt_idle_ms: Vec<f64>,
    /// The whole machine's busy cores over one second with no traffic, just before the run
    /// (what a busy-polling forwarder costs when there is nothing to do).
    #[serde(default)]
    pub idle_busy_cores: Option<f64>,
    /// Wall-clock start and end of the measured part of the run, ms since the Unix epoch: what
    /// `xfwd report --monitor` matches a box's samples to (`xfwd load` records them).
    #[serde(default)]
    pub started_unix_ms: Option<u64>,
    /// See `started_unix_ms`.
    #[serde(default)]
    pub ended_unix_ms: Option<u64>,
    /// xfwd arms: how the workers ran and what queue management did, from xfwd's own counters
    /// at the end of the run (`None`: not an xfwd arm, or a report from before it was said).
    #[serde(default)]
    pub xfwd: Option<XfwdRun>,
    /// Seconds the box's kernel took to load the bench's table by `ip -batch` before the run
    /// (the kernel arm, and xfwd arms with `fib=kernel`; `None`: no table, or another arm).
    #[serde(default)]
    pub table_load_s: Option<f64>,
    /// xfwd arms: seconds from xfwd's start to its ready signal (its tables built, its program
    /// attached), the time from start to forwarding (`None`: another arm, or not measured).
    #[serde(default)]
    pub ready_s: Option<f64>,
    /// The rate search's outcome and every trial (`None`: no search); the run's other figures
    /// were then measured at the NDR.
    #[serde(default)]
    pub search: Option<super::search::Outcome>,
}

/// The box's own time in a run: the kernel's time in the NAPI polls of the box's ports (where
/// the kernel forwards, the XDP program runs and the AF_XDP copy is made, on veth) and xfwd's
/// threads' CPU time (where the workers run and the AF_XDP path's transmit system calls go).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct BoxCost {
    /// Nanoseconds in the box ports' polls.
    pub poll_ns: u64,
    /// Polls.
    pub polls: u64,
    /// Frames the polls took.
    pub polled_frames: u64,
    /// xfwd's threads' CPU time, ns (`None`: no xfwd ran, the kernel arm).
    pub process_ns: Option<u64>,
}

impl RunResult {
    /// The box's own time per delivered packet, µs: `None` when not measured, or when its ports'
    /// polls took fewer than 90 % of the delivered frames (a port without NAPI hands frames to
    /// the CPU's backlog, where they are not timed: the figure would leave them out).
    pub fn box_us_per_packet(&self) -> Option<f64> {
        let c = self.box_cost?;
        if self.packets == 0 || c.polled_frames.saturating_mul(10) < self.packets.saturating_mul(9) {
            return None;
        }
        Some((c.poll_ns + c.process_ns.unwrap_or(0)) as f64 / 1e3 / self.packets as f64)
    }
}

/// A run that did not complete, and why. Its arm is the [`ArmResult`] that lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailedRun {
    /// 1-based run number, as [`RunResult::run`] counts.
    pub run: u32,
    /// What went wrong: the error and its causes, on one line.
    pub error: String,
}

/// One arm: its name (`kernel`, `xfwd`, `xfwd:poll=busy`, `wire`) and its runs.
///
/// A failed run is listed in `failed`, never in `runs`: a reader that predates `failed` still
/// computes its statistics over the runs that measured something.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArmResult {
    /// Name.
    pub name: String,
    /// Runs that completed, in order; the statistics are theirs.
    pub runs: Vec<RunResult>,
    /// Runs that failed, in order (absent from reports written before it existed).
    #[serde(default)]
    pub failed: Vec<FailedRun>,
}

impl ArmResult {
    /// An arm with no runs yet.
    pub fn new(name: &str) -> ArmResult {
        ArmResult { name: name.to_owned(), runs: Vec::new(), failed: Vec::new() }
    }
}

/// The statistics of one figure across arms: a summary each, and each arm against the first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FigureStats {
    /// What: `gbps`, `delivered_pps`, `us_per_packet`, `forwarding_us_per_packet`,
    /// `box_us_per_packet`.
    pub figure: String,
    /// Per arm: (name, summary).
    pub summaries: Vec<(String, Summary)>,
    /// Per arm after the first that has a summary: (name, comparison against the first arm at
    /// 95 %, None when either has fewer than two measured runs).
    pub comparisons: Vec<(String, Option<Comparison>)>,
}

/// A whole A/B run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Schema version ([`SCHEMA`]).
    pub schema: u32,
    /// When it ran (seconds since the Unix epoch).
    pub started_unix: u64,
    /// How.
    pub conditions: Conditions,
    /// The arms, the baseline first.
    pub arms: Vec<ArmResult>,
    /// Statistics of the main figures.
    pub stats: Vec<FigureStats>,
    /// Things the reader should know (flows that did not spread, loss, …).
    pub warnings: Vec<String>,
    /// `--latency`: the arms run again at fixed loads, the same offered rate in every arm, for
    /// the RTT under each (empty: not asked for, and reports from before it).
    #[serde(default)]
    pub latency: Vec<LatencyAt>,
}

/// The arms at one fixed load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencyAt {
    /// The load, percent of the baseline arm's NDR (the median of its runs).
    pub percent: f64,
    /// The offered rate, packets per second.
    pub rate_pps: f64,
    /// Every arm's runs at it, the baseline first (their `rtt_ms` are the samples).
    pub arms: Vec<ArmResult>,
}

impl Report {
    /// The rate a frame-size sweep compares: the NDR where it was searched, else the delivered
    /// rate.
    pub fn sweep_figure(&self) -> &'static str {
        if self.stats.iter().any(|f| f.figure == "ndr_pps") {
            "ndr_pps"
        } else {
            "delivered_pps"
        }
    }

    /// Computes `stats` from the arms' completed runs (failed ones measured nothing): throughput,
    /// packet rate and CPU per packet, each path's own forwarding cost (CPU per packet minus the
    /// wire arm's median) when a `wire` arm ran, and the box's own time per packet where it was
    /// measured.
    pub fn compute_stats(&mut self) {
        type Figure = (&'static str, Box<dyn Fn(&RunResult) -> Option<f64>>);
        // Runs that counted no packets (e.g. `xfwd load`, which sees no CPU or counters of the
        // box) did not measure the per-packet figures.
        let per_packet = |r: &RunResult, v: f64| (r.packets > 0).then_some(v);
        let mut figures: Vec<Figure> = vec![
            ("gbps", Box::new(|r: &RunResult| Some(r.gbps))),
            ("delivered_pps", Box::new(move |r: &RunResult| per_packet(r, r.delivered_pps))),
            ("us_per_packet", Box::new(move |r: &RunResult| per_packet(r, r.us_per_packet))),
        ];
        let wire = self
            .arms
            .iter()
            .find(|a| a.name == "wire")
            .and_then(|a| Summary::of(&a.runs.iter().map(|r| r.us_per_packet).collect::<Vec<_>>()))
            .map(|s| s.median);
        if let Some(w) = wire {
            figures
                .push(("forwarding_us_per_packet", Box::new(move |r: &RunResult| per_packet(r, r.us_per_packet - w))));
        }
        figures.push(("box_us_per_packet", Box::new(RunResult::box_us_per_packet)));
        if self.arms.iter().flat_map(|a| &a.runs).any(|r| r.search.is_some()) {
            figures.push(("ndr_pps", Box::new(|r: &RunResult| r.search.as_ref()?.ndr_pps)));
            figures.push(("pdr_pps", Box::new(|r: &RunResult| r.search.as_ref()?.pdr_pps)));
        }
        self.stats = figures
            .iter()
            .map(|(name, f)| {
                let arms: Vec<&ArmResult> =
                    self.arms.iter().filter(|a| !(*name == "forwarding_us_per_packet" && a.name == "wire")).collect();
                let summaries: Vec<(String, Summary)> = arms
                    .iter()
                    .filter_map(|a| {
                        let v: Vec<f64> = a.runs.iter().filter_map(f).collect();
                        Summary::of(&v).map(|s| (a.name.clone(), s))
                    })
                    .collect();
                // Against the first arm itself: when it has no summary (every run failed),
                // there is nothing to compare with, rather than the next arm standing in.
                let base = arms.first().and_then(|b| summaries.iter().find(|(n, _)| *n == b.name)).map(|(_, s)| s);
                let comparisons = summaries
                    .iter()
                    .filter(|(n, _)| arms.first().is_some_and(|b| b.name != *n))
                    .map(|(n, s)| (n.clone(), base.and_then(|b| Comparison::of(b, s, 95.0))))
                    .collect();
                FigureStats { figure: (*name).to_owned(), summaries, comparisons }
            })
            .collect();
    }
}

/// A TCP run with `gbps` over two equal flows and `packets` delivered, for tests.
#[cfg(test)]
pub(crate) fn test_run(run: u32, gbps: f64, packets: u64) -> RunResult {
    RunResult {
        run,
        flows_bps: vec![gbps * 0.5e9; 2],
        gbps,
        flows_rtt: vec![Some(FlowRtt { mean_us: 400, min_us: 100, max_us: 900 }); 2],
        offered_pps: 0.0,
        delivered_pps: packets as f64 / 2.0,
        loss: 0.0,
        packets,
        busy_cpu_s: 1.0,
        us_per_packet: 1e6 / packets.max(1) as f64,
        box_cost: None,
        cpu: Vec::new(),
        cpu_avg: Vec::new(),
        queue_rx: Vec::new(),
        fairness: Some(1.0),
        received_gbps: None,
        rtt_ms: vec![0.5],
        pings_sent: Some(1),
        rtt_idle_ms: vec![0.1],
        idle_busy_cores: Some(0.1),
        started_unix_ms: None,
        ended_unix_ms: None,
        xfwd: None,
        table_load_s: None,
        ready_s: None,
        search: None,
    }
}

/// A TCP report of `arms`, statistics computed, for tests.
#[cfg(test)]
pub(crate) fn test_report(arms: Vec<ArmResult>) -> Report {
    let mut r = Report {
        schema: SCHEMA,
        started_unix: 1,
        conditions: Conditions {
            mode: "router".into(),
            test: "tcp".into(),
            ip: 4,
            queues: 1,
            flows: 2,
            frame: 0,
            frame_mix: String::new(),
            search: String::new(),
            time_s: 2,
            omit_s: 0,
            offered_pps: 0,
            kernel: "6.1".into(),
            cpus: 2,
            driver: "veth (namespace rig)".into(),
            xdp_mode: "native".into(),
            xsk_mode: "copy".into(),
            offloads: "off".into(),
            endpoints: String::new(),
            pings: String::new(),
            queueing: String::new(),
            scale: Default::default(),
            versions: Vec::new(),
        },
        arms,
        stats: Vec::new(),
        warnings: Vec::new(),
        latency: Vec::new(),
    };
    r.compute_stats();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(name: &str, runs: Vec<RunResult>, failed: &[(u32, &str)]) -> ArmResult {
        ArmResult {
            name: name.into(),
            runs,
            failed: failed.iter().map(|&(run, e)| FailedRun { run, error: e.into() }).collect(),
        }
    }

    fn summary(r: &Report, figure: &str, arm: &str) -> Option<Summary> {
        let f = r.stats.iter().find(|f| f.figure == figure).unwrap();
        f.summaries.iter().find(|(n, _)| n == arm).map(|(_, s)| *s)
    }

    #[test]
    fn statistics_are_over_the_runs_that_completed() {
        let r = test_report(vec![
            arm("kernel", vec![test_run(1, 4.0, 1000), test_run(3, 6.0, 1000)], &[(2, "iperf3: boom")]),
            arm("xfwd", Vec::new(), &[(1, "a"), (2, "b"), (3, "c")]),
        ]);
        let k = summary(&r, "gbps", "kernel").unwrap();
        assert_eq!((k.n, k.median, k.min, k.max), (2, 5.0, 4.0, 6.0));
        // No run of xfwd completed: no summary, and its comparison has no statistics.
        assert!(summary(&r, "gbps", "xfwd").is_none());
        let gbps = r.stats.iter().find(|f| f.figure == "gbps").unwrap();
        assert!(gbps.comparisons.is_empty(), "{:?}", gbps.comparisons);
    }

    #[test]
    fn an_arm_is_compared_with_the_first_arm_or_not_at_all() {
        // The baseline failed every run: the third arm is not compared with the second instead.
        let r = test_report(vec![
            arm("kernel", Vec::new(), &[(1, "x"), (2, "x")]),
            arm("xfwd", vec![test_run(1, 2.0, 10), test_run(2, 3.0, 10)], &[]),
            arm("xfwd:poll=busy", vec![test_run(1, 2.5, 10), test_run(2, 3.5, 10)], &[]),
        ]);
        let gbps = r.stats.iter().find(|f| f.figure == "gbps").unwrap();
        assert_eq!(gbps.comparisons, vec![("xfwd".to_owned(), None), ("xfwd:poll=busy".to_owned(), None)]);
        // With a baseline, each arm is compared with it.
        let r = test_report(vec![
            arm("kernel", vec![test_run(1, 4.0, 10), test_run(2, 4.2, 10)], &[]),
            arm("xfwd", vec![test_run(1, 2.0, 10), test_run(2, 2.2, 10)], &[(3, "x")]),
        ]);
        let gbps = r.stats.iter().find(|f| f.figure == "gbps").unwrap();
        let (name, cmp) = &gbps.comparisons[0];
        assert_eq!(name, "xfwd");
        assert!((cmp.unwrap().diff + 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_box_figure_is_its_polls_and_xfwds_threads_per_packet_or_nothing() {
        let cost = |polled_frames, process_ns| BoxCost { poll_ns: 600_000, polls: 20, polled_frames, process_ns };
        let with = |packets, c: Option<BoxCost>| RunResult { box_cost: c, ..test_run(1, 1.0, packets) };
        // The kernel arm: its polls alone, 600 µs over 1000 packets.
        let k = with(1000, Some(cost(1000, None))).box_us_per_packet().unwrap();
        assert!((k - 0.6).abs() < 1e-9, "{k}");
        // An xfwd arm: its threads' time added.
        let x = with(1000, Some(cost(990, Some(400_000)))).box_us_per_packet().unwrap();
        assert!((x - 1.0).abs() < 1e-9, "{x}");
        // Polls that took under 90 % of the delivered frames left the rest untimed: no figure.
        assert_eq!(with(1000, Some(cost(899, None))).box_us_per_packet(), None);
        assert_eq!(with(1000, None).box_us_per_packet(), None, "not measured");
        assert_eq!(with(0, Some(cost(0, None))).box_us_per_packet(), None, "no packets");
        // In the statistics: an arm without the figure has no summary, the others do.
        let r = test_report(vec![
            arm("kernel", vec![with(1000, None), with(1000, None)], &[]),
            arm("xfwd", vec![with(1000, Some(cost(1000, Some(0)))), with(2000, Some(cost(2000, Some(0))))], &[]),
        ]);
        assert!(summary(&r, "box_us_per_packet", "kernel").is_none());
        let x = summary(&r, "box_us_per_packet", "xfwd").unwrap();
        assert_eq!((x.n, x.min, x.max), (2, 0.3, 0.6));
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&json).unwrap().arms, r.arms);
    }

    #[test]
    fn failed_runs_round_trip_through_json() {
        let r =
            test_report(vec![arm("kernel", vec![test_run(1, 4.0, 1000)], &[(2, "iperf3: Address already in use")])]);
        let json = serde_json::to_string_pretty(&r).unwrap();
        assert!(json.contains(r#""failed": ["#), "{json}");
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.arms[0].failed, vec![FailedRun { run: 2, error: "iperf3: Address already in use".into() }]);
    }

    #[test]
    fn a_report_written_before_flow_rtts_and_ping_conditions_still_reads() {
        let mut v = serde_json::to_value(test_report(vec![arm("kernel", vec![test_run(1, 4.0, 1000)], &[])])).unwrap();
        assert!(v["arms"][0]["runs"][0]["flows_rtt"][0]["mean_us"] == 400, "{v}");
        v["arms"][0]["runs"][0].as_object_mut().unwrap().remove("flows_rtt").unwrap();
        v["conditions"].as_object_mut().unwrap().remove("pings").unwrap();
        let r: Report = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert!(r.arms[0].runs[0].flows_rtt.is_empty());
        assert!(r.conditions.pings.is_empty());
    }

    #[test]
    fn a_report_written_before_failed_runs_existed_still_reads() {
        // An arm as schema 1 wrote it before `failed` was added.
        let mut v = serde_json::to_value(test_report(vec![arm("kernel", vec![test_run(1, 4.0, 1000)], &[])])).unwrap();
        v["arms"][0].as_object_mut().unwrap().remove("failed").unwrap();
        let old = serde_json::to_string(&v).unwrap();
        assert!(!old.contains("failed"));
        let r: Report = serde_json::from_str(&old).unwrap();
        assert!(r.arms[0].failed.is_empty());
        assert_eq!(r.arms[0].runs.len(), 1);
    }
}
