//! `xfwd bench`: the A/B run on a rig it builds itself.
//!
//! Arms run interleaved (A B C A B C …) so that drift on a noisy machine falls on every arm
//! alike. Each run: the arm is set up (kernel bridge or `ip_forward` with the router file's
//! addresses; `xfwd bridge|router`; or nothing, on the direct wire), the traffic runs while
//! /proc/stat is sampled every 0.5 s and pings measure RTT under load, and the arm is torn down.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::probe::frame_gen::{self, udp_frame, FrameGen, UdpSpec};
use xfwd_dataplane::io::probe::poll_time::{PollTime, PollTimer};
use xfwd_dataplane::io::program::xdp::XdpCounter;
use xfwd_dataplane::io::setup::settings::Opt;
use xfwd_dataplane::io::view::EGRESS_REFUSED;
use xfwd_dataplane::load::LoopTotals;

use super::cpu::{self, Sampler};
use super::report::{ArmResult, BoxCost, Conditions, FailedRun, Report, RunResult, XfwdRun, SCHEMA};
use super::scale::{self, Scale};
use super::search;
use super::stats::{jain, percentile, Summary};
use crate::rig::{self, Netns, Rig, XfwdProcess};

const RIG_ROUTER: &str = include_str!("../../config/examples/rig-router.toml");
const RIG_ROUTER6: &str = include_str!("../../config/examples/rig-router6.toml");

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
struct TempFile(PathBuf);

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
fn parse_frame(s: &str) -> std::result::Result<FrameSize, String> {
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
    fn smallest(self, v6: bool) -> u32 {
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
    fn said(self, v6: bool) -> String {
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
    /// into the client's port ([`Netns::xdp_hop`]): the box receives XDP frames.
    TrafgenXdp,
    /// xfwd's XDP frame generator (`xfwd_dataplane::io::probe::frame_gen`, live frames).
    Xdp,
}

impl Sender {
    /// Whether the box receives the frames as XDP frames (as from a NIC), which a veth port
    /// takes only with NAPI.
    fn xdp_frames(self) -> bool {
        matches!(self, Sender::TrafgenXdp | Sender::Xdp)
    }

    /// The option's value, as given on the command line.
    fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self).map(|v| v.get_name().to_owned()).unwrap_or_default()
    }
}

/// Marks an xfwd arm with `fib=kernel` among its arguments: the box's kernel gets the rig's
/// addresses and routes (as the kernel arm's, forwarding off) and xfwd mirrors them
/// (`[fib] source = "kernel"`), so that both paths route by one configuration.
const FIB_KERNEL: &str = "fib=kernel";
/// How an arm's `bin=PATH` travels in its arguments (see `one_run`).
const BIN: &str = "bin=";

/// The router file of an xfwd arm with `fib=kernel`: the ports by name only.
const RIG_KERNEL: &str = include_str!("../../config/examples/rig-kernel.toml");

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

fn command_version(cmd: &str, arg: &str) -> String {
    std::process::Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| {
            let t = if o.stdout.is_empty() { o.stderr } else { o.stdout };
            String::from_utf8_lossy(&t).lines().next().unwrap_or("").trim().to_owned()
        })
        .unwrap_or_else(|_| "not installed".into())
}

fn rx_packets(ns: &Netns, dev: &str) -> u64 {
    ns.link_stat(dev, "rx_packets").unwrap_or(0)
}

fn tx_packets(ns: &Netns, dev: &str) -> u64 {
    ns.link_stat(dev, "tx_packets").unwrap_or(0)
}

/// What `dev` sent, and what it dropped because its peer's ring was full: a veth counts a
/// frame its peer could not take (the box's input ring overflowing) in `tx_dropped`, which a
/// NIC would count as the box's receive drop; it was offered to the box all the same.
fn tx_offered(ns: &Netns, dev: &str) -> u64 {
    tx_packets(ns, dev) + ns.link_stat(dev, "tx_dropped").unwrap_or(0)
}

fn mac(ns: &Netns, dev: &str) -> Result<String> {
    Ok(String::from_utf8_lossy(&ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")])?.stdout).trim().to_owned())
}

/// The traffic's endpoints on a rig: where the servers and clients run, their addresses, and
/// the MAC the client's frames go to (the box's, or the peer's on a bridge or the wire).
struct Endpoints<'a> {
    server: &'a Netns,
    client: &'a Netns,
    server_addr: &'static str,
    client_addr: &'static str,
    next_mac: String,
}

fn endpoints<'a>(mode: BenchMode, r: &'a Rig, wire: bool, ip: IpVersion) -> Result<Endpoints<'a>> {
    let v6 = ip == IpVersion::V6;
    Ok(if wire {
        Endpoints {
            server: &r.h1,
            client: &r.h2,
            server_addr: if v6 { rig::H1_ADDR6 } else { rig::H1_ADDR },
            client_addr: if v6 { rig::H2_ADDR6 } else { rig::H2_ADDR },
            next_mac: mac(&r.h1, "eth0")?,
        }
    } else if mode == BenchMode::Router {
        // The reference: clients behind eth4 (h2) reach the servers behind eth5 (h1).
        Endpoints {
            server: &r.h1,
            client: &r.h2,
            server_addr: if v6 { "2001:2:0:10::1" } else { "198.18.10.1" },
            client_addr: if v6 { "2001:2:0:30::2" } else { "198.18.30.2" },
            next_mac: mac(&r.boxns, "eth4")?,
        }
    } else {
        Endpoints {
            server: &r.h2,
            client: &r.h1,
            server_addr: rig::H2_ADDR,
            client_addr: rig::H1_ADDR,
            next_mac: mac(&r.h2, "eth0")?,
        }
    })
}

/// Takes the kernel arm down again, from whatever state its set-up reached.
fn kernel_down(mode: BenchMode, r: &Rig, ip: IpVersion, scale: &Scale) -> Result<()> {
    if mode == BenchMode::Bridge && r.boxns.ip(&["link", "show", "br0"]).is_err() {
        // The set-up failed before the bridge existed: nothing to remove.
        return Ok(());
    }
    kernel_up(mode, r, false, ip, scale).map(drop)
}

/// The kernel arm: a Linux bridge, or the embedded router file applied by `xfwd kernel`'s own
/// commands (the same addresses and routes xfwd is given) with forwarding on, IPv6's per
/// interface as `xfwd kernel` switches it, and the bench's table (see [`kernel_config`]).
fn kernel_up(mode: BenchMode, r: &Rig, up: bool, ip: IpVersion, scale: &Scale) -> Result<Option<f64>> {
    if mode == BenchMode::Bridge {
        if up {
            r.boxns.ip(&["link", "add", "br0", "type", "bridge"])?;
            r.boxns.ip(&["link", "set", "eth4", "master", "br0"])?;
            r.boxns.ip(&["link", "set", "eth5", "master", "br0"])?;
            r.boxns.ip(&["link", "set", "br0", "up"])?;
        } else {
            r.boxns.ip(&["link", "del", "br0"])?;
        }
        return Ok(None);
    }
    kernel_config(r, up, true, ip, scale)
}

/// The embedded router file applied to the box's kernel by `xfwd kernel`'s own commands (`up`),
/// or taken back; with `forwarding`, the kernel's forwarding switches follow (the kernel arm),
/// else they stay off (an xfwd arm that mirrors the kernel's routes). The bench's table
/// (`scale`) goes in after the file's routes, by `ip -batch`, and out first, by its protocol
/// number; returns the seconds its loading took (`None`: no table, or taken down).
fn kernel_config(r: &Rig, up: bool, forwarding: bool, ip: IpVersion, scale: &Scale) -> Result<Option<f64>> {
    // The embedded file names no routes file: nothing is read.
    let no_routes_file = |p: &Path| Err(std::io::Error::new(std::io::ErrorKind::NotFound, p.display().to_string()));
    let (name, text) = rig_router(ip);
    let config = xfwd_config::RouterConfig::parse(Path::new(name), text, no_routes_file)
        .context("the embedded rig router file")?;
    let (apply, undo) = crate::kernel::router_commands(&config);
    let mut loaded = None;
    if up {
        crate::kernel::ip_batch_in(Some(r.boxns.name()), &apply, false)?;
        if scale.any() {
            let batch = scale.kernel_batch();
            let t = Instant::now();
            crate::kernel::ip_batch_text_in(Some(r.boxns.name()), &batch, false)
                .with_context(|| format!("loading the bench's {} routes into the box's kernel", scale.total()))?;
            loaded = Some(t.elapsed().as_secs_f64());
        }
    } else {
        if scale.any() {
            let proto = scale::PROTO.to_string();
            r.boxns.ip(&["route", "flush", "proto", &proto])?;
            if scale.v6 {
                r.boxns.ip(&["-6", "route", "flush", "proto", &proto])?;
            }
        }
        crate::kernel::ip_batch_in(Some(r.boxns.name()), &undo, true)?;
    }
    if !forwarding {
        return Ok(loaded);
    }
    // The box's switches start off on the rig; the kernel arm turns them on and back off.
    let has = |k: &str| r.boxns.exec(&["test", "-e", &format!("/proc/sys/{k}")]).is_ok();
    for k in crate::kernel::forwarding_switches(&config, has) {
        r.boxns.exec(&["sysctl", "-qw", &format!("{k}={}", u8::from(up))])?;
    }
    Ok(loaded)
}

/// The embedded rig router file for `ip`: its name (for errors) and text.
fn rig_router(ip: IpVersion) -> (&'static str, &'static str) {
    match ip {
        IpVersion::V4 => ("config/examples/rig-router.toml", RIG_ROUTER),
        IpVersion::V6 => ("config/examples/rig-router6.toml", RIG_ROUTER6),
    }
}

/// The interval between pings, idle and under load, in ms.
///
/// 5 ms, so that a p99 is a percentile and not the largest of a few dozen samples (at the
/// 0.2 s this replaced, a `--quick` arm had about 30). ping falls behind its pace when the
/// CPUs are busy: on the shared 2-CPU machine, with other work running, a kernel arm got 65
/// answers a second at 10 ms (xfwd 95), which would leave a `--quick` arm (2 runs of 3 s)
/// under 500; at 5 ms it gets about twice that (200 a second on a quiet machine), and a
/// default bench (5 runs of 10 + 2 s) several thousand per arm. What it adds to the path: 200 requests and 200 replies a second of 98-byte frames,
/// 0.3 Mb/s, which is 0.4 % of the 64-byte test's default 100,000 frames/s and under 0.5 % of
/// the frames of a TCP run on the rig (1-15 Gb/s of 1,514-byte frames: 80,000 to 1.2 million a
/// second); ping's own 200 wake-ups a second are small beside the CPU figures.
pub const PING_INTERVAL_MS: u32 = 5;

/// Pings in the idle measurement before each run: half a second at [`PING_INTERVAL_MS`].
pub const IDLE_PINGS: u32 = 100;

/// ping's `-i` for [`PING_INTERVAL_MS`], in seconds.
/// The pinger's nice value: ahead of the traffic generators it measures beside, so that its
/// samples are the path's delay and not its own wait for a CPU. At nice 0 beside trafgen on
/// the same CPU it sent 118–261 of the 1,600 requests of an 8 s run.
const PINGER_NICE: i32 = -10;

fn ping_interval() -> String {
    format!("{:.3}", f64::from(PING_INTERVAL_MS) / 1000.0)
}

/// A ping running until [`stop_pings`], its output read as it comes: a pipe left unread fills
/// after some 1,000 lines, and ping then blocks on it (at 5 ms, some 6 s into a run) and stops
/// sending.
struct Pings {
    proc: rig::Spawned,
    output: std::thread::JoinHandle<String>,
}

/// Pings `addr` from `from` every [`PING_INTERVAL_MS`] until stopped.
fn start_pings(from: &Netns, addr: &str) -> Result<Pings> {
    let mut c = from.command("nice");
    c.args(["-n", &PINGER_NICE.to_string(), "ping", "-i", &ping_interval(), "-W", "1", addr])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut proc = rig::Spawned { child: c.spawn().context("starting ping")? };
    let mut stdout = proc.child.stdout.take().context("ping's output")?;
    let output = std::thread::spawn(move || {
        let mut out = String::new();
        // Until ping exits (or is killed): its pipe's end is the end of the output.
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        out
    });
    Ok(Pings { proc, output })
}

/// Stops the pings; returns their RTTs in ms and how many were sent (None when ping did not
/// say).
fn stop_pings(mut p: Pings) -> (Vec<f64>, Option<u64>) {
    p.proc.signal(libc::SIGINT);
    // A ping that does not exit is killed here, which ends its output too.
    let _ = p.proc.wait_timeout(Duration::from_secs(3));
    let out = p.output.join().unwrap_or_default();
    (parse_ping_rtts(&out), parse_ping_sent(&out))
}

/// How many pings were sent, from ping's summary (`500 packets transmitted, 322 received, …`).
pub fn parse_ping_sent(text: &str) -> Option<u64> {
    text.lines().find(|l| l.contains(" packets transmitted"))?.split_whitespace().next()?.parse().ok()
}

/// RTTs (ms) from ping's output lines (`… time=0.123 ms`).
pub fn parse_ping_rtts(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The running xfwd's report, from its control socket.
fn xfwd_report(control: &str) -> Result<xfwd_dataplane::io::Report> {
    let json = crate::control::query(std::path::Path::new(control), "stats-json")?;
    serde_json::from_str(&json).context("xfwd's stats JSON")
}

/// What xfwd's own counters say of a run: scheduling and queue management.
fn xfwd_run_of(rep: &xfwd_dataplane::io::Report) -> XfwdRun {
    let drops = |name: &str| {
        rep.ports.iter().flat_map(|p| p.total.drops.iter()).filter(|(n, _)| n == name).map(|(_, v)| v).sum::<u64>()
    };
    let mut hist = vec![0u64; xfwd_dataplane::stats::SOJOURN_BUCKETS];
    for q in &rep.queues {
        for (h, n) in hist.iter_mut().zip(&q.sojourn) {
            *h += n;
        }
    }
    XfwdRun {
        rt_priority: rep.rt_priority,
        rt_yields: rep.queues.iter().map(|q| q.rt_yields).sum(),
        aqm_drops: drops("aqm-drop"),
        ecn_marks: rep.ports.iter().map(|p| p.total.ecn_marked).sum(),
        sojourn_p99_ns: xfwd_dataplane::stats::sojourn_quantile(&hist, 0.99),
        unstamped: rep.queues.iter().map(|q| q.unstamped).sum(),
        aqm: rep.aqm.clone(),
        fq_overflow: drops("fq-overflow"),
        fq_high_water: rep.queues.iter().map(|q| q.fq_high_water).max().unwrap_or(0),
        fq_collisions: rep.queues.iter().map(|q| q.fq_collisions).sum(),
        workers: Vec::new(),
        in_program: None,
        egress_refused: None,
    }
}

/// Whether an arm runs xfwd with its defaults.
fn report_has_default_xfwd(arms: &[(String, Arm)]) -> bool {
    arms.iter().any(|(_, a)| matches!(a, Arm::Xfwd(extra) if extra.is_empty()))
}

/// The trafgen configuration for `flows` UDP flows of `frame`-byte frames to `dsts`
/// destinations from `dst` up (0 or 1: `dst` alone), each in turn.
pub fn trafgen_config(dst_mac: &str, src_mac: &str, src: &str, dst: &str, flows: u32, frame: u32, dsts: u32) -> String {
    // Ethernet 14 + IPv4 20 (IPv6 40) + UDP 8 + payload; the NIC adds the 4-byte FCS to reach
    // `frame`.
    let v6 = src.contains(':');
    let payload = frame.saturating_sub(4 + 14 + if v6 { 40 } else { 20 } + 8).max(1);
    // trafgen refuses a counter whose minimum is its maximum: one flow has a fixed port.
    let sport = match flows {
        0 | 1 => "1024".to_owned(),
        n => format!("dinc(1024, {})", 1024 + n - 1),
    };
    // Many destinations: trafgen counts in the address's last 32 bits (IPv4: all of it).
    let da = match (dsts, dst.parse::<std::net::IpAddr>()) {
        (2.., Ok(std::net::IpAddr::V4(a))) => format!("dinc({}, {})", u32::from(a), u32::from(a) + (dsts - 1)),
        (2.., Ok(std::net::IpAddr::V6(a))) => {
            let low = u128::from(a) as u32;
            format!("{dst}, da[12:4]=dinc({low}, {})", low + (dsts - 1))
        }
        _ => dst.to_owned(),
    };
    let ip =
        if v6 { format!("ipv6(sa={src}, da={da}, hl=64)") } else { format!("ipv4(sa={src}, da={da}, ttl=64, df)") };
    format!("{{ eth(da={dst_mac}, sa={src_mac}), {ip}, udp(sp={sport}, dp=9), fill(0x00, {payload}) }}\n")
}

#[allow(clippy::too_many_arguments, reason = "one run's whole description")]
fn measure(
    args: &BenchArgs,
    r: &Rig,
    p: &Endpoints,
    run: u32,
    xfwd: Option<&XfwdProcess>,
    control: &str,
    frame: Option<FrameSize>,
    poll: Option<&PollTimer>,
) -> Result<RunResult> {
    let idle = measure_idle(p)?;
    let sampler = Sampler::start(Duration::from_millis(500))?;
    let pings = start_pings(p.client, p.server_addr)?;
    // The workers' loop accounting and the XDP path's frames at the start, to give what the
    // run alone cost them and what it sent through each path.
    let start = match xfwd {
        Some(_) => {
            let rep = xfwd_report(control)?;
            (rep.queues.iter().map(|q| q.load).collect(), xdp_path_counts(&rep))
        }
        None => (Vec::new(), None),
    };
    let pid = xfwd.map(|x| x.proc.child.id());
    let box_before = BoxClock::read(poll, pid)?;
    let before = Counters::read(r, p)?;
    let started = Instant::now();
    let mut generated = None;
    let flows = match frame {
        None => tcp_flows(args, r, p)?,
        Some(FrameSize::Bytes(size)) if args.sender == Sender::Xdp => {
            generated = Some(generate_frames(args, r, p, size)?);
            Flows::default()
        }
        Some(size) => {
            generated = send_frames(args, r, p, size)?;
            Flows::default()
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let mut rates = Counters::read(r, p)?.since(&before, secs, frame.is_some());
    if let Some(sent) = generated {
        // The sender's own count: what it handed to the client's port (or, trafgen-xdp, to
        // the hop before it). veth's port counters are no count of it: with an XDP program at
        // the box's port, the client's `tx_dropped` also counts the peer's XDP transmit errors
        // (the XDP path's arm: 37,197 of them over a run whose 60,000 frames all arrived).
        rates.offered_pps = sent as f64 / secs;
        rates.loss = loss(rates.offered_pps, rates.delivered_pps);
    }
    let box_cost = BoxClock::read(poll, pid)?.since(&box_before);
    let (rtt_ms, pings_sent) = stop_pings(pings);
    if frame.is_some() {
        // The server's port counted the pings' requests too (those answered, to within the
        // few sent after the counters were read): they are not the test's frames.
        rates.delivered_pps = (rates.delivered_pps - rtt_ms.len() as f64 / secs).max(0.0);
        rates.loss = loss(rates.offered_pps, rates.delivered_pps);
    }
    let cpu = sampler.stop();
    let (queue_rx, xfwd_run) = match xfwd {
        Some(_) => xfwd_after(control, &start)?,
        None => (Vec::new(), None),
    };
    Ok(RunResult {
        run,
        gbps: flows.bps.iter().sum::<f64>() / 1e9,
        // What each server received in the measured time, not what each sender wrote: with
        // hundreds of flows the senders' socket buffers hold gigabytes that count as sent.
        fairness: jain(&flows.received),
        received_gbps: (!flows.received.is_empty())
            .then(|| flows.received.iter().sum::<f64>() * 8.0 / f64::from(args.time.max(1)) / 1e9),
        flows_bps: flows.bps,
        flows_rtt: flows.rtt,
        offered_pps: rates.offered_pps,
        delivered_pps: rates.delivered_pps,
        loss: rates.loss,
        packets: rates.packets,
        busy_cpu_s: rates.busy_cpu_s,
        us_per_packet: if rates.packets > 0 { rates.busy_cpu_s * 1e6 / rates.packets as f64 } else { 0.0 },
        box_cost,
        cpu_avg: cpu::averages(&cpu),
        cpu,
        queue_rx,
        rtt_ms,
        pings_sent,
        rtt_idle_ms: idle.rtt_ms,
        idle_busy_cores: idle.busy_cores,
        // On the rig the CPU is sampled here, in the same run: no other machine's samples to match.
        started_unix_ms: None,
        ended_unix_ms: None,
        xfwd: xfwd_run,
        table_load_s: None,
        ready_s: None,
        search: None,
    })
}

/// The box's own clocks at one instant: its ports' NAPI polls (the kernel's part, on every
/// path) and xfwd's threads (none in the kernel arm).
struct BoxClock {
    /// Both box ports' polls, summed (`None`: the timer is not running).
    polls: Option<PollTime>,
    /// xfwd's threads' CPU time, ns.
    process_ns: Option<u64>,
}

impl BoxClock {
    /// Reads them now.
    fn read(poll: Option<&PollTimer>, pid: Option<u32>) -> Result<BoxClock> {
        let polls = match poll {
            Some(t) => Some(t.read()?.iter().fold(PollTime::default(), |sum, p| sum.plus(p))),
            None => None,
        };
        Ok(BoxClock { polls, process_ns: pid.map(process_cpu_ns).transpose()? })
    }

    /// What the box spent from `before` to this reading.
    fn since(&self, before: &BoxClock) -> Option<BoxCost> {
        let polls = self.polls?.since(&before.polls?);
        Some(BoxCost {
            poll_ns: polls.ns,
            polls: polls.polls,
            polled_frames: polls.frames,
            process_ns: self.process_ns.zip(before.process_ns).map(|(a, b)| a.saturating_sub(b)),
        })
    }
}

/// The CPU time of every thread of process `pid` so far, ns (the first field of each thread's
/// /proc/PID/task/TID/schedstat; a thread that ended between two readings takes its time
/// with it, and xfwd's threads live as long as the run).
fn process_cpu_ns(pid: u32) -> Result<u64> {
    let dir = format!("/proc/{pid}/task");
    let mut sum = 0;
    for task in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended since the listing has no file any more: its time is gone.
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let ns: u64 = text
            .split_whitespace()
            .next()
            .and_then(|w| w.parse().ok())
            .with_context(|| format!("{}: `{}`", path.display(), text.trim()))?;
        sum += ns;
    }
    Ok(sum)
}

/// The path before the traffic: how busy the machine is, and its RTT.
struct Idle {
    /// Busy cores over a second, from /proc/stat.
    busy_cores: Option<f64>,
    /// RTTs of [`IDLE_PINGS`] pings, ms.
    rtt_ms: Vec<f64>,
}

/// Measures the idle path: the machine's busy cores over a second, then half a second of the
/// same pings as under load (a ping that cannot run gives no sample, not an error).
fn measure_idle(p: &Endpoints) -> Result<Idle> {
    let (i0, t0) = (busy_jiffies()?, Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let busy_cores = Some((busy_jiffies()? - i0) as f64 / 100.0 / t0.elapsed().as_secs_f64());
    // The same pings as under load, for half a second.
    let idle = p
        .client
        .command("nice")
        .args([
            "-n",
            &PINGER_NICE.to_string(),
            "ping",
            "-c",
            &IDLE_PINGS.to_string(),
            "-i",
            &ping_interval(),
            "-W",
            "1",
            p.server_addr,
        ])
        .output();
    let rtt_ms = idle.map(|o| parse_ping_rtts(&String::from_utf8_lossy(&o.stdout))).unwrap_or_default();
    Ok(Idle { busy_cores, rtt_ms })
}

/// What a TCP run's flows said of themselves, in flow order (none for a packet-rate run, whose
/// frames are counted on the wire).
#[derive(Default)]
struct Flows {
    /// Each sender's rate, bits/s.
    bps: Vec<f64>,
    /// Each sender's RTT, where iperf3 gave one.
    rtt: Vec<Option<rig::FlowRtt>>,
    /// The bytes each server received.
    received: Vec<f64>,
}

/// Runs the TCP traffic: `args.flows` iperf3 flows from the client to the server.
fn tcp_flows(args: &BenchArgs, r: &Rig, p: &Endpoints) -> Result<Flows> {
    let tcp = rig::iperf3_tcp_streams(
        p.server,
        p.client,
        p.server_addr,
        args.flows,
        args.streams,
        r.queues,
        args.time,
        args.omit,
    )?;
    Ok(Flows {
        received: tcp.flows_received_bytes.iter().map(|&b| b as f64).collect(),
        bps: tcp.flows_bps,
        rtt: tcp.flows_rtt,
    })
}

/// Runs the packet-rate traffic: trafgen sends `size`-byte frames of `args.flows` UDP flows
/// from the client for `args.time` seconds, at `args.rate` (0: flat out). Returns the frames
/// trafgen says it sent (`None`: it did not say).
fn send_frames(args: &BenchArgs, r: &Rig, p: &Endpoints, size: FrameSize) -> Result<Option<u64>> {
    let scale = args.scale();
    let dst = scale.first_dst().map_or_else(|| p.server_addr.to_owned(), |a| a.to_string());
    let src_mac = mac(p.client, "eth0")?;
    let cfg: String = size
        .cycle(p.client_addr.contains(':'))
        .iter()
        .flat_map(|&(bytes, n)| {
            let one = trafgen_config(&p.next_mac, &src_mac, p.client_addr, &dst, args.flows, bytes, scale.dsts);
            std::iter::repeat_n(one, n as usize)
        })
        .collect();
    let file = TempFile(PathBuf::from(format!("/run/xfwd/bench-{}.trafgen", std::process::id())));
    std::fs::write(&file.0, cfg)?;
    let file = file.0.display().to_string();
    let secs = args.time.to_string();
    let cpus = r.queues.to_string();
    let dev = if args.sender == Sender::TrafgenXdp { rig::HOP_DEV } else { "eth0" };
    let mut cmd: Vec<&str> =
        vec!["timeout", "-s", "INT", &secs, "trafgen", "--dev", dev, "--conf", &file, "--cpus", &cpus, "-Q", "-C"];
    let rate = format!("{}pps", args.rate);
    if args.rate > 0 {
        cmd.extend(["-b", rate.as_str()]);
    }
    let out = p.client.command(cmd[0]).args(&cmd[1..]).output().context("running trafgen (package netsniff-ng)")?;
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or("");
    // Stopped by SIGINT, trafgen flushes what its ring still holds; when the device's
    // queue is full (veth pushes back while the path is overloaded) that flush fails
    // with EAGAIN and trafgen exits 1. The run was over by then, and its frames were
    // counted on the wire, not by trafgen: not a failure.
    let flush_at_stop = last.contains("Flushing TX_RING failed: Resource temporarily unavailable");
    if !out.status.success() && out.status.code() != Some(124) && !flush_at_stop {
        bail!("trafgen: {last}");
    }
    Ok(trafgen_sent(&String::from_utf8_lossy(&out.stdout)))
}

/// The frames trafgen sent, from its summary (`  60000 packets outgoing`: one total for all
/// its CPUs).
pub fn trafgen_sent(text: &str) -> Option<u64> {
    text.lines().find(|l| l.trim_end().ends_with(" packets outgoing"))?.split_whitespace().next()?.parse().ok()
}

/// How `--search` runs, from the options.
fn search_params(args: &BenchArgs) -> search::Params {
    search::Params {
        trial_s: args.trial,
        resolution: args.resolution / 100.0,
        final_trials: args.final_trials,
        max_trials: SEARCH_MAX_TRIALS,
    }
}

/// The most trials one goal's search runs (repeats included): enough for bisection from a
/// million packets per second to 0.1 % with every probe repeated.
const SEARCH_MAX_TRIALS: u32 = 40;

/// How long a trial's last frames are given to arrive before the server's port is read
/// (xfwd's queues hold at most some thousands of frames: a few ms at the rates searched).
const SETTLE: Duration = Duration::from_millis(100);

/// One trial of a rate search: `frame`s sent at `rate` (0: flat out) for `args.trial`
/// seconds, no pings; what the sender sent and the server's port received.
fn search_trial(args: &BenchArgs, r: &Rig, p: &Endpoints, frame: FrameSize, rate: u64) -> Result<search::Counted> {
    let trial = BenchArgs { rate, time: args.trial, ..args.clone() };
    let before = rx_packets(p.server, "eth0");
    let sent = match frame {
        FrameSize::Bytes(size) if args.sender == Sender::Xdp => generate_frames(&trial, r, p, size)?,
        f => send_frames(&trial, r, p, f)?.context("trafgen did not say how many frames it sent")?,
    };
    // The sender stops after the trial's time (a timeout, or the generator's own clock); its
    // start-up is not sending time.
    let secs = f64::from(args.trial);
    std::thread::sleep(SETTLE);
    let delivered = rx_packets(p.server, "eth0").saturating_sub(before);
    Ok(search::Counted { sent, delivered, secs })
}

/// Runs the packet-rate traffic with xfwd's XDP generator: `size`-byte frames of `args.flows`
/// UDP flows, sent out of the client's `eth0` for `args.time` seconds by one thread per queue,
/// each in the client's namespace and pinned to its queue's CPU (the box's port takes its
/// frames in that CPU's softirq), at `args.rate` in all (0: flat out). Returns the frames sent.
fn generate_frames(args: &BenchArgs, r: &Rig, p: &Endpoints, size: u32) -> Result<u64> {
    let parse_mac =
        |m: &str| -> Result<xfwd_dataplane::wire::MacAddr> { m.parse().map_err(|e| anyhow::anyhow!("MAC {m}: {e:?}")) };
    let spec = UdpSpec {
        dst_mac: parse_mac(&p.next_mac)?,
        src_mac: parse_mac(&mac(p.client, "eth0")?)?,
        src: p.client_addr.parse().with_context(|| format!("address {}", p.client_addr))?,
        dst: p.server_addr.parse().with_context(|| format!("address {}", p.server_addr))?,
        sport: 1024,
        dport: 9,
        wire_len: size as usize,
    };
    let (frame, udp_off) = udp_frame(&spec)?;
    let threads = r.queues.max(1);
    // At least one frame a second each: 0 would mean flat out.
    let per_thread = if args.rate == 0 { 0 } else { (args.rate / u64::from(threads)).max(1) };
    let time = Duration::from_secs(u64::from(args.time));
    let flows = args.flows;
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let senders = (0..threads as usize)
        .map(|k| {
            let (frame, core) = (frame.clone(), cores.get(k % cores.len().max(1)).copied());
            p.client.spawn_inside(move || -> Result<u64> {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                let eth0 = frame_gen::ifindex("eth0")?;
                let mut g = FrameGen::new(frame, udp_off, flows)?;
                pace(time, per_thread, |n| g.send(eth0, n).map_err(anyhow::Error::from))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut sent = 0;
    for s in senders {
        sent += s.join().map_err(|_| anyhow::anyhow!("a frame sender panicked"))??;
    }
    Ok(sent)
}

/// Calls `send(n)` for `time` so that the frames sent keep up with `rate` per second, never
/// ahead of it (0: flat out, [`FLAT_OUT_BATCH`] a call); returns the frames sent.
///
/// A call of the XDP generator costs some 20 ms of set-up and tear-down in the kernel, asleep
/// (measured on the rig: 64 frames 13–28 ms, 100,000 frames 60 ms of which 30 ms on the CPU),
/// so each call sends what fell due meanwhile, at least [`MIN_BATCH`]: a paced run arrives in
/// bursts some 20 ms apart (2,000 frames at 100 kpps), each taken by the box port's polls 64 at
/// a time as the generator's batches come. Every arm gets the same bursts.
fn pace(time: Duration, rate: u64, mut send: impl FnMut(u32) -> Result<()>) -> Result<u64> {
    let start = Instant::now();
    let mut sent: u64 = 0;
    loop {
        let elapsed = start.elapsed();
        if elapsed >= time {
            return Ok(sent);
        }
        let n = if rate == 0 {
            FLAT_OUT_BATCH
        } else {
            let due = (rate as f64 * elapsed.as_secs_f64()) as u64;
            match due.saturating_sub(sent) {
                n if n < u64::from(MIN_BATCH) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                n => n.min(u64::from(FLAT_OUT_BATCH)) as u32,
            }
        };
        send(n)?;
        sent += u64::from(n);
    }
}

/// The fewest frames a paced call of the XDP generator sends (one batch of its poll).
const MIN_BATCH: u32 = 64;
/// The frames a call sends flat out, and the most a paced call sends.
const FLAT_OUT_BATCH: u32 = 1 << 16;

/// The machine's busy ticks and the rig's frame counters, at one instant.
struct Counters {
    /// [`busy_jiffies`].
    busy: u64,
    /// Frames the hosts received (both ends of the path).
    delivered: u64,
    /// Frames the client sent.
    offered: u64,
    /// Frames the server received.
    server_rx: u64,
}

/// What the counters say of a run.
struct Rates {
    /// Frames the hosts received.
    packets: u64,
    /// CPU time the whole machine was busy, s.
    busy_cpu_s: f64,
    /// Packet rate: frames sent by the client, and received by the server, per second (TCP:
    /// none offered, and the hosts' frames).
    offered_pps: f64,
    delivered_pps: f64,
    /// The share of the offered frames not delivered (0 when none were counted).
    loss: f64,
}

impl Counters {
    /// Reads them now.
    fn read(r: &Rig, p: &Endpoints) -> Result<Counters> {
        let busy = busy_jiffies()?;
        let (delivered, offered) =
            (rx_packets(&r.h1, "eth0") + rx_packets(&r.h2, "eth0"), tx_offered(p.client, "eth0"));
        Ok(Counters { busy, delivered, offered, server_rx: rx_packets(p.server, "eth0") })
    }

    /// The rates from `before` to these counters, `secs` apart, of a packet-rate run (`udp`)
    /// or a TCP run.
    fn since(&self, before: &Counters, secs: f64, udp: bool) -> Rates {
        let packets = self.delivered.saturating_sub(before.delivered);
        let (offered_pps, delivered_pps) = if udp {
            (
                self.offered.saturating_sub(before.offered) as f64 / secs,
                self.server_rx.saturating_sub(before.server_rx) as f64 / secs,
            )
        } else {
            (0.0, packets as f64 / secs)
        };
        Rates {
            packets,
            busy_cpu_s: self.busy.saturating_sub(before.busy) as f64 / 100.0,
            offered_pps,
            delivered_pps,
            loss: loss(offered_pps, delivered_pps),
        }
    }
}

/// The share of the offered frames not delivered (0 when none were counted).
fn loss(offered_pps: f64, delivered_pps: f64) -> f64 {
    if offered_pps > 0.0 {
        (1.0 - delivered_pps / offered_pps).max(0.0)
    } else {
        0.0
    }
}

/// What a running xfwd says after a run: the frames each queue of the first two ports
/// received, and its own counters with its workers' accounting and the XDP path's frames since
/// `start`.
fn xfwd_after(
    control: &str,
    (load0, xdp0): &(Vec<LoopTotals>, Option<XdpPathCounts>),
) -> Result<(Vec<Vec<u64>>, Option<XfwdRun>)> {
    let rep = xfwd_report(control)?;
    let queue_rx = rep.ports.iter().take(2).map(|p| p.per_queue.iter().map(|q| q.rx_frames).collect()).collect();
    let mut run = xfwd_run_of(&rep);
    run.workers = rep.queues.iter().zip(load0).map(|(q, l0)| q.load.since(l0)).collect();
    let xdp = xdp_path_counts(&rep);
    let base = xdp0.unwrap_or_default();
    run.in_program = xdp.map(|c| c.in_program.saturating_sub(base.in_program));
    run.egress_refused = xdp.map(|c| c.refused.saturating_sub(base.refused));
    Ok((queue_rx, Some(run)))
}

/// The XDP path's frames so far, over every port.
#[derive(Debug, Clone, Copy, Default)]
struct XdpPathCounts {
    /// Forwarded or flooded by the program itself.
    in_program: u64,
    /// Of those, refused by the egress's driver (veth: its peer's ring full).
    refused: u64,
}

/// The XDP path's frames so far (`None`: the AF_XDP path).
fn xdp_path_counts(rep: &xfwd_dataplane::io::Report) -> Option<XdpPathCounts> {
    rep.xdp_path.as_ref()?;
    let sum = |names: &[&str]| -> u64 {
        rep.ports.iter().flat_map(|p| p.xdp.iter().filter(|(n, _)| names.contains(&n.as_str()))).map(|(_, v)| v).sum()
    };
    Some(XdpPathCounts {
        in_program: sum(&[XdpCounter::Forwarded.name(), XdpCounter::Flooded.name()]),
        refused: sum(&[EGRESS_REFUSED]),
    })
}

/// Busy ticks of the whole machine (everything but idle and iowait).
fn busy_jiffies() -> Result<u64> {
    Ok(cpu::read()?.iter().map(|c| c.user + c.nice + c.system + c.irq + c.softirq + c.steal).sum())
}

/// What every run of one mode shares: the options, the rigs, the files xfwd is started with.
struct Bench {
    /// The options; a latency phase runs the arms again with its own rate.
    args: BenchArgs,
    mode: BenchMode,
    exe: String,
    config: String,
    /// The router file of an xfwd arm with `fib=kernel`.
    kernel_config: String,
    control: String,
    /// `--sender trafgen-xdp`: the clients' hops (the rig's, and the wire's), removed before
    /// the rigs (fields drop in this order).
    hops: Vec<rig::XdpHop>,
    rig: Rig,
    wire: Option<Rig>,
    /// The box ports' NAPI poll timer (`None`: it could not start, and the box's own time is
    /// not measured).
    poll: Option<PollTimer>,
    /// The router's scale: the table and destinations every arm gets.
    scale: Scale,
}

/// What the xfwd arms reported at start, for the conditions.
struct Modes {
    xdp: String,
    xsk: &'static str,
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
    fn new(
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
fn box_gro(args: &BenchArgs) -> bool {
    args.box_gro || args.sender.xdp_frames()
}

/// Whether an arm runs xfwd's XDP path, which needs NAPI at the hosts ([`Rig::hosts_napi`]).
fn xdp_path(arms: &[(String, Arm)]) -> bool {
    arms.iter().any(|(_, a)| matches!(a, Arm::Xfwd(o) if o.windows(2).any(|w| w[0] == "--path" && w[1] == "xdp")))
}

/// What one mode's bench ran under, for the report: the options, the machine, how the xfwd
/// arms attached and bound (`modes`), and how the endpoints, queues and pings ran.
fn conditions(args: &BenchArgs, mode: BenchMode, arms: &[(String, Arm)], modes: Modes, scale: &Scale) -> Conditions {
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

/// The default output folder: `xfwd-bench-<unix time>` in the current folder.
pub fn default_out() -> PathBuf {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    PathBuf::from(format!("xfwd-bench-{t}"))
}

/// Applies `--quick`.
pub fn preset(args: &mut BenchArgs) {
    if args.quick {
        args.runs = 2;
        args.time = 3;
        args.omit = 0;
    }
    // One frame size at a time; `bench::run` steps through a sweep.
    args.frame = args.frames.first().copied();
}

/// Checks what the harness needs before building anything (a refusal is a usage error).
pub fn preflight(args: &BenchArgs, out: &Path) -> Result<()> {
    preflight_inner(args, out).map_err(|e| crate::UsageError(format!("{e:#}")))?;
    if args.sender == Sender::Xdp {
        live_frames_allowed().map_err(crate::UsageError)?;
    }
    Ok(())
}

/// Whether the kernel runs the live frames of `--sender xdp` (one frame, out of `lo`), asked
/// before any rig is built; `Err` is the one line that says what was refused and what to use.
fn live_frames_allowed() -> std::result::Result<(), String> {
    match frame_gen::live_frames() {
        Ok(()) => Ok(()),
        Err(e @ frame_gen::GenError::LiveFramesRefused(_)) => Err(format!(
            "--sender xdp: {e}; use --sender trafgen-xdp (the box gets the same XDP frames: trafgen's, redirected into the client's port by an XDP program, veth's copy of each socket buffer paid in the client host) or --sender trafgen --box-gro (the box's veth then copies each frame into a page before its XDP program sees it, a cost no NIC has: the XDP paths' box µs includes it)"
        )),
        Err(e) => Err(format!("--sender xdp: could not ask the kernel whether it runs live frames: {e}")),
    }
}

fn preflight_inner(args: &BenchArgs, _out: &Path) -> Result<()> {
    for a in &args.arms {
        Arm::parse(a)?;
    }
    if args.runs == 0 || args.time == 0 || args.flows == 0 || args.queues == 0 {
        bail!("--runs, --time, --flows and --queues must be at least 1");
    }
    let packet_rate = !args.frames.is_empty();
    if args.sender != Sender::Trafgen && !packet_rate {
        bail!("--sender {} sends the frames of a packet-rate test: give --frame (64)", args.sender.name());
    }
    if args.omit >= args.time && !packet_rate {
        bail!("--omit must be shorter than --time");
    }
    if !packet_rate && args.flows > rig::MAX_FLOWS {
        bail!("--flows {}: the fixed client ports 55000+k allow at most {} TCP flows", args.flows, rig::MAX_FLOWS);
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if args.queues > ncpu {
        bail!("--queues {}: this machine has {ncpu} CPU(s); each queue's sender is pinned to its own", args.queues);
    }
    if args.mode.contains(&BenchMode::Bridge) && args.arms.iter().any(|a| a.contains("fib=kernel")) {
        bail!("fib=kernel is an option of the router arms (--mode router)");
    }
    if args.lookups {
        if !args.search.is_empty() || args.dsts > 0 || !args.frames.is_empty() {
            bail!(
                "--lookups sends no traffic: it takes --routes, --routes6 and --seed, not --frame, --dsts or --search"
            );
        }
        return Ok(());
    }
    let scale = args.scale();
    if let Some(why) = scale.refusal() {
        bail!("{why}");
    }
    if scale.any() {
        if args.mode.contains(&BenchMode::Bridge) {
            bail!("--routes, --routes6 and --dsts are the router's (--mode router)");
        }
        if scale.dsts > 0 && !packet_rate {
            bail!("--dsts {}: the destinations are a packet-rate test's (give --frame)", scale.dsts);
        }
        if scale.dsts > 0 && args.sender == Sender::Xdp {
            bail!("--dsts: --sender xdp sends to one destination; use --sender trafgen or trafgen-xdp");
        }
    }
    if !args.search.is_empty() {
        if !packet_rate {
            bail!("--search finds a packet rate: give --frame");
        }
        if !(args.resolution > 0.0 && args.resolution <= 50.0) {
            bail!("--resolution {}: a percentage above 0 and at most 50", args.resolution);
        }
        if args.trial == 0 || args.final_trials > 10 {
            bail!("--trial must be at least 1 s and --final-trials at most 10");
        }
    }
    if !args.latency.is_empty() {
        if !args.search.contains(&search::Goal::Ndr) {
            bail!("--latency runs at shares of the baseline's NDR: add --search ndr");
        }
        if let Some(p) = args.latency.iter().find(|p| !(**p > 0.0 && **p <= 100.0)) {
            bail!("--latency {p}: a percentage of the NDR, above 0 and at most 100");
        }
    }
    if args.sender == Sender::Xdp && args.frames.contains(&FrameSize::Imix) {
        bail!("--frame imix: --sender xdp sends one frame size; use --sender trafgen or trafgen-xdp");
    }
    if args.ip == IpVersion::V6 {
        if args.mode.contains(&BenchMode::Bridge) {
            bail!("--ip 6 runs the router (--mode router): the bridge rig carries IPv4 only");
        }
        if let Some(f) = args.frames.iter().map(|f| f.smallest(true)).find(|&f| f < MIN_FRAME6) {
            bail!("--frame {f}: an IPv6 UDP frame is at least {MIN_FRAME6} bytes with its FCS (a 64-byte frame has no room for IPv6); use --frame {MIN_FRAME6} or more");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
