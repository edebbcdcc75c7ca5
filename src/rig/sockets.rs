//! The rig's TCP sockets as `ss` lists them: fixed client ports freed before a run, port
//! ranges in words.

use super::*;

/// Makes sure that no socket holds one of the fixed client `ports` in `ns` before a run binds
/// them, in any state: an earlier run's connections may still be closing (TIME_WAIT when the
/// client closed first; FIN_WAIT_1/2, CLOSING or LAST_ACK for seconds after a run through a
/// forwarder that queued for seconds), and binding such a port fails with "Address already
/// in use".
///
/// Sockets that no process owns any more (the earlier run's processes are all gone when
/// [`iperf3_tcp_streams`] returns) are destroyed with `ss -K` (SOCK_DESTROY, kernels with
/// CONFIG_INET_DIAG_DESTROY), TIME_WAIT ones included: what TIME_WAIT guards against, a late
/// segment of the old connection taken for one of the new, cannot happen on the rig, where
/// the path is rebuilt between runs and no segment lingers for seconds on a veth pair. A
/// socket a live process owns is left alone. Whatever remains is waited for, up to `timeout`
/// (the kernel closes orphans by itself: TIME_WAIT in 60 s); giving up names the ports, the
/// states and the owners.
///
/// Chosen over `tcp_max_tw_buckets=0` (no TIME_WAIT at all, but nothing for the other closing
/// states) and over waiting alone (up to a minute before each run).
pub fn free_client_ports(ns: &Netns, ports: &[u32], timeout: Duration, destroy: bool) -> Result<()> {
    let start = Instant::now();
    let named = port_ranges(ports);
    // ss's filter for exactly these ports: one clause per run of consecutive ports.
    let filter = port_runs(ports)
        .iter()
        .map(|(lo, hi)| format!("( sport >= :{lo} and sport <= :{hi} )"))
        .collect::<Vec<_>>()
        .join(" or ");
    let mut destroyed = 0;
    loop {
        let held: Vec<SsSocket> =
            tcp_sockets(ns, true)?.into_iter().filter(|s| ports.contains(&u32::from(s.local_port))).collect();
        if held.is_empty() {
            return Ok(());
        }
        if destroy && held.iter().all(|s| s.users.is_empty()) {
            // `ss -K` prints what it destroyed, and nothing for what the kernel refused.
            let out = ns.exec(&["ss", "-HtanK", "state", "all", &format!("( {filter} )")])?;
            destroyed += String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).count();
        }
        if start.elapsed() > timeout {
            let list: Vec<String> = held.iter().take(20).map(SsSocket::describe).collect();
            let more = if held.len() > 20 { format!(" and {} more", held.len() - 20) } else { String::new() };
            let hint = if destroy && destroyed == 0 && held.iter().all(|s| s.users.is_empty()) {
                " (ss -K destroyed none: does the kernel have CONFIG_INET_DIAG_DESTROY?)"
            } else {
                ""
            };
            bail!(
                "fixed client ports {named} in {} still held after {timeout:?} (waited for every state): {}{more}{hint}",
                ns.name(),
                list.join(", ")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One TCP socket as `ss -Htan state all` prints it (`-p` adds the owners).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsSocket {
    /// ss's name of the state: `ESTAB`, `TIME-WAIT`, `FIN-WAIT-1`, `LISTEN`, …
    pub state: String,
    /// Local address and port as printed (`198.18.30.2:55000`, `[::]:22`, `*:5201`).
    pub local: String,
    /// The port of `local`.
    pub local_port: u16,
    /// Peer address and port as printed.
    pub peer: String,
    /// The owners (`users:(("iperf3",pid=7,fd=5))`) with `-p`; empty for a socket no process
    /// holds any more, which the kernel is closing by itself.
    pub users: String,
}

impl SsSocket {
    /// `55003 FIN-WAIT-1 to 198.18.10.1:5204 users:((…))`, for error messages.
    pub fn describe(&self) -> String {
        let users = if self.users.is_empty() { String::new() } else { format!(" {}", self.users) };
        format!("{} {} to {}{users}", self.local_port, self.state, self.peer)
    }
}

/// Parses `ss -Htan state all` output (with or without `-p`): state, receive and send queues,
/// local and peer addresses, then the owners. Lines that do not have that shape are skipped.
/// (With a single state filter ss leaves the state column out: always ask for `state all`.)
pub fn parse_ss_tcp(text: &str) -> Vec<SsSocket> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 || f[1].parse::<u64>().is_err() || f[2].parse::<u64>().is_err() {
                return None;
            }
            let local_port = f[3].rsplit_once(':')?.1.parse().ok()?;
            Some(SsSocket {
                state: f[0].to_owned(),
                local: f[3].to_owned(),
                local_port,
                peer: f[4].to_owned(),
                users: f[5..].join(" "),
            })
        })
        .collect()
}

/// Every TCP socket in `ns`, whatever its state; with their owners when `owners`.
pub fn tcp_sockets(ns: &Netns, owners: bool) -> Result<Vec<SsSocket>> {
    let out = ns.exec(&["ss", if owners { "-Htanp" } else { "-Htan" }, "state", "all"])?;
    Ok(parse_ss_tcp(&String::from_utf8_lossy(&out.stdout)))
}

/// Ports as sorted runs of consecutive ports: `[(5201, 5203), (5207, 5207)]`.
pub fn port_runs(ports: &[u32]) -> Vec<(u32, u32)> {
    let mut v = ports.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for p in v {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == p => *hi = p,
            _ => out.push((p, p)),
        }
    }
    out
}

/// Ports as sorted ranges: `5201-5203, 5207`.
pub fn port_ranges(ports: &[u32]) -> String {
    port_runs(ports)
        .iter()
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
        .collect::<Vec<_>>()
        .join(", ")
}
