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
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Runs `cmd args…`, failing with its stderr when it exits non-zero.
pub fn run(cmd: &str, args: &[&str]) -> Result<Output> {
    let out = Command::new(cmd).args(args).output().with_context(|| format!("running {cmd}: is it installed?"))?;
    if !out.status.success() {
        bail!("{cmd} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out)
}

/// A network namespace, deleted (with everything in it) on drop when this handle made it.
#[derive(Debug)]
pub struct Netns {
    name: String,
    owned: bool,
}

impl Netns {
    /// Creates a namespace called `name` with its loopback up.
    pub fn new(name: String) -> Result<Netns> {
        run("ip", &["netns", "add", &name])?;
        let ns = Netns { name, owned: true };
        ns.ip(&["link", "set", "lo", "up"])?;
        // No IPv6 on the rig: hosts would send router solicitations and MLD reports, noise in
        // every counter a test reads.
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])?;
        // Ephemeral ports below the fixed client ports (55000…) that the flows bind, so that no
        // control connection takes one of them first.
        ns.exec(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=32768 54999"])?;
        Ok(ns)
    }

    /// A handle on an existing namespace, which is left alone on drop.
    pub fn attach(name: String) -> Netns {
        Netns { name, owned: false }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME args…`.
    pub fn ip(&self, args: &[&str]) -> Result<Output> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs a command inside the namespace and waits for it.
    pub fn exec(&self, args: &[&str]) -> Result<Output> {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// A command that will run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// One of `dev`'s counters in /sys/class/net/DEV/statistics (`rx_packets`, `tx_dropped`, …)
    /// as seen from inside the namespace.
    pub fn link_stat(&self, dev: &str, stat: &str) -> Result<u64> {
        let out = self.exec(&["cat", &format!("/sys/class/net/{dev}/statistics/{stat}")])?;
        String::from_utf8_lossy(&out.stdout).trim().parse().with_context(|| format!("{dev} {stat}"))
    }

    /// Writes `value` to a sysfs or procfs file as seen from inside the namespace.
    pub fn write_file(&self, path: &str, value: &str) -> Result<()> {
        self.exec(&["sh", "-c", &format!("echo {value} > {path}")]).map(|_| ())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // Kill what still runs inside (iperf3 servers, a forwarder) so the namespace can go.
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &self.name]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// A child process killed on drop.
#[derive(Debug)]
pub struct Spawned {
    /// The process.
    pub child: Child,
}

impl Spawned {
    /// Sends `signal` (e.g. `libc::SIGTERM`) to the process.
    pub fn signal(&self, signal: i32) {
        // The child is `ip netns exec …`, which execs the program: same pid.
        let _ = Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status();
    }

    /// Waits for the process to exit, up to `timeout`; kills it after that.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st);
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                bail!("process {} did not exit within {timeout:?}", self.child.id());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

/// One host of a rig: the box port it faces (or the other host's `eth0`, for the wire), its
/// addresses and its routes through the box.
struct HostSpec<'a> {
    peer: &'a str,
    addrs: &'a [&'a str],
    routes: &'a [(&'a str, &'a str)],
}

/// Three fresh namespaces named after this process: (box, h1, h2).
fn namespaces() -> Result<(Netns, Netns, Netns)> {
    let id = format!("xfwd{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    Ok((Netns::new(format!("{id}-box"))?, Netns::new(format!("{id}-h1"))?, Netns::new(format!("{id}-h2"))?))
}

/// A veth pair with `queues` queues each way: `eth0` in `host`, `peer` in `other`.
fn veth(host: &Netns, other: &Netns, peer: &str, queues: u32) -> Result<()> {
    let q = queues.to_string();
    run(
        "ip",
        &[
            "link",
            "add",
            "eth0",
            "netns",
            host.name(),
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "netns",
            other.name(),
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ],
    )?;
    Ok(())
}

/// Addresses, offloads, link, routes and XPS of a host whose `eth0` exists.
fn configure_host(host: &Netns, spec: &HostSpec, queues: u32) -> Result<()> {
    for a in spec.addrs {
        host.ip(&["addr", "add", a, "dev", "eth0"])?;
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
        let mut cmd = self.boxns.command(exe);
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
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
        let mut p = XfwdProcess { proc, lines, seen: Vec::new() };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match p.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    let ready = line == "xfwd: ready";
                    p.seen.push(line);
                    if ready {
                        return Ok(p);
                    }
                }
                Err(_) => {
                    let st = p.proc.wait_timeout(Duration::from_secs(5));
                    bail!("xfwd was not ready ({st:?}); it printed: {}", p.seen.join(" | "));
                }
            }
        }
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

/// Result of one iperf3 run: the sender-side rate of each flow, bits per second, and the bytes
/// each flow's server received.
#[derive(Debug, Clone)]
pub struct TcpResult {
    /// Per flow, sender bits/s, in flow order.
    pub flows_bps: Vec<f64>,
    /// Per flow, bytes the server received, in flow order: a lower bound on the data that
    /// crossed the path, whatever the rate.
    pub flows_received_bytes: Vec<u64>,
}

impl TcpResult {
    /// The sum of the flows' sender rates (the reference method's figure), Gb/s.
    pub fn gbps(&self) -> f64 {
        self.flows_bps.iter().sum::<f64>() / 1e9
    }
}

/// iperf3's `--json` output, or the error it reports.
fn iperf3_json(json: &str) -> Result<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(json).context("iperf3 JSON")?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        bail!("iperf3: {err}");
    }
    Ok(v)
}

/// Reads the sender rate from iperf3's `--json` output.
pub fn iperf3_sender_bps(json: &str) -> Result<f64> {
    iperf3_json(json)?
        .pointer("/end/sum_sent/bits_per_second")
        .and_then(|b| b.as_f64())
        .context("iperf3 JSON has no end.sum_sent")
}

/// Reads the bytes the server received from iperf3's client `--json` output.
pub fn iperf3_received_bytes(json: &str) -> Result<u64> {
    iperf3_json(json)?
        .pointer("/end/sum_received/bytes")
        .and_then(|b| b.as_u64())
        .context("iperf3 JSON has no end.sum_received")
}

/// Runs `flows` TCP flows from `client` to `server_addr` in `server` for `secs` seconds. Flow
/// *k* uses server port 5201+k and client port 55000+k, and its client runs pinned to CPU
/// *k mod queues* so XPS puts it on that queue.
pub fn iperf3_tcp(
    server: &Netns,
    client: &Netns,
    server_addr: &str,
    flows: u32,
    queues: u32,
    secs: u32,
) -> Result<TcpResult> {
    iperf3_tcp_omit(server, client, server_addr, flows, queues, secs, 0)
}

/// [`iperf3_tcp`], leaving out the first `omit` seconds of each flow (TCP's slow start).
pub fn iperf3_tcp_omit(
    server: &Netns,
    client: &Netns,
    server_addr: &str,
    flows: u32,
    queues: u32,
    secs: u32,
    omit: u32,
) -> Result<TcpResult> {
    let mut servers = Vec::new();
    for k in 0..flows {
        let port = (5201 + k).to_string();
        let mut c = server.command("iperf3");
        c.args(["-s", "-1", "-p", &port]).stdout(Stdio::null()).stderr(Stdio::null());
        servers.push(Spawned { child: c.spawn().context("starting iperf3 -s")? });
    }
    // Give the servers a moment to listen.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        let out = server.exec(&["ss", "-ltn"])?;
        let text = String::from_utf8_lossy(&out.stdout);
        if (0..flows).all(|k| text.contains(&format!(":{} ", 5201 + k))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_client_ports_free(client, flows)?;
    let mut clients = Vec::new();
    for k in 0..flows {
        let cpu = (k % queues.max(1)).to_string();
        let port = (5201 + k).to_string();
        let cport = (55000 + k).to_string();
        let (t, o) = (secs.to_string(), omit.to_string());
        let mut c = client.command("taskset");
        c.args(["-c", &cpu, "iperf3", "-c", server_addr, "-p", &port, "--cport", &cport, "-t", &t, "-O", &o, "-J"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        clients.push(c.spawn().context("starting iperf3 -c")?);
    }
    let (mut flows_bps, mut flows_received_bytes) = (Vec::new(), Vec::new());
    for c in clients {
        let out = c.wait_with_output()?;
        let json = String::from_utf8_lossy(&out.stdout);
        flows_bps.push(iperf3_sender_bps(&json)?);
        flows_received_bytes.push(iperf3_received_bytes(&json)?);
    }
    drop(servers);
    Ok(TcpResult { flows_bps, flows_received_bytes })
}

/// Waits (up to TIME_WAIT's 60 s) until no connection of an earlier run holds one of the
/// fixed client ports 55000… in `client`: a client that closed first keeps its end in
/// TIME_WAIT, and binding the same port again would fail with "Address already in use".
fn wait_client_ports_free(client: &Netns, flows: u32) -> Result<()> {
    let fixed = 55000..55000 + flows;
    let start = Instant::now();
    loop {
        let out = client.exec(&["ss", "-Htan", "state", "time-wait"])?;
        let text = String::from_utf8_lossy(&out.stdout);
        let busy = text
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .filter_map(|a| a.rsplit(':').next()?.parse::<u32>().ok())
            .any(|p| fixed.contains(&p));
        if !busy {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(65) {
            bail!("fixed client ports still in TIME_WAIT after 65 s");
        }
        std::thread::sleep(Duration::from_millis(500));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_iperf3_output_is_read() {
        // Saved from iperf3 3.12 (Debian 12): two streams over loopback, and a refused connection.
        let ok = include_str!("../tests/fixtures/iperf3-client-3.12.json");
        assert_eq!(iperf3_sender_bps(ok).unwrap(), 26_693_318_786.629_02);
        assert_eq!(iperf3_received_bytes(ok).unwrap(), 3_339_714_560);
        let refused = include_str!("../tests/fixtures/iperf3-client-refused-3.12.json");
        let e = iperf3_sender_bps(refused).unwrap_err().to_string();
        assert!(e.contains("Connection refused"), "{e}");
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
