//! What `xfwd bench` is asked: its options, the modes, frame sizes, traffic senders and arms.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::setup::settings::Opt;

use super::report::Conditions;
use super::scale::{self, Scale};
use super::search;

pub(super) const RIG_ROUTER: &str = include_str!("../../config/examples/rig-router.toml");
pub(super) const RIG_ROUTER6: &str = include_str!("../../config/examples/rig-router6.toml");

/// The IP version a bench's traffic runs over.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IpVersion {
    /// IPv4 (the reference's).
    #[default]
    #[value(name = "4")]
    V4,
    /// IPv6, on the dual-stack rig (RFC 5180's 2001:2::/48).
    #[value(name = "6")]
    V6,
}

impl IpVersion {
    /// 4 or 6.
    pub fn number(self) -> u8 {
        match self {
            IpVersion::V4 => 4,
            IpVersion::V6 => 6,
        }
    }
}

/// The smallest IPv6 UDP frame trafgen sends with a payload: Ethernet 14, IPv6 40, UDP 8, one
/// byte, and the 4-byte FCS.
pub const MIN_FRAME6: u32 = 4 + 14 + 40 + 8 + 1;

/// A file under /run/xfwd removed on drop, whatever path the run takes out.
pub(super) struct TempFile(pub(super) PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What the box does in a bench.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchMode {
    /// Router (IPv4, or IPv6 with --ip 6): the kernel's forwarding against `xfwd router`.
    Router,
    /// Learning bridge: a Linux bridge against `xfwd bridge`.
    Bridge,
}

impl std::fmt::Display for BenchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BenchMode::Router => "router",
            BenchMode::Bridge => "bridge",
        })
    }
}

/// Options of `xfwd bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// What the box does: router or bridge (both: router,bridge).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "router")]
    pub mode: Vec<BenchMode>,
    /// Arms, the baseline first: kernel, xfwd (the AF_XDP path), xfwd:path=xdp (the XDP path),
    /// xfwd:poll=busy (a variant; options joined with +), xfwd:fib=kernel (xfwd forwarding by
    /// the kernel's routes: one configuration for both paths), xfwd:bin=PATH (another build of
    /// xfwd, to compare two builds in one run), wire.
    #[arg(long = "arm", value_delimiter = ',', default_value = "kernel,xfwd,wire")]
    pub arms: Vec<String>,
    /// Runs per arm.
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Queues per port (and xfwd workers); flows are spread over them.
    #[arg(long, default_value_t = 1)]
    pub queues: u32,
    /// Flows (TCP: iperf3 clients with fixed ports; packet rate: UDP source ports).
    #[arg(long, default_value_t = 4)]
    pub flows: u32,
    /// TCP: flows per iperf3 client process (parallel streams from consecutive fixed ports), 1
    /// to 128. With hundreds of flows, a few processes share out their CPU time among their
    /// streams, so that the flows' shares are the path's rather than the scheduler's.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    pub streams: u32,
    /// Seconds per run.
    #[arg(long, default_value_t = 10)]
    pub time: u32,
    /// Seconds left out at the start of each TCP run.
    #[arg(long, default_value_t = 2)]
    pub omit: u32,
    /// Packet-rate test instead of TCP: the frame size in bytes (64), a sweep of sizes run one
    /// after the other (64,128,256,512,1024,1518), or `imix` (CSIT's IPv4 IMIX: 28×64, 16×570,
    /// 4×1518 in that order, repeated; IPv6's smallest is 78).
    #[arg(long = "frame", value_delimiter = ',', value_parser = parse_frame)]
    pub frames: Vec<FrameSize>,
    /// The packet-rate test being run: one of `frames` at a time (`None`: TCP).
    #[arg(skip)]
    pub frame: Option<FrameSize>,
    /// Packet-rate test: offered rate in packets per second, the same in every arm (0: flat out).
    #[arg(long, default_value_t = 100_000)]
    pub rate: u64,
    /// IP version of the traffic: 4, or 6 (router mode, on the dual-stack rig).
    #[arg(long, value_enum, default_value = "4")]
    pub ip: IpVersion,
    /// Short preset: 2 runs of 3 s, no omit (a few minutes for both modes).
    #[arg(long)]
    pub quick: bool,
    /// GRO on at the box's ports in every arm. It gives the kernel arm's ports the NAPI that an
    /// XDP program gives the xfwd arms' (a veth without either hands its frames to the CPU's
    /// backlog), so that the box's own time per frame (`box µs`) is measured for the kernel arm
    /// too. As a real NIC has GRO on by default, this is also the kernel's usual condition;
    /// without it the kernel arm's box µs is not measured.
    #[arg(long)]
    pub box_gro: bool,
    /// Packet-rate test: what sends the frames. `trafgen` writes them to a packet socket: they
    /// reach the box as socket buffers, which an XDP program on a veth port sees only after
    /// the kernel has copied each into a page. `trafgen-xdp` sends trafgen's frames into a
    /// helper veth in the client host whose XDP program redirects them on into the client's
    /// port: they reach the box as XDP frames, as from a NIC, and that copy is the client's.
    /// `xdp` is xfwd's own generator (BPF_PROG_TEST_RUN live frames, which some kernels
    /// refuse): the same for the box, without trafgen. Both set --box-gro (a veth port needs
    /// NAPI to take XDP frames).
    #[arg(long, value_enum, default_value = "trafgen")]
    pub sender: Sender,
    /// Router: a full IPv4 table of N prefixes in every arm (the kernel's table by `ip -batch`,
    /// xfwd's routes file; the kernel's again for `fib=kernel`): an Internet table's length mix
    /// (mostly /24, /16–/23 in proportion, a few longer), outside 198.18.0.0/15 (no frame goes
    /// to them), through 4 next hops on the servers' subnet, drawn from --seed. Loading it is
    /// timed in every run.
    #[arg(long, default_value_t = 0)]
    pub routes: u32,
    /// Router, --ip 6: a full IPv6 table of N prefixes (mostly /48 and /32–/44), outside
    /// 2001:2::/48, as --routes.
    #[arg(long, default_value_t = 0)]
    pub routes6: u32,
    /// Router, packet-rate test: N destinations inside the benchmarking range (IPv4 from
    /// 198.18.64.0, at most 114688; IPv6 from 2001:2:0:8000::), each with its own host route,
    /// sent to in turn (uniform); what the server host's port receives is delivered.
    #[arg(long, default_value_t = 0)]
    pub dsts: u32,
    /// Packet-rate test: search each arm's highest rate with no loss (`ndr`, RFC 2544's
    /// throughput) and with at most 0.5 % lost (`pdr`), by trials at fixed rates (bisection
    /// from a flat-out trial; a losing trial repeated once before a bound moves), in every run;
    /// then the run's figures (CPU per packet, box µs) are measured at the NDR.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub search: Vec<search::Goal>,
    /// --search: seconds per trial.
    #[arg(long, default_value_t = 2)]
    pub trial: u32,
    /// --search: stop bisecting when the bounds are this close, percent of the upper one.
    #[arg(long, default_value_t = 1.0)]
    pub resolution: f64,
    /// --search: trials at the found rate that must pass before it stands.
    #[arg(long, default_value_t = 1)]
    pub final_trials: u32,
    /// With `--search ndr`: run the arms again at these loads, percent of the baseline arm's
    /// NDR (the same offered rate in every arm, e.g. 10,50,90), for the RTT under each: pings
    /// through the path every 5 ms, p50/p90/p99/p99.9/max, plotted as CDFs.
    #[arg(long, value_delimiter = ',')]
    pub latency: Vec<f64>,
    /// No traffic: time a route lookup per frame over the whole table instead (--routes, and
    /// --routes6), at one route and at the full table: the XDP path's program, the kernel's FIB
    /// (bpf_fib_lookup) and the workers' FIB, on the same destinations drawn from the table
    /// (BPF_PROG_TEST_RUN, nothing sent); writes lookups.json.
    #[arg(long)]
    pub lookups: bool,
    /// The seed --routes and --routes6 are drawn from: the same tables for the same seed.
    #[arg(long, default_value_t = scale::SEED)]
    pub seed: u64,
    /// Output folder (default: a fresh `xfwd-bench-<time>` in the current folder).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl BenchArgs {
    /// The scale the router runs at (`--routes`, `--routes6`, `--dsts`, `--seed`).
    pub fn scale(&self) -> Scale {
        Scale {
            routes: self.routes,
            routes6: self.routes6,
            dsts: self.dsts,
            v6: self.ip == IpVersion::V6,
            seed: self.seed,
        }
    }
}

/// A packet-rate test's frames: one size for all, or an IMIX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// Every frame this many bytes, FCS included.
    Bytes(u32),
    /// CSIT's IMIX: 28 frames of 64 bytes (IPv6: 78), 16 of 570, 4 of 1518, in that order.
    Imix,
}

/// `--frame`'s values: a size in bytes or `imix`.
pub(super) fn parse_frame(s: &str) -> std::result::Result<FrameSize, String> {
    if s == "imix" {
        return Ok(FrameSize::Imix);
    }
    match s.parse::<u32>() {
        Ok(n) if (64..=9018).contains(&n) => Ok(FrameSize::Bytes(n)),
        _ => Err(format!("`{s}`: a frame size in bytes (64 to 9018, FCS included) or `imix`")),
    }
}

impl FrameSize {
    /// How it is named in a test, a file name and a table: `64`, `imix`.
    pub fn label(self) -> String {
        match self {
            FrameSize::Bytes(n) => n.to_string(),
            FrameSize::Imix => "imix".into(),
        }
    }

    /// One cycle of the frames sent, in order: (bytes, how many).
    pub fn cycle(self, v6: bool) -> Vec<(u32, u32)> {
        match self {
            FrameSize::Bytes(n) => vec![(n, 1)],
            FrameSize::Imix => vec![(if v6 { MIN_FRAME6 + 11 } else { 64 }, 28), (570, 16), (1518, 4)],
        }
    }

    /// The mean frame, bytes with the FCS.
    pub fn mean_bytes(self, v6: bool) -> f64 {
        let c = self.cycle(v6);
        let frames: u32 = c.iter().map(|(_, n)| n).sum();
        c.iter().map(|(b, n)| f64::from(b * n)).sum::<f64>() / f64::from(frames)
    }

    /// The smallest frame it sends.
    pub(super) fn smallest(self, v6: bool) -> u32 {
        self.cycle(v6).iter().map(|(b, _)| *b).min().unwrap_or(0)
    }

    /// The frames a report's conditions describe (`None`: a TCP test).
    pub fn of(c: &Conditions) -> Option<FrameSize> {
        match c.test.strip_prefix("udp")? {
            "imix" => Some(FrameSize::Imix),
            _ => Some(FrameSize::Bytes(c.frame)),
        }
    }

    /// The conditions' words for an IMIX (empty for one size).
    pub(super) fn said(self, v6: bool) -> String {
        match self {
            FrameSize::Bytes(_) => String::new(),
            FrameSize::Imix => format!(
                "IMIX (CSIT's): {} in that order, repeated; mean {:.1} bytes",
                self.cycle(v6).iter().map(|(b, n)| format!("{n}×{b}")).collect::<Vec<_>>().join(", "),
                self.mean_bytes(v6)
            ),
        }
    }
}

/// What sends a packet-rate test's frames.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sender {
    /// trafgen (netsniff-ng), through a packet socket.
    #[default]
    Trafgen,
    /// trafgen into a helper veth in the client host whose XDP program redirects each frame
    /// into the client's port ([`crate::rig::Netns::xdp_hop`]): the box receives XDP frames.
    TrafgenXdp,
    /// xfwd's XDP frame generator (`xfwd_dataplane::io::probe::frame_gen`, live frames).
    Xdp,
}

impl Sender {
    /// Whether the box receives the frames as XDP frames (as from a NIC), which a veth port
    /// takes only with NAPI.
    pub(super) fn xdp_frames(self) -> bool {
        matches!(self, Sender::TrafgenXdp | Sender::Xdp)
    }

    /// The option's value, as given on the command line.
    pub(super) fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self).map(|v| v.get_name().to_owned()).unwrap_or_default()
    }
}

/// Marks an xfwd arm with `fib=kernel` among its arguments: the box's kernel gets the rig's
/// addresses and routes (as the kernel arm's, forwarding off) and xfwd mirrors them
/// (`[fib] source = "kernel"`), so that both paths route by one configuration.
pub(super) const FIB_KERNEL: &str = "fib=kernel";
/// How an arm's `bin=PATH` travels in its arguments (see `one_run`).
pub(super) const BIN: &str = "bin=";

/// The router file of an xfwd arm with `fib=kernel`: the ports by name only.
pub(super) const RIG_KERNEL: &str = include_str!("../../config/examples/rig-kernel.toml");

/// An arm as parsed from `--arm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arm {
    /// The kernel's own path (Linux bridge, or ip_forward).
    Kernel,
    /// xfwd, with extra command-line options (from `xfwd:key=value,…`).
    Xfwd(Vec<String>),
    /// No box: generator to sink through one veth pair.
    Wire,
}

impl Arm {
    /// Parses `kernel`, `wire`, `xfwd` or `xfwd:poll=busy` (options become `--poll busy`).
    pub fn parse(s: &str) -> Result<Arm> {
        match s.split_once(':') {
            None if s == "kernel" => Ok(Arm::Kernel),
            None if s == "wire" => Ok(Arm::Wire),
            None if s == "xfwd" => Ok(Arm::Xfwd(Vec::new())),
            Some(("xfwd", opts)) => {
                let mut args = Vec::new();
                for kv in opts.split('+') {
                    let (k, v) =
                        kv.split_once('=').with_context(|| format!("--arm {s}: write options as key=value"))?;
                    // The worker options' flags (one table: io::setup::settings), but `queues`, which
                    // the bench sets for every arm (--queues), and the bench's own keys.
                    let keys = || {
                        Opt::ALL
                            .iter()
                            .map(|o| o.flag().trim_start_matches('-'))
                            .filter(|&f| f != "queues")
                            .chain(["fib", "bin"])
                    };
                    if !keys().any(|key| key == k) {
                        bail!(
                            "--arm {s}: `{k}` is not an xfwd option here ({})",
                            keys().collect::<Vec<_>>().join(", ")
                        );
                    }
                    if k == "huge-pages" {
                        // A switch: huge-pages=on.
                        if v == "on" {
                            args.push("--huge-pages".to_owned());
                        }
                        continue;
                    }
                    if k == "bin" {
                        // Not an option of xfwd's either: which xfwd binary the arm runs (an
                        // older build, to compare two builds in one run).
                        if !Path::new(v).is_file() {
                            bail!("--arm {s}: bin={v} is not a file (give the path of an xfwd binary)");
                        }
                        args.push(format!("{BIN}{v}"));
                        continue;
                    }
                    if k == "fib" {
                        // Not an option of xfwd's: the arm's set-up (see `one_run`).
                        match v {
                            "kernel" => args.push(FIB_KERNEL.to_owned()),
                            "config" => {}
                            _ => bail!("--arm {s}: fib is `config` (the router file's routes) or `kernel`"),
                        }
                        continue;
                    }
                    args.push(format!("--{k}"));
                    args.push(v.to_owned());
                }
                Ok(Arm::Xfwd(args))
            }
            _ => bail!("--arm {s}: expected kernel, xfwd, xfwd:poll=busy or wire"),
        }
    }
}
