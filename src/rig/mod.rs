//! The namespace rig: hosts and a box made of network namespaces and veth pairs, built with
//! iproute2 and torn down when the guard drops, even when a test fails half-way.
//!
//! Shape (bridge): `h1:eth0 ⇄ box:eth4`, `box:eth5 ⇄ h2:eth0`; hosts on 198.18.0.0/24 (RFC 2544
//! benchmarking range), the box's ports up without addresses. Hosts turn TX checksum offload off
//! on their veth: AF_XDP forwards frames as they are, and veth would otherwise hand over partial
//! checksums that the receiving host drops. No namespace gets a default route: nothing leaves.
//!
//! veth has no RSS: a frame arrives on the receiving end's queue *k* when the sender transmitted
//! it on its queue *k*. With `queues > 1` each host maps its TX queue *k* to CPU *k* (XPS), so a
//! sender pinned to CPU *k* starts on the box's queue *k*. (TCP may later send a flow's
//! segments from the softirq of another CPU, which XPS maps to that CPU's queue: the placement
//! holds for most of a flow, not for every frame.)

use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::probe::frame_gen;
use xfwd_dataplane::io::probe::poll_time::PollPort;

mod iperf3;
mod netns;
mod sockets;

pub use iperf3::*;
pub use netns::*;
pub use sockets::*;

/// Two hosts and a box between them.
#[derive(Debug)]
pub struct Rig {
    /// Queue count of every veth.
    pub queues: u32,
    /// The box: holds `eth4` (towards h1) and `eth5` (towards h2).
    pub boxns: Netns,
    /// Host 1, `eth0` = 198.18.0.1/24.
    pub h1: Netns,
    /// Host 2, `eth0` = 198.18.0.2/24.
    pub h2: Netns,
}

/// Host 1's address on the bridge rig.
pub const H1_ADDR: &str = "198.18.0.1";
/// Host 2's address on the bridge rig.
pub const H2_ADDR: &str = "198.18.0.2";
/// Host 1's IPv6 address on the direct wire ([`Rig::wire6`]), in RFC 5180's 2001:2::/48.
pub const H1_ADDR6: &str = "2001:2::1";
/// Host 2's IPv6 address on the direct wire.
pub const H2_ADDR6: &str = "2001:2::2";

/// One host of a rig: the box port it faces (or the other host's `eth0`, for the wire), its
/// addresses and its routes through the box.
struct HostSpec<'a> {
    pub(super) peer: &'a str,
    pub(super) addrs: &'a [&'a str],
    pub(super) routes: &'a [(&'a str, &'a str)],
}

/// The counters in `ethtool -S` output (`NIC statistics:` then one `name: value` a line), by
/// name in the order given.
pub fn parse_ethtool_stats(text: &str) -> Result<Vec<(String, u64)>> {
    text.lines()
        .skip_while(|l| !l.trim_end().ends_with("statistics:"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(':').with_context(|| format!("not a counter: {l:?}"))?;
            let value = value.trim().parse().with_context(|| format!("not a counter: {l:?}"))?;
            Ok((name.trim().to_owned(), value))
        })
        .collect()
}

/// Three fresh namespaces named after this process: (box, h1, h2).
fn namespaces() -> Result<(Netns, Netns, Netns)> {
    let id = format!("xfwd{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    Ok((Netns::new(format!("{id}-box"))?, Netns::new(format!("{id}-h1"))?, Netns::new(format!("{id}-h2"))?))
}

/// A veth pair with `queues` queues each way: `name` in `ns`, `peer` in `other`.
pub(super) fn veth_pair(ns: &Netns, name: &str, other: &Netns, peer: &str, queues: u32) -> Result<()> {
    let q = queues.to_string();
    let mut args = vec!["link", "add"];
    args.extend(["name", name, "netns", ns.name(), "numtxqueues", &q, "numrxqueues", &q]);
    args.extend(["type", "veth", "peer"]);
    args.extend(["name", peer, "netns", other.name(), "numtxqueues", &q, "numrxqueues", &q]);
    run("ip", &args)?;
    Ok(())
}

/// A veth pair with `queues` queues each way: `eth0` in `host`, `peer` in `other`.
pub(super) fn veth(host: &Netns, other: &Netns, peer: &str, queues: u32) -> Result<()> {
    veth_pair(host, "eth0", other, peer, queues)
}

/// Turns IPv6 back on in `ns` for the interfaces made from now on, quietly: no duplicate
/// address detection (addresses are usable at once), no router solicitations, no router
/// advertisements taken, no forwarding.
fn enable_ipv6(ns: &Netns) -> Result<()> {
    ns.exec(&[
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=0",
        "net.ipv6.conf.default.disable_ipv6=0",
        "net.ipv6.conf.default.accept_dad=0",
        "net.ipv6.conf.default.router_solicitations=0",
        "net.ipv6.conf.default.accept_ra=0",
        "net.ipv6.conf.all.forwarding=0",
    ])?;
    Ok(())
}

/// Addresses, offloads, link, routes and XPS of a host whose `eth0` exists.
fn configure_host(host: &Netns, spec: &HostSpec, queues: u32) -> Result<()> {
    for a in spec.addrs {
        if a.contains(':') {
            host.ip(&["addr", "add", a, "dev", "eth0", "nodad"])?;
        } else {
            host.ip(&["addr", "add", a, "dev", "eth0"])?;
        }
    }
    host.exec(&["ethtool", "-K", "eth0", "tx", "off"])?;
    host.ip(&["link", "set", "eth0", "up"])?;
    for (net, via) in spec.routes {
        host.ip(&["route", "add", net, "via", via])?;
    }
    // XPS needs more than one queue (a single-queue device refuses the write).
    for k in (0..queues).filter(|_| queues > 1) {
        host.write_file(&format!("/sys/class/net/eth0/queues/tx-{k}/xps_cpus"), &format!("{:x}", 1u64 << k))?;
    }
    Ok(())
}

impl Rig {
    /// Builds a host–box–host rig: h1 and h2 each joined to the box by a veth pair.
    fn with_box(queues: u32, h1_spec: HostSpec, h2_spec: HostSpec) -> Result<Rig> {
        let (boxns, h1, h2) = namespaces()?;
        if h1_spec.addrs.iter().chain(h2_spec.addrs).any(|a| a.contains(':')) {
            for ns in [&boxns, &h1, &h2] {
                enable_ipv6(ns)?;
            }
        }
        for (host, spec) in [(&h1, &h1_spec), (&h2, &h2_spec)] {
            veth(host, &boxns, spec.peer, queues)?;
            configure_host(host, spec, queues)?;
            boxns.ip(&["link", "set", spec.peer, "up"])?;
        }
        let r = Rig { queues, boxns, h1, h2 };
        r.wait_carrier(&["eth4", "eth5"])?;
        Ok(r)
    }

    /// Builds the bridge rig with `queues` queues per veth.
    pub fn bridge(queues: u32) -> Result<Rig> {
        let (a1, a2) = (format!("{H1_ADDR}/24"), format!("{H2_ADDR}/24"));
        Rig::with_box(
            queues,
            HostSpec { peer: "eth4", addrs: &[&a1], routes: &[] },
            HostSpec { peer: "eth5", addrs: &[&a2], routes: &[] },
        )
    }

    /// Turns GRO on at both hosts' `eth0`, which gives each the NAPI that a frame redirected
    /// into it by an XDP program needs (veth drops such a frame otherwise): the condition of
    /// xfwd's XDP path (`--path xdp`), set for every arm of a run that has one.
    pub fn hosts_napi(&self) -> Result<()> {
        for host in [&self.h1, &self.h2] {
            host.exec(&["ethtool", "-K", "eth0", "gro", "on"])?;
        }
        Ok(())
    }

    /// Turns GRO on at the box's ports, which gives them NAPI when no XDP program does (the
    /// kernel arm), so that their polls can be timed (`xfwd bench --box-gro`).
    pub fn box_gro(&self) -> Result<()> {
        for port in ["eth4", "eth5"] {
            self.boxns.exec(&["ethtool", "-K", port, "gro", "on"])?;
        }
        Ok(())
    }

    /// The box's two ports as the NAPI poll timer names them.
    pub fn box_ports(&self) -> Result<Vec<PollPort>> {
        ["eth4", "eth5"].iter().map(|p| self.boxns.poll_port(p)).collect()
    }

    /// Waits until the box's `ports` see carrier (a veth learns its peer is up a moment later).
    pub fn wait_carrier(&self, ports: &[&str]) -> Result<()> {
        let start = Instant::now();
        loop {
            let mut all = true;
            for p in ports {
                let out = self.boxns.exec(&["cat", &format!("/sys/class/net/{p}/carrier")]);
                all &= out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "1");
            }
            if all {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(5) {
                bail!("the box's ports {ports:?} have no carrier after 5 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Builds the router rig, the reference topology: h1 (the servers' side) behind `eth5` with
    /// 198.18.10.1/24 and 198.18.11.1/24, h2 (the clients' side) behind `eth4` with
    /// 198.18.30.2/24 and 198.18.31.2/24, each host routing the other side's subnets through
    /// the box (198.18.10.2/198.18.11.2 and 198.18.30.1/198.18.31.1, see
    /// config/examples/rig-router.toml). The box's ports get no addresses in the kernel.
    pub fn router(queues: u32) -> Result<Rig> {
        Rig::with_box(
            queues,
            HostSpec {
                peer: "eth5",
                addrs: &["198.18.10.1/24", "198.18.11.1/24"],
                routes: &[("198.18.30.0/24", "198.18.10.2"), ("198.18.31.0/24", "198.18.11.2")],
            },
            HostSpec {
                peer: "eth4",
                addrs: &["198.18.30.2/24", "198.18.31.2/24"],
                routes: &[("198.18.10.0/24", "198.18.30.1"), ("198.18.11.0/24", "198.18.31.1")],
            },
        )
    }

    /// The router rig with IPv6 beside IPv4 ([`Rig::router`]), on the RFC 5180 benchmarking
    /// range (2001:2::/48): h1 2001:2:0:10::1/64 behind `eth5`; h2 2001:2:0:30::2/64 and
    /// 2001:2:0:1000::2/64 (behind it, for the box's static route to 2001:2:0:1000::/52) behind
    /// `eth4`; each host routes 2001:2::/48 through the box (2001:2:0:10::2 and 2001:2:0:30::1,
    /// xfwd's addresses, see config/examples/rig-router6.toml). The box's kernel has only its
    /// link-local addresses and does not forward IPv6.
    pub fn router6(queues: u32) -> Result<Rig> {
        Rig::with_box(
            queues,
            HostSpec {
                peer: "eth5",
                addrs: &["198.18.10.1/24", "198.18.11.1/24", "2001:2:0:10::1/64"],
                routes: &[
                    ("198.18.30.0/24", "198.18.10.2"),
                    ("198.18.31.0/24", "198.18.11.2"),
                    ("2001:2::/48", "2001:2:0:10::2"),
                ],
            },
            HostSpec {
                peer: "eth4",
                addrs: &["198.18.30.2/24", "198.18.31.2/24", "2001:2:0:30::2/64", "2001:2:0:1000::2/64"],
                routes: &[
                    ("198.18.10.0/24", "198.18.30.1"),
                    ("198.18.11.0/24", "198.18.31.1"),
                    ("2001:2::/48", "2001:2:0:30::1"),
                ],
            },
        )
    }

    /// Pings from `from` to `addr` until one answer arrives or `timeout` passes.
    pub fn ping_until(from: &Netns, addr: &str, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if from.exec(&["ping", "-c", "1", "-W", "1", addr]).is_ok() {
                return Ok(());
            }
        }
        bail!("{addr} did not answer ping from {} within {timeout:?}", from.name())
    }

    /// Starts `xfwd ARGS…` inside the box and waits for its `xfwd: ready` line.
    pub fn start_xfwd(&self, exe: &str, args: &[&str]) -> Result<XfwdProcess> {
        let mut p = self.spawn_xfwd(exe, args, &[])?;
        p.wait_ready()?;
        Ok(p)
    }

    /// Starts `xfwd ARGS…` inside the box with `env` added to its environment, without waiting
    /// for it to be ready ([`XfwdProcess::wait_ready`]).
    pub fn spawn_xfwd(&self, exe: &str, args: &[&str], env: &[(&str, &str)]) -> Result<XfwdProcess> {
        let mut cmd = self.boxns.command(exe);
        // Not the test runner's service manager or journal, unless a test gives its own.
        cmd.env_remove("NOTIFY_SOCKET").env_remove("JOURNAL_STREAM");
        cmd.args(args).envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut proc = Spawned { child: cmd.spawn().context("starting xfwd")? };
        let (tx, lines) = mpsc::channel();
        let stdout = proc.child.stdout.take().context("xfwd stdout")?;
        let stderr = proc.child.stderr.take().context("xfwd stderr")?;
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx2.send(line);
            }
        });
        Ok(XfwdProcess { proc, lines, seen: Vec::new() })
    }
}

/// A running `xfwd` started by [`Rig::start_xfwd`]; killed on drop.
#[derive(Debug)]
pub struct XfwdProcess {
    /// The process.
    pub proc: Spawned,
    lines: mpsc::Receiver<String>,
    /// Lines printed so far (stdout and stderr), as collected by [`XfwdProcess::collect`].
    pub seen: Vec<String>,
}

impl XfwdProcess {
    /// Waits (up to 30 s) for the `xfwd: ready` line; an error with what xfwd printed if it
    /// exits or stays silent.
    pub fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    let ready = line == "xfwd: ready";
                    self.seen.push(line);
                    if ready {
                        return Ok(());
                    }
                }
                Err(_) => {
                    let st = self.proc.wait_timeout(Duration::from_secs(5));
                    bail!("xfwd was not ready ({st:?}); it printed: {}", self.seen.join(" | "));
                }
            }
        }
    }

    /// Sends `signal`, waits for the exit (up to `timeout`) and returns the status; every line
    /// the process printed is in `seen` afterwards.
    pub fn stop(&mut self, signal: i32, timeout: Duration) -> Result<std::process::ExitStatus> {
        self.proc.signal(signal);
        let st = self.proc.wait_timeout(timeout)?;
        self.collect();
        Ok(st)
    }

    /// Moves the lines printed so far into `seen`.
    pub fn collect(&mut self) {
        // The reader threads end at EOF; give them a moment after an exit.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(line);
        }
    }
}

impl Rig {
    /// The direct wire: h1 and h2 joined by one veth pair, no box (198.18.0.1 and 198.18.0.2,
    /// host TX offload off as on the other rigs). What a path costs is what it adds to this.
    pub fn wire(queues: u32) -> Result<Rig> {
        let (boxns, h1, h2) = namespaces()?;
        veth(&h1, &h2, "eth0", queues)?;
        let (a1, a2) = (format!("{H1_ADDR}/24"), format!("{H2_ADDR}/24"));
        configure_host(&h1, &HostSpec { peer: "eth0", addrs: &[&a1], routes: &[] }, queues)?;
        configure_host(&h2, &HostSpec { peer: "eth0", addrs: &[&a2], routes: &[] }, queues)?;
        Ok(Rig { queues, boxns, h1, h2 })
    }

    /// The direct wire with IPv6 beside IPv4 ([`H1_ADDR6`], [`H2_ADDR6`], /64), quiet as
    /// [`Rig::router6`]'s.
    pub fn wire6(queues: u32) -> Result<Rig> {
        let (boxns, h1, h2) = namespaces()?;
        for ns in [&h1, &h2] {
            enable_ipv6(ns)?;
        }
        veth(&h1, &h2, "eth0", queues)?;
        let (a1, a2) = (format!("{H1_ADDR}/24"), format!("{H2_ADDR}/24"));
        let (b1, b2) = (format!("{H1_ADDR6}/64"), format!("{H2_ADDR6}/64"));
        configure_host(&h1, &HostSpec { peer: "eth0", addrs: &[&a1, &b1], routes: &[] }, queues)?;
        configure_host(&h2, &HostSpec { peer: "eth0", addrs: &[&a2, &b2], routes: &[] }, queues)?;
        Ok(Rig { queues, boxns, h1, h2 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_statistics_are_read_by_name_in_order() {
        // Saved from a veth of one queue with an XDP program (Linux 6.18).
        let veth = "NIC statistics:\n     peer_ifindex: 2\n     rx_queue_0_xdp_packets: 504833\n     rx_queue_0_drops: 233472\n     rx_queue_0_xdp_redirect: 271361\n     tx_queue_0_xdp_xmit: 0\n";
        let c = parse_ethtool_stats(veth).unwrap();
        let names: Vec<&str> = c.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "peer_ifindex",
                "rx_queue_0_xdp_packets",
                "rx_queue_0_drops",
                "rx_queue_0_xdp_redirect",
                "tx_queue_0_xdp_xmit"
            ]
        );
        assert_eq!(c[2].1, 233_472);
        assert!(parse_ethtool_stats("NIC statistics:\n     rx_queue_0_drops: many\n").is_err());
        assert_eq!(parse_ethtool_stats("no stats available\n").unwrap(), Vec::new());
    }

    #[test]
    fn real_iperf3_output_is_read() {
        // Saved from iperf3 3.12 (Debian 12): two streams over loopback, and a refused connection.
        let ok = include_str!("../../tests/fixtures/iperf3-client-3.12.json");
        assert_eq!(iperf3_sender_bps(ok).unwrap(), 26_693_318_786.629_02);
        assert_eq!(iperf3_received_bytes(ok).unwrap(), 3_339_714_560);
        // Its two streams' senders saw 30 and 31 µs (min = max = mean, one second on loopback).
        assert_eq!(iperf3_sender_rtt(ok), Some(FlowRtt { mean_us: 31, min_us: 30, max_us: 31 }));
        let refused = include_str!("../../tests/fixtures/iperf3-client-refused-3.12.json");
        let e = iperf3_sender_bps(refused).unwrap_err().to_string();
        assert!(e.contains("Connection refused"), "{e}");
        assert_eq!(iperf3_sender_rtt(refused), None);
    }

    /// Constructed for this test, not saved from iperf3: the `end.streams[].sender` fields that
    /// iperf3 3.12 writes on Linux (µs), for three streams of one client. The third took no
    /// RTT sample, which iperf3 writes as a mean of 0.
    const RTT_STREAMS_CONSTRUCTED: &str = r#"{"start":{},"intervals":[],"end":{
        "streams":[
            {"sender":{"socket":5,"bytes":10,"bits_per_second":1e9,"retransmits":3,"max_rtt":1500,"min_rtt":500,"mean_rtt":1000,"sender":true},
             "receiver":{"socket":5,"bytes":10,"bits_per_second":1e9,"sender":true}},
            {"sender":{"socket":7,"bytes":10,"bits_per_second":1e9,"retransmits":0,"max_rtt":9000,"min_rtt":900,"mean_rtt":3001,"sender":true},
             "receiver":{"socket":7,"bytes":10,"bits_per_second":1e9,"sender":true}},
            {"sender":{"socket":9,"bytes":0,"bits_per_second":0,"retransmits":0,"max_rtt":0,"min_rtt":0,"mean_rtt":0,"sender":true},
             "receiver":{"socket":9,"bytes":0,"bits_per_second":0,"sender":true}}],
        "sum_sent":{"bytes":20,"bits_per_second":2e9},"sum_received":{"bytes":20,"bits_per_second":2e9}}}"#;

    #[test]
    fn each_stream_of_a_client_is_a_flow() {
        // The saved two-stream output: each stream's rate and bytes, adding up to the sums.
        let ok = include_str!("../../tests/fixtures/iperf3-client-3.12.json");
        let each = iperf3_streams(ok, 2).unwrap();
        assert_eq!(each.len(), 2);
        let bps: f64 = each.iter().map(|e| e.0).sum();
        assert!((bps - iperf3_sender_bps(ok).unwrap()).abs() < 1.0, "{each:?}");
        assert_eq!(each.iter().map(|e| e.1).sum::<u64>(), iperf3_received_bytes(ok).unwrap());
        assert!(each.iter().all(|e| e.2.is_some()));
        // The constructed three streams: the third took no RTT sample and moved nothing.
        let three = iperf3_streams(RTT_STREAMS_CONSTRUCTED, 3).unwrap();
        assert_eq!(three.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(), [(1e9, 10), (1e9, 10), (0.0, 0)]);
        assert_eq!(three[0].2, Some(FlowRtt { mean_us: 1000, min_us: 500, max_us: 1500 }));
        assert_eq!(three[2].2, None);
        // A client that reports another number of streams than it was asked for fails.
        assert!(iperf3_streams(ok, 3).unwrap_err().to_string().contains("2 streams of 3"));
    }

    #[test]
    fn iperf3_json_sender_rtt() {
        // Streams 1 and 2 count; the one with no sample does not pull the mean or the minimum to 0.
        let rtt = iperf3_sender_rtt(RTT_STREAMS_CONSTRUCTED);
        assert_eq!(rtt, Some(FlowRtt { mean_us: 2001, min_us: 500, max_us: 9000 }));
        // Only the stream with no sample: no RTT at all, rather than 0.
        let none_taken = RTT_STREAMS_CONSTRUCTED.replacen(r#""mean_rtt":1000"#, r#""mean_rtt":0"#, 1).replacen(
            r#""mean_rtt":3001"#,
            r#""mean_rtt":0"#,
            1,
        );
        assert_eq!(iperf3_sender_rtt(&none_taken), None);
        // An iperf3 without TCP_INFO (not Linux) leaves the fields out: none either.
        let absent = r#"{"start":{},"intervals":[],"end":{"streams":[{"sender":{"socket":5,"bytes":10,"bits_per_second":1e9,"sender":true}}]}}"#;
        assert_eq!(iperf3_sender_rtt(absent), None);
        // No per-stream results, iperf3's own error, or not JSON: none, never an error.
        assert_eq!(iperf3_sender_rtt(r#"{"start":{},"intervals":[],"end":{}}"#), None);
        let err = r#"{"start":{},"intervals":[],"end":{},"error":"the server has terminated"}"#;
        assert_eq!(iperf3_sender_rtt(err), None);
        assert_eq!(iperf3_sender_rtt("not json"), None);
    }

    /// `ss -Htanp state all` in a client namespace after a run through a forwarder that queued:
    /// the fixed ports in every closing state, one still owned, IPv6 and wildcard addresses.
    const SS: &str = "\
LISTEN     0      4096          0.0.0.0:5201          0.0.0.0:*     users:((\"iperf3\",pid=4242,fd=3))
ESTAB      0      0         198.18.30.2:41234     198.18.10.1:5201  users:((\"iperf3\",pid=4243,fd=4))
FIN-WAIT-1 0      87448     198.18.30.2:55000     198.18.10.1:5201
FIN-WAIT-2 0      0         198.18.30.2:55001     198.18.10.1:5202
CLOSING    0      1         198.18.30.2:55002     198.18.10.1:5203
LAST-ACK   0      1         198.18.30.2:55003     198.18.10.1:5204
TIME-WAIT  0      0         198.18.30.2:55004     198.18.10.1:5205
SYN-SENT   0      1         198.18.30.2:55005     198.18.10.1:5206  users:((\"iperf3\",pid=77,fd=5),(\"taskset x\",pid=76,fd=5))
LISTEN     0      128              [::]:22               [::]:*
UNCONN     0      0                   *:*                   *:*
a line ss would never print
";

    #[test]
    fn ss_output_gives_every_socket_with_its_state_port_and_owners() {
        let socks = parse_ss_tcp(SS);
        let brief: Vec<(&str, u16, bool)> =
            socks.iter().map(|s| (s.state.as_str(), s.local_port, s.users.is_empty())).collect();
        assert_eq!(
            brief,
            [
                ("LISTEN", 5201, false),
                ("ESTAB", 41234, false),
                ("FIN-WAIT-1", 55000, true),
                ("FIN-WAIT-2", 55001, true),
                ("CLOSING", 55002, true),
                ("LAST-ACK", 55003, true),
                ("TIME-WAIT", 55004, true),
                ("SYN-SENT", 55005, false),
                ("LISTEN", 22, true),
            ]
        );
        assert_eq!(socks[2].local, "198.18.30.2:55000");
        assert_eq!(socks[2].peer, "198.18.10.1:5201");
        // Owners keep their spaces.
        assert_eq!(socks[7].users, r#"users:(("iperf3",pid=77,fd=5),("taskset x",pid=76,fd=5))"#);
        assert_eq!(socks[3].describe(), "55001 FIN-WAIT-2 to 198.18.10.1:5202");
        assert_eq!(socks[7].describe(), format!("55005 SYN-SENT to 198.18.10.1:5206 {}", socks[7].users));
        // Without -p there are no owners; the rest reads the same.
        let plain: String =
            SS.lines().map(|l| l.split("users:").next().unwrap().trim_end().to_owned() + "\n").collect();
        let p = parse_ss_tcp(&plain);
        assert_eq!(p.len(), socks.len());
        assert!(p.iter().all(|s| s.users.is_empty()));
        // The state column is what tells the sockets apart: a single-state listing (no column)
        // is not mistaken for one.
        assert!(parse_ss_tcp("0      0      198.18.30.2:55004 198.18.10.1:5205\n").is_empty());
        assert!(parse_ss_tcp("").is_empty());
    }

    #[test]
    fn port_lists_are_written_as_ranges() {
        assert_eq!(port_ranges(&[5203, 5201, 5202, 5207, 5209, 5208, 5201]), "5201-5203, 5207-5209");
        assert_eq!(port_ranges(&[5201]), "5201");
        // The reference's client ports, as `xfwd load` takes them: two runs of ports.
        assert_eq!(port_runs(&[55000, 55002, 55006, 55001]), [(55000, 55002), (55006, 55006)]);
        assert_eq!(port_ranges(&[]), "");
    }

    #[test]
    fn iperf3_logs_give_their_error_lines() {
        let log = "-----------------------------------------------------------\nServer listening on 5226 (test #1)\n-----------------------------------------------------------\niperf3: error - select failed: Bad file descriptor\n";
        assert_eq!(iperf3_errors(log), "iperf3: error - select failed: Bad file descriptor");
        assert_eq!(iperf3_errors("Server listening on 5201\n"), "");
    }

    #[test]
    fn iperf3_json_sender_rate() {
        let json = r#"{"start":{},"intervals":[],"end":{"sum_sent":{"bytes":1,"bits_per_second":2.5e9},"sum_received":{"bits_per_second":2.4e9}}}"#;
        assert_eq!(iperf3_sender_bps(json).unwrap(), 2.5e9);
        let err = r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}"#;
        assert!(iperf3_sender_bps(err).unwrap_err().to_string().contains("Connection refused"));
        assert!(iperf3_sender_bps("not json").is_err());
    }
}
