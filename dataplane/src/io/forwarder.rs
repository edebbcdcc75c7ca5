//! Starting and stopping a forwarder: ports checked, program loaded, sockets bound, program
//! attached, workers pinned. What they read while it runs is in [`super::view`].
//!
//! Order matters. Everything that can be refused (ports, queues, cores) is checked before the
//! kernel is touched; sockets are bound, their fill rings filled and registered in the XSKMAP
//! before the program is attached, so the first redirected frame already has a socket and a
//! buffer; and if any step fails, what was made so far is dropped, which detaches the program
//! (bpf_link) and closes the sockets.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;

use super::arp::{self, ArpConfig, ArpCounters, ArpPort, Control as ArpControl};
use super::config::{ForwarderConfig, Mode, RouterLimits, RouterSetup, StartError, ZeroCopy};
use super::glean::{self, GleanReceiver, GleanSender};
use super::memory::advise_huge_pages;
use super::port::{check_ports, PortError, PortErrorKind, PortInfo};
use super::view::{LiveView, Report, RouterView};
use super::worker::{BridgeDecide, PollMode, RouterDecide, Worker};
use super::xdp::{LocalKind, ProgramMode, XdpMode, XdpProgram};
use super::xsk::{self, BindOptions, MAX_MTU, RING_SIZE};
use crate::l2::Fdb;
use crate::l3::{icmp_share, NeighborTable, PortSpec, Prefix, RouteTarget, RouterState, RouterTables};
use crate::stats::QueueCounters;
use crate::time::Clock;
use crate::wire::MacAddr;
use crate::{MAX_PORTS, MAX_QUEUES};

/// UMEM frames per port per worker: a full fill ring plus a full TX ring.
const FRAMES_PER_PORT: u32 = 2 * RING_SIZE;

/// A running forwarder.
#[derive(Debug)]
pub struct Forwarder {
    view: Arc<LiveView>,
    /// Core of each worker, by queue (`None`: pinning failed, see warnings).
    pub cores: Vec<Option<usize>>,
    /// The XDP mode each port got, in port order.
    pub xdp_modes: Vec<XdpMode>,
    /// Whether the sockets are bound in zero-copy mode (else copy mode).
    pub zero_copy: bool,
    /// Things the operator should know (no carrier, unused queues, tuning advice).
    pub warnings: Vec<String>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    xdp: Option<XdpProgram>,
    router: Option<RouterControl>,
}

/// What the control thread keeps to reload the router.
#[derive(Debug)]
struct RouterControl {
    specs: Vec<PortSpec>,
    limits: RouterLimits,
    control: crossbeam_channel::Sender<ArpControl>,
}

/// The router's shared pieces, made before the workers.
struct RouterParts {
    specs: Vec<PortSpec>,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    statics: Vec<(Ipv4Addr, MacAddr)>,
    limits: RouterLimits,
    local: Vec<(Ipv4Addr, LocalKind)>,
    glean_tx: GleanSender,
    glean_rx: GleanReceiver,
}

impl RouterParts {
    fn new(ports: &[PortInfo], setup: &RouterSetup, queues: u32) -> Result<RouterParts, StartError> {
        if setup.addresses.len() != ports.len() {
            return Err(StartError::Usage("every port needs its addresses".into()));
        }
        let specs: Vec<PortSpec> = ports
            .iter()
            .zip(&setup.addresses)
            .map(|(p, a)| PortSpec { name: p.name.clone(), mac: p.mac, mtu: p.mtu, addrs: a.clone() })
            .collect();
        let mut t = RouterTables::build_advised(specs.clone(), &setup.routes, advise_huge_pages)
            .map_err(|e| StartError::Usage(e.to_string()))?;
        t.icmp_rate = setup.limits.icmp_rate;
        t.icmp_burst = setup.limits.icmp_burst;
        let mut local = Vec::new();
        for (a, len) in setup.addresses.iter().flatten() {
            local.push((*a, LocalKind::Address));
            if *len < 31 {
                local.push((Prefix::truncate(*a, *len).broadcast(), LocalKind::Broadcast));
            }
        }
        // Bounded: a worker that cannot queue a frame for the ARP thread drops it, counted.
        let (glean_tx, glean_rx) = glean::channel(queues as usize, xsk::FRAME_SIZE as usize);
        Ok(RouterParts {
            specs,
            tables: Arc::new(ArcSwap::from_pointee(t)),
            neighbors: Arc::new(NeighborTable::new(setup.limits.neighbors)),
            statics: setup.neighbors.clone(),
            limits: setup.limits,
            local,
            glean_tx,
            glean_rx,
        })
    }

    /// Each worker, and the ARP thread, gets an equal share of the router-wide ICMP rate and
    /// burst, so that together they stay within the configured limits.
    fn decide(&self, queues: u32) -> RouterDecide {
        let t = self.tables.load();
        let (rate, burst) = icmp_share(t.icmp_rate, t.icmp_burst, queues + 1);
        let mut state = RouterState::new(rate, burst);
        state.fit(&t);
        RouterDecide {
            tables: arc_swap::Cache::new(Arc::clone(&self.tables)),
            neighbors: Arc::clone(&self.neighbors),
            state,
            glean: self.glean_tx.clone(),
            icmp_parts: queues + 1,
        }
    }
}

/// A thread's scheduling policy and priority, to put back.
#[derive(Debug, Clone, Copy)]
struct Policy {
    policy: libc::c_int,
    priority: libc::c_int,
}

impl Policy {
    /// The calling thread's (SCHED_OTHER if it cannot be read).
    fn current() -> Policy {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is valid and writable.
        let policy = unsafe { libc::sched_getscheduler(0) };
        // SAFETY: as above.
        let ok = unsafe { libc::sched_getparam(0, &mut param) } == 0;
        if policy < 0 || !ok {
            return Policy { policy: libc::SCHED_OTHER, priority: 0 };
        }
        Policy { policy, priority: param.sched_priority }
    }

    /// Puts it back on the calling thread.
    fn restore(self) -> std::io::Result<()> {
        set_policy(self.policy, u8::try_from(self.priority).unwrap_or(0))
    }
}

/// Puts the calling thread under scheduling `policy` at `priority` (0 for SCHED_OTHER).
fn set_policy(policy: libc::c_int, priority: u8) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: i32::from(priority) };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised sched_param.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn raise_memlock() {
    // UMEM pages count against RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK; lift this
    // process's own limit where allowed (no system setting changes).
    let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads a valid, initialised rlimit struct.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

impl Forwarder {
    /// Starts a forwarder over `cfg.ports` in `cfg.mode`.
    pub fn start(cfg: &ForwarderConfig) -> Result<Forwarder, StartError> {
        Forwarder::start_with(cfg, || Ok(()))
    }

    /// Starts a forwarder, calling `before_threads` once every kernel object is made (program
    /// loaded and attached, sockets bound and registered, packet sockets open) and before any
    /// thread starts: the place to drop privileges, which Linux holds per thread. An error
    /// from it stops the start and undoes everything.
    pub fn start_with(
        cfg: &ForwarderConfig,
        before_threads: impl FnOnce() -> Result<(), String>,
    ) -> Result<Forwarder, StartError> {
        let min_ports = if matches!(cfg.mode, Mode::Bridge { .. }) { 2 } else { 1 };
        if cfg.ports.len() < min_ports {
            return Err(StartError::Usage("a bridge needs at least two ports".into()));
        }
        if cfg.ports.len() > MAX_PORTS {
            return Err(StartError::Usage(format!("at most {MAX_PORTS} ports, {} given", cfg.ports.len())));
        }
        if let Some(p) = cfg.rt_priority {
            if !(1..=99).contains(&p) {
                return Err(StartError::Usage(format!("--rt-priority {p}: give 1 to 99")));
            }
            if cfg.poll == PollMode::Busy {
                return Err(StartError::Usage(
                    "--rt-priority with --poll busy: a real-time worker that never sleeps takes its core from everything else, the kernel's own threads included; use --poll adaptive".into(),
                ));
            }
        }
        if let Mode::Bridge { fdb_size: 0, .. } = cfg.mode {
            return Err(StartError::Usage("--fdb-size must be at least 1".into()));
        }
        let ports = check_ports(&cfg.ports, MAX_MTU)?;
        let mut warnings = Vec::new();
        for p in &ports {
            if !p.carrier {
                warnings.push(format!("{}: no carrier (link down); frames will flow once it comes up", p.name));
            }
        }
        let ncores = core_affinity::get_core_ids().map_or(1, |c| c.len()).max(1);
        let min_rx = ports.iter().map(|p| p.rx_queues).min().unwrap_or(1);
        let queues = match cfg.queues {
            Some(0) => return Err(StartError::Usage("--queues must be at least 1".into())),
            Some(q) => {
                if let Some(p) = ports.iter().find(|p| p.rx_queues < q) {
                    return Err(PortError::new(
                        &p.name,
                        PortErrorKind::TooFewQueues { name: p.name.clone(), has: p.rx_queues, want: q },
                    )
                    .into());
                }
                q
            }
            None => min_rx.min(ncores as u32).max(1),
        };
        if queues as usize > MAX_QUEUES {
            return Err(StartError::Usage(format!("at most {MAX_QUEUES} queues, {queues} asked")));
        }
        for p in &ports {
            if p.rx_queues > queues {
                warnings.push(format!(
                    "{}: {} RX queues but {queues} worker(s): frames on queues {}..{} go to the kernel (counted as pass-no-socket); use --queues {} or ethtool -L {} combined {queues}",
                    p.name, p.rx_queues, queues, p.rx_queues - 1, p.rx_queues, p.name
                ));
            }
        }
        let cores: Vec<usize> = match &cfg.cores {
            Some(list) => {
                if list.len() < queues as usize {
                    return Err(StartError::Usage(format!(
                        "--cores names {} core(s) for {queues} queue(s); give one core per queue",
                        list.len()
                    )));
                }
                if let Some(c) = list.iter().find(|&&c| c >= ncores) {
                    return Err(StartError::Usage(format!(
                        "--cores: core {c} does not exist (cores 0..{})",
                        ncores - 1
                    )));
                }
                list[..queues as usize].to_vec()
            }
            None => (0..queues as usize).map(|q| q % ncores).collect(),
        };

        raise_memlock();
        let clock = Clock::start();
        let stop = Arc::new(AtomicBool::new(false));
        let (fdb, mut router_parts) = match &cfg.mode {
            Mode::Bridge { fdb_size, ageing_s } => (Arc::new(Fdb::new(*fdb_size, *ageing_s)), None),
            Mode::Router(setup) => (Arc::new(Fdb::new(8, 1)), Some(RouterParts::new(&ports, setup, queues)?)),
        };
        let local: Vec<(Ipv4Addr, LocalKind)> = router_parts.as_ref().map_or_else(Vec::new, |r| r.local.clone());
        let program_mode = match &cfg.mode {
            Mode::Bridge { .. } => ProgramMode::Bridge,
            Mode::Router(_) => ProgramMode::Router { local: &local },
        };
        let mut xdp = XdpProgram::load(&ports, program_mode)?;
        let mut workers: Vec<Box<dyn FnOnce() + Send>> = Vec::with_capacity(queues as usize);
        // Zero-copy needs the driver's own XDP: a generic attachment cannot feed it.
        if cfg.zero_copy == ZeroCopy::On && cfg.xdp_mode == XdpMode::Generic {
            return Err(StartError::Usage(
                "--zero-copy on with --xdp-mode generic: zero-copy needs the driver's native XDP".into(),
            ));
        }
        let mut zero_copy = cfg.zero_copy != ZeroCopy::Off && cfg.xdp_mode != XdpMode::Generic;
        let mut counters = Vec::with_capacity(queues as usize);
        for q in 0..queues {
            let opts = |zero_copy| BindOptions {
                zero_copy,
                huge_pages: cfg.huge_pages,
                busy_poll_budget: (cfg.poll == PollMode::Busy && cfg.busy_poll_budget > 0)
                    .then_some(cfg.busy_poll_budget),
                tx_budget: cfg.tx_budget,
            };
            let opened = match xsk::open(&cfg.ports, q, FRAMES_PER_PORT, opts(zero_copy)) {
                // Decided on the first queue, for all: one mode for the whole forwarder.
                Err(e) if q == 0 && zero_copy && cfg.zero_copy == ZeroCopy::Auto && e.no_zero_copy() => {
                    warnings.push(format!(
                        "{}: no AF_XDP zero-copy in its driver; every socket binds in copy mode",
                        cfg.ports[e.port]
                    ));
                    zero_copy = false;
                    xsk::open(&cfg.ports, q, FRAMES_PER_PORT, opts(false))
                }
                r => r,
            };
            let (sockets, notes) = opened.map_err(|e| {
                let mut cause = e.cause.clone();
                if zero_copy && e.no_zero_copy() {
                    cause.push_str("; the driver has no AF_XDP zero-copy: use --zero-copy auto or off");
                }
                PortError::new(&cfg.ports[e.port], PortErrorKind::Socket { queue: q, cause })
            })?;
            for n in notes {
                if !warnings.contains(&n) {
                    warnings.push(n);
                }
            }
            for (p, ring) in sockets.ports.iter().enumerate() {
                xdp.register_socket(p, q, ring.fd)?;
            }
            let qc = Arc::new(QueueCounters::new(q, Some(cores[q as usize]), ports.len()));
            counters.push(Arc::clone(&qc));
            let (stop, poll) = (Arc::clone(&stop), cfg.poll);
            let busy_poll = sockets.busy_poll;
            workers.push(match &router_parts {
                None => {
                    let w = Worker::new(sockets, BridgeDecide { fdb: Arc::clone(&fdb) }, qc, stop, poll, clock)
                        .drive_busy_poll(busy_poll);
                    Box::new(move || w.run())
                }
                Some(r) => {
                    let w = Worker::new(sockets, r.decide(queues), qc, stop, poll, clock).drive_busy_poll(busy_poll);
                    Box::new(move || w.run())
                }
            });
        }
        let mut xdp_modes = Vec::with_capacity(ports.len());
        for p in &ports {
            let mode = xdp
                .attach(p.ifindex, cfg.xdp_mode)
                .map_err(|cause| PortError::new(&p.name, PortErrorKind::Xdp(cause)))?;
            if zero_copy && mode == XdpMode::Generic {
                return Err(PortError::new(
                    &p.name,
                    PortErrorKind::Xdp(
                        "took XDP only in generic mode, which cannot feed zero-copy sockets: use --zero-copy off, or --xdp-mode native to see why native failed".into(),
                    ),
                )
                .into());
            }
            xdp_modes.push(mode);
        }
        let mut router_view = None;
        let mut router_control = None;
        let mut arp_ready = None;
        if let Some(r) = router_parts.take() {
            let (control_tx, control_rx) = crossbeam_channel::unbounded();
            let arp_counters = Arc::new(ArpCounters::default());
            let arp_ports = ports.iter().map(|p| ArpPort { ifindex: p.ifindex, mac: p.mac }).collect();
            let ready = arp::open(
                arp_ports,
                Arc::clone(&r.tables),
                Arc::clone(&r.neighbors),
                r.statics.clone(),
                {
                    let (icmp_rate, icmp_burst) = icmp_share(r.limits.icmp_rate, r.limits.icmp_burst, queues + 1);
                    ArpConfig {
                        glean_queue: r.limits.glean_queue,
                        max_pending: (r.limits.neighbors / 4).clamp(16, 4096),
                        icmp_rate,
                        icmp_burst,
                    }
                },
                Arc::clone(&arp_counters),
                r.glean_rx,
                control_rx,
                Arc::clone(&stop),
                clock,
            )
            .map_err(|e| StartError::System(format!("cannot open the ARP packet sockets: {e}")))?;
            arp_ready = Some(ready);
            router_view = Some(RouterView {
                tables: Arc::clone(&r.tables),
                neighbors: Arc::clone(&r.neighbors),
                arp: arp_counters,
            });
            router_control = Some(RouterControl { specs: r.specs.clone(), limits: r.limits, control: control_tx });
        }
        let view =
            Arc::new(LiveView { ports, queues: counters, fdb, router: router_view, clock, xdp: xdp.counter_reader()? });
        let saved_policy = Policy::current();
        if let Some(p) = cfg.rt_priority {
            // Threads inherit their creator's policy, and setting a real-time one needs
            // CAP_SYS_NICE, which goes with the privileges: the main thread takes SCHED_FIFO
            // now, the workers inherit it, and the main thread goes back to what it had
            // (allowed without privilege) before it starts any other thread.
            set_policy(libc::SCHED_FIFO, p).map_err(|e| {
                StartError::System(format!(
                    "--rt-priority {p}: cannot take SCHED_FIFO ({e}); it needs CAP_SYS_NICE at start"
                ))
            })?;
        }
        let dropped = before_threads().map_err(StartError::Privileges);
        if let Err(e) = dropped {
            if cfg.rt_priority.is_some() {
                let _ = saved_policy.restore();
            }
            return Err(e);
        }
        let arp_thread;

        let mut threads: Vec<JoinHandle<()>> = Vec::with_capacity(workers.len());
        let mut pinned = Vec::with_capacity(workers.len());
        for (q, worker) in workers.into_iter().enumerate() {
            let core = cores[q];
            let (tx, rx) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new().name(format!("xfwd-q{q}")).spawn(move || {
                let ok = core_affinity::set_for_current(core_affinity::CoreId { id: core });
                let _ = tx.send(ok);
                worker();
            });
            let handle = match spawned {
                Ok(h) => h,
                Err(e) => {
                    // Stop the workers already running before the sockets and program go.
                    stop.store(true, Ordering::Relaxed);
                    for t in threads {
                        let _ = t.join();
                    }
                    if cfg.rt_priority.is_some() {
                        let _ = saved_policy.restore();
                    }
                    return Err(StartError::System(format!("cannot start worker {q}: {e}")));
                }
            };
            let ok = rx.recv().unwrap_or(false);
            if !ok {
                warnings.push(format!("queue {q}: could not pin the worker to core {core}; it runs unpinned"));
            }
            pinned.push(ok.then_some(core));
            threads.push(handle);
        }
        if cfg.rt_priority.is_some() {
            // Back to what it had, for this thread and the ones it starts from now on.
            if let Err(e) = saved_policy.restore() {
                warnings.push(format!("the control thread stays under SCHED_FIFO ({e})"));
            }
        }
        arp_thread = match arp_ready.map(arp::ArpReady::spawn).transpose() {
            Ok(t) => t,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                return Err(StartError::System(format!("cannot start the ARP thread: {e}")));
            }
        };
        if cfg.poll == PollMode::Busy && cfg.busy_poll_budget > 0 {
            for p in &view.ports {
                let read = |attr: &str| {
                    std::fs::read_to_string(format!("/sys/class/net/{}/{attr}", p.name))
                        .map(|v| v.trim().to_owned())
                        .unwrap_or_default()
                };
                if read("napi_defer_hard_irqs") == "0" || read("gro_flush_timeout") == "0" {
                    warnings.push(format!(
                        "{0}: preferred busy polling keeps the driver's interrupts off only with deferral set: \
                         echo 2 > /sys/class/net/{0}/napi_defer_hard_irqs; echo 200000 > /sys/class/net/{0}/gro_flush_timeout \
                         (xfwd changes no system setting)",
                        p.name
                    ));
                }
            }
        }
        if cfg.poll == PollMode::Busy && queues as usize >= ncores {
            warnings.push(format!(
                "busy polling with {queues} worker(s) on {ncores} core(s) leaves no core idle for the kernel or other programs; consider --poll adaptive"
            ));
        }
        threads.extend(arp_thread);
        Ok(Forwarder {
            view,
            cores: pinned,
            xdp_modes,
            zero_copy,
            warnings,
            stop,
            threads,
            xdp: Some(xdp),
            router: router_control,
        })
    }

    /// Router mode: replaces the static routes, static neighbours and limits while traffic
    /// flows. The new tables are built aside and swapped in whole; a worker sees them from its
    /// next frame. On error nothing changes. A new neighbour table size needs a restart.
    pub fn reload_router(
        &self,
        routes: &[(Prefix, RouteTarget)],
        neighbors: Vec<(Ipv4Addr, MacAddr)>,
        limits: RouterLimits,
    ) -> Result<(), String> {
        let (Some(rc), Some(rv)) = (&self.router, &self.view.router) else {
            return Err("not a router".into());
        };
        if limits.neighbors != rc.limits.neighbors {
            return Err("limits.neighbors changed: the neighbour table is sized at start; restart xfwd".into());
        }
        let mut t =
            RouterTables::build_advised(rc.specs.clone(), routes, advise_huge_pages).map_err(|e| e.to_string())?;
        t.icmp_rate = limits.icmp_rate;
        t.icmp_burst = limits.icmp_burst;
        rv.tables.store(Arc::new(t));
        let _ = rc.control.send(ArpControl::GleanQueue(limits.glean_queue));
        let _ = rc.control.send(ArpControl::StaticNeighbors(neighbors));
        Ok(())
    }

    /// Whether every worker thread is still running (false: one died, the forwarder is broken).
    pub fn workers_alive(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// The live view for stats readers.
    pub fn view(&self) -> Arc<LiveView> {
        Arc::clone(&self.view)
    }

    /// Detaches the program, stops and joins the workers, and returns the final counters.
    pub fn stop(mut self) -> Report {
        self.shutdown();
        self.view.report()
    }

    fn shutdown(&mut self) {
        // Detach first: from here on frames go to the kernel instead of into sockets nobody reads.
        if let Some(mut x) = self.xdp.take() {
            x.detach_all();
            // Keep the maps (counters) alive until the final report: the view holds its own handle.
            drop(x);
        }
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shutdown();
    }
}
