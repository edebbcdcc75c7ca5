//! TCP flows with iperf3: clients started together behind a gate, each flow on a fixed client
//! port, their JSON read for rates, bytes and RTT; nothing of a run outlives it.

use super::*;

/// Result of one iperf3 run: the sender-side rate of each flow, bits per second, the bytes
/// each flow's server received, and each flow's RTT as its sender saw it.
#[derive(Debug, Clone)]
pub struct TcpResult {
    /// Per flow, sender bits/s, in flow order.
    pub flows_bps: Vec<f64>,
    /// Per flow, bytes the server received, in flow order: a lower bound on the data that
    /// crossed the path, whatever the rate.
    pub flows_received_bytes: Vec<u64>,
    /// Per flow, in flow order, the sender's RTT; None where iperf3 gave none.
    pub flows_rtt: Vec<Option<FlowRtt>>,
    /// When the clients were let go, ms since the Unix epoch (for matching another machine's
    /// samples to the run).
    pub started_unix_ms: u64,
}

impl TcpResult {
    /// The sum of the flows' sender rates (the reference method's figure), Gb/s.
    pub fn gbps(&self) -> f64 {
        self.flows_bps.iter().sum::<f64>() / 1e9
    }
}

/// A TCP flow's round-trip time as its sender's kernel measured it: iperf3 reads the smoothed
/// RTT (`TCP_INFO`) of the connection once per reporting interval (1 s) and reports their
/// mean and extremes, in microseconds. Unlike pings beside the flows, this is the delay the
/// bulk data itself met, queues included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowRtt {
    /// Mean of the samples, µs.
    pub mean_us: u64,
    /// Least sample, µs.
    pub min_us: u64,
    /// Greatest sample, µs.
    pub max_us: u64,
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

/// Each stream's sender rate, bytes received and sender RTT from the `--json` output of an
/// iperf3 client that ran `streams` parallel streams (`end.streams[]`, in the order of their
/// client ports).
pub fn iperf3_streams(json: &str, streams: usize) -> Result<Vec<(f64, u64, Option<FlowRtt>)>> {
    let v = iperf3_json(json)?;
    let list = v.pointer("/end/streams").and_then(|s| s.as_array()).context("iperf3 JSON has no end.streams")?;
    if list.len() != streams {
        bail!("iperf3 reported {} streams of {streams}", list.len());
    }
    list.iter()
        .map(|s| {
            let bps =
                s.pointer("/sender/bits_per_second").and_then(|b| b.as_f64()).context("a stream without a rate")?;
            let bytes =
                s.pointer("/receiver/bytes").and_then(|b| b.as_u64()).context("a stream without bytes received")?;
            let field = |name: &str| s.pointer(&format!("/sender/{name}")).and_then(serde_json::Value::as_u64);
            let rtt = field("mean_rtt")
                .filter(|&m| m > 0)
                .and_then(|mean_us| Some(FlowRtt { mean_us, min_us: field("min_rtt")?, max_us: field("max_rtt")? }));
            Ok((bps, bytes, rtt))
        })
        .collect()
}

/// Reads the sender's RTT from iperf3's client `--json` output (`end.streams[].sender`).
///
/// None when iperf3 gives none: off Linux it has no `TCP_INFO` and leaves the fields out, and
/// when it took no sample it writes a mean of 0 (the kernel never measures an RTT of 0 µs), so
/// a 0 is not a figure. Over several streams (one client, `-P`): the mean of their means, the
/// least minimum and the greatest maximum, of the streams that have one.
///
/// Never an error: output without a rate is [`iperf3_sender_bps`]'s to report, and a flow whose
/// rate was measured is not failed for want of an RTT.
pub fn iperf3_sender_rtt(json: &str) -> Option<FlowRtt> {
    let v = iperf3_json(json).ok()?;
    let streams = v.pointer("/end/streams")?.as_array()?;
    let rtts: Vec<FlowRtt> = streams
        .iter()
        .filter_map(|s| {
            let field = |name: &str| s.pointer(&format!("/sender/{name}")).and_then(serde_json::Value::as_u64);
            let mean_us = field("mean_rtt").filter(|&m| m > 0)?;
            Some(FlowRtt { mean_us, min_us: field("min_rtt")?, max_us: field("max_rtt")? })
        })
        .collect();
    if rtts.is_empty() {
        return None;
    }
    let n = rtts.len() as u64;
    Some(FlowRtt {
        mean_us: (rtts.iter().map(|r| r.mean_us).sum::<u64>() + n / 2) / n,
        min_us: rtts.iter().map(|r| r.min_us).min().unwrap_or(0),
        max_us: rtts.iter().map(|r| r.max_us).max().unwrap_or(0),
    })
}

/// Server port of flow 0; flow *k* listens on `SERVER_PORT0 + k`.
pub const SERVER_PORT0: u32 = 5201;
/// Client port of flow 0; flow *k*'s data connection binds `CLIENT_PORT0 + k` (`--cport`).
pub const CLIENT_PORT0: u32 = 55000;
/// The most flows the fixed ports allow: the client ports end at 65535.
pub const MAX_FLOWS: u32 = 65536 - CLIENT_PORT0;

/// How long the servers may take to listen: 450 of them start in about a second on two quiet
/// cores, more on busy ones; a server that cannot listen exits, and that ends the wait early.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an earlier run's sockets may keep a fixed client port when the kernel cannot
/// destroy them: TIME_WAIT's 60 s, FIN_WAIT_2's 60 s (tcp_fin_timeout), with room to spare.
const PORTS_FREE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a client may run past `--time` + `--omit` (connecting and exchanging results
/// through an overloaded path, where a lost control segment waits for TCP's backed-off
/// retransmission) before it is killed and its flow fails: iperf3's own receive timeout.
const CLIENT_GRACE: Duration = Duration::from_secs(120);
/// How long the one-off servers get to exit by themselves once every client is done.
const SERVER_EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long past its planned end a flow may still run before it counts as overrun: iperf3's
/// server ends a test it still runs 5 s past `-t` + `-O` (its client then fails on a closed
/// stream), so a flow failing later than this failed because its path or the machine was too
/// slow to end it in time, not because it could not start.
const OVERRUN_AFTER: Duration = Duration::from_secs(5);

/// A folder under the system's temporary folder, removed with its files on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    pub(super) fn new(tag: &str) -> Result<TempDir> {
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("xfwd-{tag}-{}-{seq}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir(path))
    }

    /// A file in it, created empty, for a child's output.
    fn file(&self, name: &str) -> Result<std::fs::File> {
        let path = self.0.join(name);
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))
    }

    /// What a child wrote into `name` (empty when nothing).
    fn read(&self, name: &str) -> String {
        std::fs::read(self.0.join(name)).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `flows` TCP flows from `client` to `server_addr` in `server` for `secs` seconds. Flow
/// *k* uses server port 5201+k and client port 55000+k, and its client runs pinned to CPU
/// *k mod queues* so XPS puts it on that queue. The clients start together; every iperf3 runs
/// at nice 19 ([`Netns::endpoint_command`] says why).
pub fn iperf3_tcp(
    server: &Netns,
    client: &Netns,
    server_addr: &str,
    flows: u32,
    queues: u32,
    secs: u32,
) -> Result<TcpResult> {
    iperf3_tcp_streams(server, client, server_addr, flows, 1, queues, secs, 0)
}

/// [`iperf3_tcp`] with `streams` flows per iperf3 client process (`-P`, from consecutive
/// fixed client ports; the last client takes what is left), leaving out the first `omit`
/// seconds of each flow (TCP's slow start): with hundreds of flows, a few processes each
/// sharing out their CPU time among their streams, rather than hundreds of processes whose
/// scheduling decides each flow's share.
///
/// Nothing of the run outlives it, whatever way it ends: every server and client is waited
/// for (a client is killed `CLIENT_GRACE` after its planned end, a one-off server
/// `SERVER_EXIT_GRACE` after the last client). What may remain is the kernel closing the
/// run's connections; the next run clears those from the fixed client ports before it binds
/// them ([`free_client_ports`]). Each process writes into a file, not a pipe: 450 clients
/// would hold 900 pipe ends in this process (near the usual limit of 1024 open files), and a
/// client whose pipe is full would wait for its turn to be read.
#[allow(clippy::too_many_arguments, reason = "the run's whole description")]
pub fn iperf3_tcp_streams(
    server: &Netns,
    client: &Netns,
    server_addr: &str,
    flows: u32,
    streams: u32,
    queues: u32,
    secs: u32,
    omit: u32,
) -> Result<TcpResult> {
    if flows == 0 || flows > MAX_FLOWS {
        bail!("{flows} flows: the fixed client ports {CLIENT_PORT0}+k allow 1 to {MAX_FLOWS}");
    }
    if !(1..=MAX_STREAMS).contains(&streams) {
        bail!("{streams} streams per client: iperf3 runs 1 to {MAX_STREAMS}");
    }
    run_flows(&Flows {
        server,
        client,
        server_addr,
        server_port0: SERVER_PORT0,
        client_ports: (CLIENT_PORT0..CLIENT_PORT0 + flows).collect(),
        streams,
        queues: Some(queues),
        secs,
        omit,
        destroy_lingering: true,
    })
}

/// Most parallel streams one iperf3 client runs (`-P`).
pub const MAX_STREAMS: u32 = 128;

/// A set of TCP flows, the reference method's: iperf3 servers in one namespace, clients in
/// another, flow *k* from the fixed client port `client_ports[k]` to port `server_port0 + k`;
/// or, with `streams` > 1, client *c* running flows *c·streams* … as parallel streams from
/// consecutive client ports to port `server_port0 + c`.
#[derive(Debug)]
pub struct Flows<'a> {
    /// Where the servers run.
    pub server: &'a Netns,
    /// Where the clients run.
    pub client: &'a Netns,
    /// The servers' address, as the clients reach it.
    pub server_addr: &'a str,
    /// The first server port.
    pub server_port0: u32,
    /// Each flow's fixed client port (with `streams` > 1, consecutive within each client).
    pub client_ports: Vec<u32>,
    /// Flows per client process (`-P`); 1: a process per flow.
    pub streams: u32,
    /// On the rig: client *k* is pinned to CPU *k mod queues*, where XPS puts it on that queue.
    /// `None`: not pinned (a load machine's RSS spreads flows by their ports).
    pub queues: Option<u32>,
    /// Seconds per flow.
    pub secs: u32,
    /// Seconds left out at the start of each flow.
    pub omit: u32,
    /// Whether sockets no process owns that still hold a client port are destroyed before the
    /// run (`ss -K`; on the rig, see [`free_client_ports`]), rather than only waited for.
    pub destroy_lingering: bool,
}

/// Runs `f`'s flows together and returns each one's sender rate, received bytes and sender
/// RTT. Nothing of
/// the run outlives it ([`iperf3_tcp_streams`] says how).
pub fn run_flows(f: &Flows) -> Result<TcpResult> {
    let (server, client, server_addr, secs, omit) = (f.server, f.client, f.server_addr, f.secs, f.omit);
    let flows = f.client_ports.len() as u32;
    if flows == 0 {
        bail!("no flows to run");
    }
    // Each client's flows (their client ports), in order.
    let groups: Vec<&[u32]> = f.client_ports.chunks(f.streams.max(1) as usize).collect();
    if let Some(g) = groups.iter().find(|g| g.windows(2).any(|w| w[1] != w[0] + 1)) {
        bail!("the client ports of one iperf3 client must follow each other: {g:?}");
    }
    let clients_n = groups.len() as u32;
    let logs = TempDir::new("iperf3")?;
    let server_ports = f.server_port0..f.server_port0 + clients_n;
    let mut servers = Vec::new();
    for port in server_ports.clone() {
        let log = logs.file(&format!("server-{port}.log"))?;
        let mut c = server.endpoint_command("iperf3", None)?;
        c.args(["-s", "-1", "-p", &port.to_string()]).stdout(log.try_clone()?).stderr(log);
        servers.push(Spawned { child: c.spawn().context("starting iperf3 -s")? });
    }
    wait_listening(server, &mut servers, server_ports, &logs)?;
    free_client_ports(client, &f.client_ports, PORTS_FREE_TIMEOUT, f.destroy_lingering)?;
    // Every client waits at a gate (a shell reading its stdin, one end of a socket pair) until
    // all are started, then all go at once: the flows overlap for the whole run, and no
    // client's start waits for CPU taken by flows already running.
    let (gate, gate_in) = UnixStream::pair().context("socket pair for the clients' start")?;
    let mut clients = Vec::new();
    for (k, group) in (0..clients_n).zip(&groups) {
        let cpu = f.queues.map(|q| (k % q.max(1)) as usize);
        let port = (f.server_port0 + k).to_string();
        let cport = group[0].to_string();
        let (t, o, p) = (secs.to_string(), omit.to_string(), group.len().to_string());
        let mut c = client.endpoint_command("sh", cpu)?;
        c.args(["-c", "read -r go; exec iperf3 \"$@\"", "iperf3"])
            .args(["-c", server_addr, "-p", &port, "--cport", &cport, "-t", &t, "-O", &o, "-J"])
            .args(if group.len() > 1 { vec!["-P", p.as_str()] } else { Vec::new() })
            .stdin(Stdio::from(OwnedFd::from(gate_in.try_clone()?)))
            .stdout(logs.file(&format!("client-{k}.json"))?)
            .stderr(logs.file(&format!("client-{k}.err"))?);
        clients.push(Spawned { child: c.spawn().context("starting iperf3 -c")? });
    }
    // The gate opens: every client's read ends (EOF) and it becomes iperf3.
    let started_unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    drop((gate, gate_in));
    let planned_end = Instant::now() + Duration::from_secs(u64::from(secs) + u64::from(omit));
    let ended = wait_all(&mut clients, planned_end + CLIENT_GRACE);
    drop(clients);
    let _ = wait_all(&mut servers, Instant::now() + SERVER_EXIT_GRACE);
    // Whatever server is still there is killed, and reaped, here.
    drop(servers);
    let (mut flows_bps, mut flows_received_bytes, mut flows_rtt) = (Vec::new(), Vec::new(), Vec::new());
    let (mut failed, mut overran) = (Vec::new(), 0);
    for ((k, ended), group) in (0..clients_n).zip(ended).zip(&groups) {
        let (port, cport) = (f.server_port0 + k, group[0]);
        let rate = client_flows(&logs, k, group.len(), ended.is_some());
        match rate {
            Ok(each) => {
                for (bps, bytes, rtt) in each {
                    flows_bps.push(bps);
                    flows_received_bytes.push(bytes);
                    flows_rtt.push(rtt);
                }
            }
            Err(e) => {
                let server_says = iperf3_errors(&logs.read(&format!("server-{port}.log")));
                let what = if group.len() > 1 {
                    format!("client {k} ({} streams", group.len())
                } else {
                    format!("flow {k} (")
                };
                let mut msg = format!("{what}client port {cport} to {server_addr}:{port}): {e:#}");
                if !server_says.is_empty() {
                    msg.push_str(&format!(" (its server: {server_says})"));
                }
                if ended.is_none_or(|t| t > planned_end + OVERRUN_AFTER) {
                    overran += 1;
                    if let Some(t) = ended {
                        msg.push_str(&format!(
                            " (overran: ended {:.0} s after its planned end)",
                            t.saturating_duration_since(planned_end).as_secs_f64()
                        ));
                    }
                }
                failed.push(msg);
            }
        }
    }
    if let Some(first) = failed.first() {
        // How many of them ran out of time rather than failed to start or to run: a slow
        // path's or a starved machine's doing ([`OVERRUN_AFTER`]).
        let kinds = if overran > 0 { format!(" ({overran} overran their time)") } else { String::new() };
        if clients_n < flows {
            bail!("{} of {clients_n} iperf3 clients ({flows} flows) failed{kinds}; the first: {first}", failed.len());
        }
        bail!("{} of {flows} flows failed{kinds}; the first: {first}", failed.len());
    }
    Ok(TcpResult { flows_bps, flows_received_bytes, flows_rtt, started_unix_ms })
}

/// What iperf3 client `k` of `streams` flows said of them (sender rate, bytes received,
/// sender RTT each), or why not: its own error with its stderr, or that it did not end in
/// time (`ended` false).
fn client_flows(logs: &TempDir, k: u32, streams: usize, ended: bool) -> Result<Vec<(f64, u64, Option<FlowRtt>)>> {
    if !ended {
        bail!("still running {CLIENT_GRACE:?} after its planned end: killed");
    }
    let json = logs.read(&format!("client-{k}.json"));
    let each = if streams == 1 {
        iperf3_sender_bps(&json)
            .and_then(|bps| Ok(vec![(bps, iperf3_received_bytes(&json)?, iperf3_sender_rtt(&json))]))
    } else {
        iperf3_streams(&json, streams)
    };
    each.map_err(|e| {
        let stderr = logs.read(&format!("client-{k}.err"));
        if stderr.trim().is_empty() {
            e
        } else {
            e.context(format!("its stderr: {}", stderr.trim()))
        }
    })
}

/// Waits until each process has exited or `deadline` passes; returns, per process, when it
/// was seen to have exited (to 100 ms), `None` if it had not. The ones still running are left
/// to their [`Spawned`]'s drop, which kills them.
fn wait_all(procs: &mut [Spawned], deadline: Instant) -> Vec<Option<Instant>> {
    let mut done = vec![None; procs.len()];
    loop {
        for (p, d) in procs.iter_mut().zip(done.iter_mut()) {
            // An error here means the child is gone already (reaped elsewhere): nothing to wait for.
            if d.is_none() && !matches!(p.child.try_wait(), Ok(None)) {
                *d = Some(Instant::now());
            }
        }
        if done.iter().all(Option::is_some) || Instant::now() >= deadline {
            return done;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The error lines of an iperf3 log (`iperf3: error - …`), joined.
pub(super) fn iperf3_errors(log: &str) -> String {
    log.lines().map(str::trim).filter(|l| l.contains("error")).collect::<Vec<_>>().join("; ")
}

/// Waits (up to [`LISTEN_TIMEOUT`]) until every port of `ports` has a listening socket in
/// `ns`; fails at once when one of `servers` (one per port, in order) has exited, and on
/// timeout names the ports that do not listen.
fn wait_listening(ns: &Netns, servers: &mut [Spawned], ports: Range<u32>, logs: &TempDir) -> Result<()> {
    let start = Instant::now();
    loop {
        let socks = tcp_sockets(ns, false)?;
        let missing: Vec<u32> = ports
            .clone()
            .filter(|&p| !socks.iter().any(|s| s.state == "LISTEN" && u32::from(s.local_port) == p))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        for (port, s) in ports.clone().zip(servers.iter_mut()) {
            if let Ok(Some(st)) = s.child.try_wait() {
                let log = logs.read(&format!("server-{port}.log"));
                bail!("the iperf3 server for port {port} exited ({st}) before listening: {}", log.trim());
            }
        }
        if start.elapsed() > LISTEN_TIMEOUT {
            bail!(
                "{} of {} iperf3 servers not listening after {LISTEN_TIMEOUT:?} in {}: ports {}",
                missing.len(),
                ports.len(),
                ns.name(),
                port_ranges(&missing)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
