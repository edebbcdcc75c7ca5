//! `report.json`: every raw sample of an A/B run and the conditions it ran under.
//!
//! Schema version 1 (the `schema` field), documented in README.md under "The A/B harness". Fields
//! are only ever added; a reader accepts unknown ones.

use serde::{Deserialize, Serialize};

use super::cpu::{Sample, Shares};
use super::stats::{Comparison, Summary};

/// The schema version this build writes.
pub const SCHEMA: u32 = 1;

/// What was measured, and how.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Conditions {
    /// `router` or `bridge`.
    pub mode: String,
    /// The test: `tcp` (iperf3, sum of sender rates) or `udp64` (64-byte frames, packet rate).
    pub test: String,
    /// Queues per port (and workers).
    pub queues: u32,
    /// Flows.
    pub flows: u32,
    /// Frame size for packet-rate tests (0 for TCP).
    pub frame: u32,
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
    /// Versions: xfwd, iperf3, trafgen.
    pub versions: Vec<(String, String)>,
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
    /// Per-core samples every 0.5 s.
    pub cpu: Vec<Sample>,
    /// Per-core averages over the run.
    pub cpu_avg: Vec<Shares>,
    /// xfwd arms: frames received per port and queue ([port][queue]).
    pub queue_rx: Vec<Vec<u64>>,
    /// Jain's fairness index over the flows.
    pub fairness: Option<f64>,
    /// Round-trip times of pings sent during the run, milliseconds.
    pub rtt_ms: Vec<f64>,
    /// Round-trip times of pings sent just before the run, on the idle path, milliseconds.
    #[serde(default)]
    pub rtt_idle_ms: Vec<f64>,
    /// The whole machine's busy cores over one second with no traffic, just before the run
    /// (what a busy-polling forwarder costs when there is nothing to do).
    #[serde(default)]
    pub idle_busy_cores: Option<f64>,
}

/// One arm: its name (`kernel`, `xfwd`, `xfwd:poll=busy`, `wire`) and its runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArmResult {
    /// Name.
    pub name: String,
    /// Runs, in order.
    pub runs: Vec<RunResult>,
}

/// The statistics of one figure across arms: a summary each, and each arm against the first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FigureStats {
    /// What: `gbps`, `delivered_pps`, `us_per_packet`, `forwarding_us_per_packet`.
    pub figure: String,
    /// Per arm: (name, summary).
    pub summaries: Vec<(String, Summary)>,
    /// Per arm after the first: (name, comparison against the first at 95 %).
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
}

impl Report {
    /// Computes `stats` from the arms' runs: throughput, packet rate and CPU per packet, and
    /// each path's own forwarding cost (CPU per packet minus the wire arm's median) when a
    /// `wire` arm ran.
    pub fn compute_stats(&mut self) {
        type Figure = (&'static str, Box<dyn Fn(&RunResult) -> f64>);
        let mut figures: Vec<Figure> = vec![
            ("gbps", Box::new(|r: &RunResult| r.gbps)),
            ("delivered_pps", Box::new(|r: &RunResult| r.delivered_pps)),
            ("us_per_packet", Box::new(|r: &RunResult| r.us_per_packet)),
        ];
        let wire = self
            .arms
            .iter()
            .find(|a| a.name == "wire")
            .and_then(|a| Summary::of(&a.runs.iter().map(|r| r.us_per_packet).collect::<Vec<_>>()))
            .map(|s| s.median);
        if let Some(w) = wire {
            figures.push(("forwarding_us_per_packet", Box::new(move |r: &RunResult| r.us_per_packet - w)));
        }
        self.stats = figures
            .iter()
            .map(|(name, f)| {
                let arms: Vec<&ArmResult> =
                    self.arms.iter().filter(|a| !(*name == "forwarding_us_per_packet" && a.name == "wire")).collect();
                // Runs that counted no packets (e.g. `xfwd load`, which sees no CPU or
                // counters of the box) did not measure the per-packet figures.
                let measured = |r: &&RunResult| *name == "gbps" || r.packets > 0;
                let summaries: Vec<(String, Summary)> = arms
                    .iter()
                    .filter_map(|a| {
                        let v: Vec<f64> = a.runs.iter().filter(measured).map(f).collect();
                        Summary::of(&v).map(|s| (a.name.clone(), s))
                    })
                    .collect();
                let comparisons = summaries
                    .iter()
                    .skip(1)
                    .map(|(n, s)| (n.clone(), summaries.first().and_then(|(_, b)| Comparison::of(b, s, 95.0))))
                    .collect();
                FigureStats { figure: (*name).to_owned(), summaries, comparisons }
            })
            .collect();
    }
}
