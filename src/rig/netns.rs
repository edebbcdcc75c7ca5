//! Network namespaces and the processes run in them: a namespace as a guard that deletes it,
//! commands and endpoints inside it, an XDP hop, a child killed and reaped when dropped.

use super::*;

pub(super) static SEQ: AtomicU32 = AtomicU32::new(0);

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
