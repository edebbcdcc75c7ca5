//! The arms' set-up on the rig and the traffic through them: the endpoints, the kernel arm's
//! configuration, pings, TCP flows, frames sent flat out or paced.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::probe::frame_gen::{self, udp_frame, FrameGen, UdpSpec};

use super::report::XfwdRun;
use super::scale::{self, Scale};
use super::search;
use crate::rig::{self, Netns, Rig};

use super::args::*;

pub(super) fn command_version(cmd: &str, arg: &str) -> String {
    std::process::Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| {
            let t = if o.stdout.is_empty() { o.stderr } else { o.stdout };
            String::from_utf8_lossy(&t).lines().next().unwrap_or("").trim().to_owned()
        })
        .unwrap_or_else(|_| "not installed".into())
}

pub(super) fn rx_packets(ns: &Netns, dev: &str) -> u64 {
    ns.link_stat(dev, "rx_packets").unwrap_or(0)
}

fn tx_packets(ns: &Netns, dev: &str) -> u64 {
    ns.link_stat(dev, "tx_packets").unwrap_or(0)
}

/// What `dev` sent, and what it dropped because its peer's ring was full: a veth counts a
/// frame its peer could not take (the box's input ring overflowing) in `tx_dropped`, which a
/// NIC would count as the box's receive drop; it was offered to the box all the same.
pub(super) fn tx_offered(ns: &Netns, dev: &str) -> u64 {
    tx_packets(ns, dev) + ns.link_stat(dev, "tx_dropped").unwrap_or(0)
}

fn mac(ns: &Netns, dev: &str) -> Result<String> {
    Ok(String::from_utf8_lossy(&ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")])?.stdout).trim().to_owned())
}

/// The traffic's endpoints on a rig: where the servers and clients run, their addresses, and
/// the MAC the client's frames go to (the box's, or the peer's on a bridge or the wire).
pub(super) struct Endpoints<'a> {
    pub(super) server: &'a Netns,
    pub(super) client: &'a Netns,
    pub(super) server_addr: &'static str,
    pub(super) client_addr: &'static str,
    pub(super) next_mac: String,
}

pub(super) fn endpoints<'a>(mode: BenchMode, r: &'a Rig, wire: bool, ip: IpVersion) -> Result<Endpoints<'a>> {
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
pub(super) fn kernel_down(mode: BenchMode, r: &Rig, ip: IpVersion, scale: &Scale) -> Result<()> {
    if mode == BenchMode::Bridge && r.boxns.ip(&["link", "show", "br0"]).is_err() {
        // The set-up failed before the bridge existed: nothing to remove.
        return Ok(());
    }
    kernel_up(mode, r, false, ip, scale).map(drop)
}

/// The kernel arm: a Linux bridge, or the embedded router file applied by `xfwd kernel`'s own
/// commands (the same addresses and routes xfwd is given) with forwarding on, IPv6's per
/// interface as `xfwd kernel` switches it, and the bench's table (see [`kernel_config`]).
pub(super) fn kernel_up(mode: BenchMode, r: &Rig, up: bool, ip: IpVersion, scale: &Scale) -> Result<Option<f64>> {
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
pub(super) fn kernel_config(r: &Rig, up: bool, forwarding: bool, ip: IpVersion, scale: &Scale) -> Result<Option<f64>> {
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
pub(super) fn rig_router(ip: IpVersion) -> (&'static str, &'static str) {
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
pub(super) const PINGER_NICE: i32 = -10;

pub(super) fn ping_interval() -> String {
    format!("{:.3}", f64::from(PING_INTERVAL_MS) / 1000.0)
}

/// A ping running until [`stop_pings`], its output read as it comes: a pipe left unread fills
/// after some 1,000 lines, and ping then blocks on it (at 5 ms, some 6 s into a run) and stops
/// sending.
pub(super) struct Pings {
    pub(super) proc: rig::Spawned,
    pub(super) output: std::thread::JoinHandle<String>,
}

/// Pings `addr` from `from` every [`PING_INTERVAL_MS`] until stopped.
pub(super) fn start_pings(from: &Netns, addr: &str) -> Result<Pings> {
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
pub(super) fn stop_pings(mut p: Pings) -> (Vec<f64>, Option<u64>) {
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
pub(super) fn xfwd_report(control: &str) -> Result<xfwd_dataplane::io::Report> {
    let json = crate::control::query(std::path::Path::new(control), "stats-json")?;
    serde_json::from_str(&json).context("xfwd's stats JSON")
}

/// What xfwd's own counters say of a run: scheduling and queue management.
pub(super) fn xfwd_run_of(rep: &xfwd_dataplane::io::Report) -> XfwdRun {
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
pub(super) fn report_has_default_xfwd(arms: &[(String, Arm)]) -> bool {
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

/// What a TCP run's flows said of themselves, in flow order (none for a packet-rate run, whose
/// frames are counted on the wire).
#[derive(Default)]
pub(super) struct Flows {
    /// Each sender's rate, bits/s.
    pub(super) bps: Vec<f64>,
    /// Each sender's RTT, where iperf3 gave one.
    pub(super) rtt: Vec<Option<rig::FlowRtt>>,
    /// The bytes each server received.
    pub(super) received: Vec<f64>,
}

/// Runs the TCP traffic: `args.flows` iperf3 flows from the client to the server.
pub(super) fn tcp_flows(args: &BenchArgs, r: &Rig, p: &Endpoints) -> Result<Flows> {
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
pub(super) fn send_frames(args: &BenchArgs, r: &Rig, p: &Endpoints, size: FrameSize) -> Result<Option<u64>> {
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
pub(super) fn search_params(args: &BenchArgs) -> search::Params {
    search::Params {
        trial_s: args.trial,
        resolution: args.resolution / 100.0,
        final_trials: args.final_trials,
        max_trials: SEARCH_MAX_TRIALS,
    }
}

/// The most trials one goal's search runs (repeats included): enough for bisection from a
/// million packets per second to 0.1 % with every probe repeated.
pub(super) const SEARCH_MAX_TRIALS: u32 = 40;

/// How long a trial's last frames are given to arrive before the server's port is read
/// (xfwd's queues hold at most some thousands of frames: a few ms at the rates searched).
const SETTLE: Duration = Duration::from_millis(100);

/// One trial of a rate search: `frame`s sent at `rate` (0: flat out) for `args.trial`
/// seconds, no pings; what the sender sent and the server's port received.
pub(super) fn search_trial(
    args: &BenchArgs,
    r: &Rig,
    p: &Endpoints,
    frame: FrameSize,
    rate: u64,
) -> Result<search::Counted> {
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
pub(super) fn generate_frames(args: &BenchArgs, r: &Rig, p: &Endpoints, size: u32) -> Result<u64> {
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
pub(super) fn pace(time: Duration, rate: u64, mut send: impl FnMut(u32) -> Result<()>) -> Result<u64> {
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
pub(super) const MIN_BATCH: u32 = 64;
/// The frames a call sends flat out, and the most a paced call sends.
pub(super) const FLAT_OUT_BATCH: u32 = 1 << 16;
