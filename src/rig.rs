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

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Runs `cmd args…`, failing with its stderr when it exits non-zero.
pub fn run(cmd: &str, args: &[&str]) -> Result<Output> {
    let out = Command::new(cmd).args(args).output().with_context(|| format!("running {cmd}: is it installed?"))?;
    if !out.status.success() {
        bail!("{cmd} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out)
}

/// The nice value of the traffic endpoints: see [`Netns::endpoint_command`].
pub const ENDPOINT_NICE: i32 = 19;

/// A network namespace, deleted (with everything in it) on drop when this handle made it.
#[derive(Debug)]
pub struct Netns {
    name: String,
    owned: bool,
    /// The namespace this process runs in (no `ip netns exec`, no setns): the load machine of
    /// the two-machine method.
    here: bool,
}

impl Netns {
    /// Creates a namespace called `name` with its loopback up.
    pub fn new(name: String) -> Result<Netns> {
        run("ip", &["netns", "add", &name])?;
        let ns = Netns { name, owned: true, here: false };
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
        Netns { name, owned: false, here: false }
    }

    /// The namespace this process runs in, left alone on drop.
    pub fn here() -> Netns {
        Netns { name: "this network namespace".into(), owned: false, here: true }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `dev` as the NAPI poll timer names it: the namespace's inode and the port's ifindex.
    pub fn poll_port(&self, dev: &str) -> Result<PollPort> {
        let path =
            if self.here { PathBuf::from("/proc/self/ns/net") } else { Path::new("/run/netns").join(&self.name) };
        let out = self.exec(&["cat", &format!("/sys/class/net/{dev}/ifindex")])?;
        Ok(PollPort::new(&path, dev, &String::from_utf8_lossy(&out.stdout))?)
    }

    /// `ip -n NAME args…`.
    pub fn ip(&self, args: &[&str]) -> Result<Output> {
        if self.here {
            return run("ip", args);
        }
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs a command inside the namespace and waits for it.
    pub fn exec(&self, args: &[&str]) -> Result<Output> {
        if self.here {
            let (program, rest) = args.split_first().context("nothing to run")?;
            return run(program, rest);
        }
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// A command that will run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        if self.here {
            return Command::new(program);
        }
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// A command for a traffic endpoint (iperf3): `program` runs inside the namespace, entered
    /// by the child itself (`setns` between fork and exec), at nice 19, pinned to `cpu` when
    /// given.
    ///
    /// Entered directly because it is cheaper than [`Netns::command`]'s `ip netns exec` (an
    /// extra exec, a mount namespace and a fresh /sys per process) and `taskset` (another
    /// exec): 450 flows start 900 processes. The program sees the namespace's network but the
    /// host's /sys, which iperf3 does not read.
    ///
    /// At nice 19 because on the rig the endpoints share the cores with the path under test,
    /// which they do not on the reference setup (separate machines): the kernel path forwards in
    /// softirq, ahead of any process, but xfwd's worker is a thread, and at equal priority 450
    /// clients pinned to its core left it one share in 451 (it forwarded a few hundred frames a
    /// second; flows stalled until iperf3 gave up on them). At nice 19 the endpoints take what
    /// the path leaves, in both arms alike.
    pub fn endpoint_command(&self, program: &str, cpu: Option<usize>) -> Result<Command> {
        let ns = if self.here {
            None
        } else {
            let path = format!("/run/netns/{}", self.name);
            Some(std::fs::File::open(&path).with_context(|| format!("opening {path}"))?)
        };
        let mut c = Command::new(program);
        // The file is opened close-on-exec: the program does not inherit it.
        let enter = move || -> std::io::Result<()> {
            // SAFETY: setns(2) with a namespace file this closure owns (open for as long as the
            // command exists); it changes only the calling process, the forked child.
            if ns.as_ref().is_some_and(|ns| unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0) {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: setpriority(2) on the calling process (who 0).
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, ENDPOINT_NICE) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(cpu) = cpu {
                // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                // SAFETY: CPU_SET ignores a cpu beyond the set's size; `set` is a valid set.
                unsafe { libc::CPU_SET(cpu, &mut set) };
                // SAFETY: `set` is a valid cpu_set_t and its size is passed; pid 0 is the caller.
                if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the hook runs in the child between fork and exec, where only
        // async-signal-safe work is allowed: `enter` makes three system calls and touches no
        // lock and no allocator (an OS error is built without allocating).
        unsafe { c.pre_exec(enter) };
        Ok(c)
    }

    /// One of `dev`'s counters in /sys/class/net/DEV/statistics (`rx_packets`, `tx_dropped`, …)
    /// as seen from inside the namespace.
    pub fn link_stat(&self, dev: &str, stat: &str) -> Result<u64> {
        let out = self.exec(&["cat", &format!("/sys/class/net/{dev}/statistics/{stat}")])?;
        String::from_utf8_lossy(&out.stdout).trim().parse().with_context(|| format!("{dev} {stat}"))
    }

    /// `dev`'s driver counters (`ethtool -S`) as seen from inside the namespace, by name in the
    /// driver's order: for a veth, per receive queue `rx_queue_N_xdp_packets`, `_drops`,
    /// `_xdp_redirect`, `_xdp_drops`, … (drivers/net/veth.c, `veth_rq_stats_desc`).
    pub fn ethtool_stats(&self, dev: &str) -> Result<Vec<(String, u64)>> {
        let out = self.exec(&["ethtool", "-S", dev])?;
        parse_ethtool_stats(&String::from_utf8_lossy(&out.stdout))
    }

    /// Writes `value` to a sysfs or procfs file as seen from inside the namespace.
    pub fn write_file(&self, path: &str, value: &str) -> Result<()> {
        self.exec(&["sh", "-c", &format!("echo {value} > {path}")]).map(|_| ())
    }

    /// Runs `f` on a thread of its own that has entered the namespace (setns moves only the
    /// calling thread), for work done through system calls in the namespace's view: ifindexes,
    /// XDP attachments, BPF test runs out of its devices. Join the handle for `f`'s result.
    pub fn spawn_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<std::thread::JoinHandle<Result<T>>> {
        let ns = match self.here {
            true => None,
            false => {
                let path = format!("/run/netns/{}", self.name);
                Some(std::fs::File::open(&path).with_context(|| format!("opening {path}"))?)
            }
        };
        let name = self.name.clone();
        Ok(std::thread::spawn(move || {
            // SAFETY: setns(2) with an open namespace file: it moves only this thread, which
            // ends with `f`.
            if ns.is_some_and(|ns| unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0) {
                bail!("entering {name}: {}", std::io::Error::last_os_error());
            }
            f()
        }))
    }

    /// [`Netns::spawn_inside`], joined.
    pub fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
        self.spawn_inside(f)?.join().map_err(|_| anyhow::anyhow!("a thread in {} panicked", self.name))?
    }

    /// Builds the hop of `xfwd bench --sender trafgen-xdp` in this host: a veth pair
    /// [`HOP_DEV`]–`gen1` of `queues` queues (XPS as on `eth0`), whose `gen1` has an XDP program
    /// that redirects every frame on out of `eth0`. A packet socket's frames sent into
    /// [`HOP_DEV`] then reach `eth0`'s peer as XDP frames, as from a NIC, and veth's copy of each
    /// socket buffer into a page is paid in `gen1`'s poll, in this host. `eth0`'s peer needs
    /// NAPI (GRO on, or an XDP program). Removed on drop.
    pub fn xdp_hop(&self, queues: u32) -> Result<XdpHop> {
        if self.here {
            bail!("the sender's XDP hop is built in a rig's host, not in {}", self.name);
        }
        veth_pair(self, HOP_DEV, self, "gen1", queues)?;
        let mut hop = XdpHop { ns: Netns::attach(self.name.clone()), _redirect: None };
        for dev in [HOP_DEV, "gen1"] {
            // No IPv6 on the hop (on a dual-stack host it would send reports through it).
            self.write_file(&format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1")?;
        }
        for k in (0..queues).filter(|_| queues > 1) {
            self.write_file(&format!("/sys/class/net/{HOP_DEV}/queues/tx-{k}/xps_cpus"), &format!("{:x}", 1u64 << k))?;
        }
        let redirect = self.inside(|| {
            let (from, to) = (frame_gen::ifindex("gen1")?, frame_gen::ifindex("eth0")?);
            Ok(frame_gen::Redirect::attach(from, to)?)
        })?;
        hop._redirect = Some(redirect);

        for dev in ["gen1", HOP_DEV] {
            self.ip(&["link", "set", dev, "up"])?;
        }
        Ok(hop)
    }
}

/// The device of [`Netns::xdp_hop`] that a sender sends into.
pub const HOP_DEV: &str = "gen0";

/// [`Netns::xdp_hop`]'s veth pair and XDP program, removed on drop (the program detaches with
/// its link; the pair goes with the namespace too, should the drop come after it).
pub struct XdpHop {
    ns: Netns,
    _redirect: Option<frame_gen::Redirect>,
}

impl Drop for XdpHop {
    fn drop(&mut self) {
        let _ = self.ns.ip(&["link", "del", HOP_DEV]);
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
/// Host 1's IPv6 address on the direct wire ([`Rig::wire6`]), in RFC 5180's 2001:2::/48.
pub const H1_ADDR6: &str = "2001:2::1";
/// Host 2's IPv6 address on the direct wire.
pub const H2_ADDR6: &str = "2001:2::2";

/// One host of a rig: the box port it faces (or the other host's `eth0`, for the wire), its
/// addresses and its routes through the box.
struct HostSpec<'a> {
    peer: &'a str,
    addrs: &'a [&'a str],
    routes: &'a [(&'a str, &'a str)],
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
fn veth_pair(ns: &Netns, name: &str, other: &Netns, peer: &str, queues: u32) -> Result<()> {
    let q = queues.to_string();
    let mut args = vec!["link", "add"];
    args.extend(["name", name, "netns", ns.name(), "numtxqueues", &q, "numrxqueues", &q]);
    args.extend(["type", "veth", "peer"]);
    args.extend(["name", peer, "netns", other.name(), "numtxqueues", &q, "numrxqueues", &q]);
    run("ip", &args)?;
    Ok(())
}

/// A veth pair with `queues` queues each way: `eth0` in `host`, `peer` in `other`.
fn veth(host: &Netns, other: &Netns, peer: &str, queues: u32) -> Result<()> {
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
    fn new(tag: &str) -> Result<TempDir> {
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
fn iperf3_errors(log: &str) -> String {
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
        let ok = include_str!("../tests/fixtures/iperf3-client-3.12.json");
        assert_eq!(iperf3_sender_bps(ok).unwrap(), 26_693_318_786.629_02);
        assert_eq!(iperf3_received_bytes(ok).unwrap(), 3_339_714_560);
        // Its two streams' senders saw 30 and 31 µs (min = max = mean, one second on loopback).
        assert_eq!(iperf3_sender_rtt(ok), Some(FlowRtt { mean_us: 31, min_us: 30, max_us: 31 }));
        let refused = include_str!("../tests/fixtures/iperf3-client-refused-3.12.json");
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
        let ok = include_str!("../tests/fixtures/iperf3-client-3.12.json");
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
