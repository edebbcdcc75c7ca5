//! Starting a forwarder: a [`plan`] worked out without touching the kernel, then named steps
//! that make the kernel objects and the threads. The order matters:
//!
//! 1. [`plan::check_request`], the ports' facts ([`check_ports`]), [`Plan::new`]: every refusal
//!    that needs no kernel object, before one is made;
//! 2. `Shared::new`: the FDB, or the router's tables, neighbour table and glean channel;
//! 3. `load_program`: the XDP program, loaded, not attached;
//! 4. `open_sockets`: each worker's UMEM and sockets, bound (zero-copy or copy mode, decided
//!    on the first queue for all) and registered in the XSKMAP;
//! 5. `make_workers`: the workers, their fill rings filled;
//! 6. `attach`: the program on every port, so the first redirected frame already finds a
//!    socket and a buffer;
//! 7. `open_arp` (router): the ARP thread's packet sockets;
//! 8. the live view; SCHED_FIFO taken for the workers to inherit ([`sched::RealTime`]); then
//!    `before_threads`, where the caller drops its privileges;
//! 9. `spawn_workers`, pinned; the scheduling policy given back; the ARP thread;
//! 10. advice read from sysfs (`read_deferral_advice`).
//!
//! Undoing a failed start: up to step 8 what was made is held in locals, dropped on the error
//! in reverse order, so the sockets close and then the program detaches (a bpf_link). From
//! step 9 on, a `Threads` guard stops and joins the threads already running before those go,
//! and the `RealTime` guard gives the policy back. Nothing is left attached or bound.

pub mod plan;
pub mod sched;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;

use self::plan::{Layout, Plan, Role, RouterPlan};
use self::sched::RealTime;
use super::config::FibSource;
use super::config::{ForwarderConfig, Request, StartError};
use super::memory::advise_huge_pages;
use super::options::{DataPath, PollMode, XdpMode};
use super::port::{check_ports, PortError, PortErrorKind, PortInfo};
use crate::io::forwarder::{Forwarder, RouterControl};
use crate::io::frames::worker::{BridgeDecide, RouterDecide, Worker};
use crate::io::frames::xsk::{self, QueueSockets, FRAME_SIZE, MAX_MTU};
use crate::io::program::fast::{FastSync, Source};
use crate::io::program::netdev::{DevFeatures, Netdev};
use crate::io::program::xdp::LocalKind;
use crate::io::program::xdp::{ProgramMode, Steer, XdpProgram};
use crate::io::view::{LiveView, RouterView};
use crate::l2::Fdb;
use crate::l3::tables::RouterLimits;
use crate::l3::{icmp_share, NeighborTable, NeighborTable6, PortSpec, RouterState, RouterTables};
use crate::resolve::glean::{self, GleanReceiver, GleanSender};
use crate::resolve::thread::{self as resolver, ArpConfig, ArpCounters, ArpPort, ArpReady};
use crate::routes::kernel::{self, KernelSync, Synced};
use crate::routes::rtnl::Rtnl;
use crate::stats::QueueCounters;
use crate::time::Clock;
use crate::time::Nudge;
use crate::wire::MacAddr;

/// UMEM frames per port per worker: room for the largest fill and TX rings
/// ([`xsk::RingSizes::MAX`]), and for the flow queues ([`plan::FQ_SLOTS`], half of it) with the
/// default rings.
const FRAMES_PER_PORT: u32 = 4096;

/// A worker, made and ready to run on its own thread.
type Job = Box<dyn FnOnce() + Send>;

impl Forwarder {
    /// Starts a forwarder over `cfg.ports` in `cfg.mode`.
    pub fn start(cfg: &ForwarderConfig) -> Result<Forwarder, StartError> {
        Forwarder::start_with(cfg, || Ok(()), || Ok(()))
    }

    /// Starts a forwarder, calling `before_threads` once every kernel object is made (program
    /// loaded and attached, sockets bound and registered, packet sockets open) and before any
    /// thread starts: the place to drop privileges, which Linux holds per thread. The router's
    /// ARP thread starts first, then `arp_started` is called, before any other thread starts:
    /// the place to drop what only the ARP thread needs (with `[fib] source = "kernel"`,
    /// CAP_NET_ADMIN, to ask the kernel to resolve), so that no other thread holds it. An error
    /// from either stops the start and undoes everything.
    pub fn start_with(
        cfg: &ForwarderConfig,
        before_threads: impl FnOnce() -> Result<(), String>,
        arp_started: impl FnOnce() -> Result<(), String>,
    ) -> Result<Forwarder, StartError> {
        plan::check_request(cfg)?;
        let ports = check_ports(&cfg.ports, MAX_MTU)?;
        let plan = Plan::new(cfg, &ports, core_count(), running_kernel())?;
        let mut warnings = plan.warnings.clone();
        sched::raise_memlock();
        let clock = Clock::start();
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared::new(&plan, &ports)?;
        // The stamp's key: drawn for each start, never leaves the box.
        let stamp_key = plan.aqm.map(|_| random_key());
        let mut xdp = load_program(&ports, &plan, (&shared, cfg.workers.path), stamp_key)?;
        let (sockets, zero_copy) = open_sockets(cfg, &plan, (&ports, &xdp), &mut warnings)?;
        let pools = sockets
            .iter()
            .flat_map(|s| &s.pools)
            .filter(|p| p.member == 0)
            .map(|p| Arc::clone(&p.pool.gauges))
            .collect();
        let (workers, counters) = make_workers(sockets, &shared, &plan, stamp_key, cfg.workers.poll, &stop, clock);
        let xdp_modes = attach(&ports, &mut xdp, plan.xdp_mode, zero_copy)?;
        let fast = fast_path(cfg, &ports, &xdp_modes, (&shared, clock), &xdp, &mut warnings)?;
        let Shared { fdb, router, frame_max, .. } = shared;
        let (arp, router_view, router_control, kernel_sync) = match router {
            Some(r) => {
                let (ready, view, control, sync) = open_arp(r, &ports, plan.queues, &stop, clock, &xdp)?;
                (Some(ready), Some(view), Some(control), sync)
            }
            None => (None, None, None, None),
        };
        let xdp_counters = xdp.counter_reader()?;
        // Taken here, before the view that reports it; the workers inherit it at step 9.
        let (rt, note) = RealTime::enter(plan.realtime)?;
        warnings.extend(note);
        let view = Arc::new(LiveView {
            ports,
            queues: counters,
            pools,
            fdb,
            router: router_view,
            clock,
            xdp: xdp_counters,
            xdp_modes: xdp_modes.clone(),
            zero_copy,
            rt_priority: rt.priority(),
            aqm: cfg.workers.aqm,
            fast: fast.as_ref().map(FastSync::counters),
        });

        before_threads().map_err(StartError::Privileges)?;
        // Declared after `rt`, dropped before it: on a failure the threads are joined first.
        let mut threads = Threads::new(Arc::clone(&stop));
        // The ARP thread first, alone with what `before_threads` kept; under the policy xfwd
        // was started with, though this thread may run under SCHED_FIFO for the workers to
        // inherit.
        if let Some(ready) = arp {
            let handle = ready
                .spawn(rt.restorer())
                .map_err(|e| StartError::System(format!("cannot start the ARP thread: {e}")))?;
            threads.adopt(handle);
        }
        arp_started().map_err(StartError::Privileges)?;
        let cores = spawn_workers(workers, &plan.cores, &mut threads, &mut warnings)?;
        if let Err(e) = rt.leave() {
            warnings.push(format!("the control thread stays under SCHED_FIFO ({e})"));
        }
        if let Some(fast) = fast {
            let handle = fast
                .spawn(Arc::clone(&stop))
                .map_err(|e| StartError::System(format!("cannot start the XDP path's thread: {e}")))?;
            threads.adopt(handle);
        }
        if let Some(sync) = kernel_sync {
            let stop = Arc::clone(&stop);
            let handle = std::thread::Builder::new()
                .name("xfwd-kernel".into())
                .spawn(move || sync.run(&stop))
                .map_err(|e| StartError::System(format!("cannot start the kernel-mirror thread: {e}")))?;
            threads.adopt(handle);
        }
        if plan.deferral_advice {
            warnings.extend(read_deferral_advice(&view.ports));
        }
        warnings.extend(plan.crowded);
        Ok(Forwarder {
            view,
            cores,
            xdp_modes,
            zero_copy,
            layout: plan.layout.clone(),
            warnings,
            stop,
            threads: threads.keep(),
            xdp: Some(xdp),
            router: router_control,
            frame_max,
        })
    }
}

/// 64 random bits from the kernel (`getrandom`), or from the clock where that fails.
fn random_key() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    }
}

/// The running Linux's major and minor version (`uname`), if it can be read.
fn running_kernel() -> Option<(u32, u32)> {
    // SAFETY: `uname` fills the zeroed struct it is given; its fields are NUL-terminated.
    let release = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return None;
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr()).to_string_lossy().into_owned()
    };
    plan::kernel_version(&release)
}

/// Cores this process may run on (at least one).
fn core_count() -> usize {
    core_affinity::get_core_ids().map_or(1, |c| c.len()).max(1)
}

/// What the workers share: the FDB (a small unused one in router mode) and the router's pieces.
struct Shared {
    fdb: Arc<Fdb>,
    /// The bridge's port settings (the defaults in router mode).
    policies: crate::l2::Policies,
    router: Option<RouterParts>,
    /// The longest frame each port sends (bridge; its MTU, an Ethernet header and a VLAN tag).
    frame_max: Arc<[std::sync::atomic::AtomicU32]>,
}

impl Shared {
    fn new(plan: &Plan<'_>, ports: &[PortInfo]) -> Result<Shared, StartError> {
        let frame_max = ports.iter().map(|p| std::sync::atomic::AtomicU32::new(crate::io::frame_max(p.mtu))).collect();
        Ok(match &plan.role {
            Role::Bridge { fdb_size, ageing_s, settings } => {
                let fdb = Fdb::new(*fdb_size, *ageing_s);
                if let Some((mac, _)) = settings.statics.iter().find(|(mac, port)| !fdb.pin(*mac, *port)) {
                    return Err(StartError::Request(Request::StaticsFull { mac: *mac }));
                }
                let policies = settings.policies(ports.len());
                Shared { fdb: Arc::new(fdb), policies, router: None, frame_max }
            }
            Role::Router(r) => Shared {
                fdb: Arc::new(Fdb::new(8, 1)),
                policies: crate::l2::Policies::uniform(ports.len()),
                router: Some(RouterParts::new(r, ports, plan.queues)?),
                frame_max,
            },
        })
    }
}

/// The router's shared pieces, made before the workers.
struct RouterParts {
    specs: Vec<PortSpec>,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    neighbors6: Arc<NeighborTable6>,
    statics: Vec<(Ipv4Addr, MacAddr)>,
    statics6: Vec<(Ipv6Addr, MacAddr)>,
    limits: RouterLimits,
    glean_tx: GleanSender,
    glean_rx: GleanReceiver,
    /// Kernel mode: the first synchronisation's sockets and mirror (its tables are in
    /// `tables`), and the addresses the XDP program starts with.
    kernel: Option<Synced>,
    /// Nudged by the kernel-mirror thread with each publication of `tables`.
    published: Arc<Nudge>,
    local: Vec<(IpAddr, LocalKind)>,
}

impl RouterParts {
    fn new(r: &RouterPlan<'_>, ports: &[PortInfo], queues: u32) -> Result<RouterParts, StartError> {
        let setup = r.setup;
        let (tables, kernel, local) = match setup.fib {
            FibSource::Config => {
                let mut t = RouterTables::build_dual(r.specs.clone(), &setup.routes, &setup.routes6, advise_huge_pages)
                    .map_err(Request::Tables)?;
                t.icmp_rate = setup.limits.icmp_rate;
                t.icmp_burst = setup.limits.icmp_burst;
                t.rfc1812_martians = setup.limits.rfc1812_martians;
                (Arc::new(t), None, r.local.clone())
            }
            FibSource::Kernel { table, buffer } => {
                let specs = ports.iter().map(|p| p.ifindex).zip(r.specs.iter().cloned()).collect();
                let synced = kernel::first_sync(table, buffer, specs, setup.limits).map_err(|e| match e {
                    kernel::SyncError::Rules(_) | kernel::SyncError::NoDefault(_) => Request::KernelRouting(e).into(),
                    _ => StartError::System(e.to_string()),
                })?;
                let local = synced.local.clone();
                if local.len() > crate::io::program::xdp::MAX_LOCAL {
                    return Err(
                        Request::TooManyLocal { count: local.len(), max: crate::io::program::xdp::MAX_LOCAL }.into()
                    );
                }
                (synced.tables.live(), Some(synced), local)
            }
        };
        // Bounded: a worker that cannot queue a frame for the ARP thread drops it, counted.
        let (glean_tx, glean_rx) = glean::channel(queues as usize, FRAME_SIZE as usize);
        Ok(RouterParts {
            specs: r.specs.clone(),
            tables: Arc::new(ArcSwap::new(tables)),
            published: Arc::default(),
            neighbors: Arc::new(NeighborTable::new(setup.limits.neighbors)),
            neighbors6: Arc::new(NeighborTable6::new6(setup.limits.neighbors)),
            statics: setup.neighbors.clone(),
            statics6: setup.neighbors6.clone(),
            limits: setup.limits,
            glean_tx,
            glean_rx,
            kernel,
            local,
        })
    }

    /// A worker's router decision. Each of the `queues` workers, and the ARP thread, gets an
    /// equal share of the router-wide ICMP rate and burst ([`icmp_share`]).
    fn decide(&self, queues: u32) -> RouterDecide {
        let t = self.tables.load();
        let (rate, burst) = icmp_share(t.icmp_rate, t.icmp_burst, queues + 1);
        let mut state = RouterState::new(rate, burst);
        state.fit(&t);
        RouterDecide {
            tables: Arc::clone(&self.tables),
            cache: None,
            neighbors: Arc::clone(&self.neighbors),
            neighbors6: Arc::clone(&self.neighbors6),
            state,
            glean: self.glean_tx.clone(),
            icmp_parts: queues + 1,
        }
    }
}

/// Step 3: the XDP program for the plan's role, with the ports registered; not attached.
fn load_program(
    ports: &[PortInfo],
    plan: &Plan<'_>,
    (shared, path): (&Shared, DataPath),
    stamp_key: Option<u64>,
) -> Result<XdpProgram, StartError> {
    let mode = match &shared.router {
        None => ProgramMode::Bridge,
        Some(r) => {
            ProgramMode::Router { local: &r.local, neighbors: u32::try_from(r.limits.neighbors).unwrap_or(u32::MAX) }
        }
    };
    let steer = match plan.layout {
        Layout::PerQueue => Steer::ByQueue,
        Layout::PerCpu { .. } => Steer::ByCpu { queue: plan.layout.bind_queue(0) },
    };
    Ok(XdpProgram::load(ports, (mode, path), steer, stamp_key)?)
}

/// Step 6b, `--path xdp`: the XDP path's maps written from the router's tables (ports,
/// neighbours, routes) or the bridge's stations, and the path turned on, ready for the thread
/// that keeps them in step ([`FastSync`]). A frame redirected by a program in native mode is
/// sent by the egress driver's `ndo_xdp_xmit` (in generic mode, by its ordinary transmit
/// path): with a port attached natively, refused, with the fix, when a port's driver does not
/// take such frames (the kernel would drop every frame sent out of it); where the kernel cannot
/// say (before Linux 6.3), veth ports are named in a warning with the condition.
fn fast_path(
    cfg: &ForwarderConfig,
    ports: &[PortInfo],
    modes: &[XdpMode],
    (shared, clock): (&Shared, Clock),
    xdp: &XdpProgram,
    warnings: &mut Vec<String>,
) -> Result<Option<FastSync>, StartError> {
    if cfg.workers.path != DataPath::Xdp {
        return Ok(None);
    }
    let source = || match &shared.router {
        Some(r) => Source::Router {
            tables: Arc::clone(&r.tables),
            neighbors: Arc::clone(&r.neighbors),
            neighbors6: Arc::clone(&r.neighbors6),
            whole: r.kernel.is_none(),
            published: Arc::clone(&r.published),
        },
        None => Source::Bridge { fdb: Arc::clone(&shared.fdb), clock, policies: shared.policies.clone() },
    };
    let frame_max = || Arc::clone(&shared.frame_max);
    let takes = vec![true; ports.len()];
    if !modes.contains(&XdpMode::Native) {
        return Ok(Some(FastSync::start(xdp.fast_maps()?, source(), (ports, frame_max()), &takes, None)?));
    }
    let mut netdev = Netdev::open().ok().flatten();
    let features: Vec<Option<DevFeatures>> =
        ports.iter().map(|p| netdev.as_mut().and_then(|n| n.dev(p.ifindex).ok())).collect();
    let refused: Vec<String> = ports
        .iter()
        .zip(&features)
        .filter_map(|(p, f)| f.filter(|f| !f.takes_redirects()).map(|f| no_redirects(p, f)))
        .collect();
    if !refused.is_empty() {
        return Err(StartError::NoRedirects(refused));
    }
    let unknown: Vec<&str> = ports
        .iter()
        .zip(&features)
        .filter(|(p, f)| f.is_none() && p.driver.as_deref() == Some("veth"))
        .map(|(p, _)| p.name.as_str())
        .collect();
    if !unknown.is_empty() {
        warnings.push(format!(
            "--path xdp on veth ({}): the kernel drops a frame redirected into a veth unless its peer runs NAPI, and this kernel cannot say whether it does; turn GRO on at each peer (`ethtool -K PEER gro on`) or attach an XDP program there",
            unknown.join(", ")
        ));
    }
    Ok(Some(FastSync::start(xdp.fast_maps()?, source(), (ports, frame_max()), &takes, netdev)?))
}

/// Why `port`, with `features`, cannot be an egress of the XDP path, and the fix.
fn no_redirects(port: &PortInfo, features: DevFeatures) -> String {
    let name = &port.name;
    let driver = port.driver.as_deref().unwrap_or("an unknown driver");
    let fix = if port.driver.as_deref() == Some("veth") {
        format!("a veth takes them only while its peer runs NAPI: turn GRO on at {name}'s peer (`ethtool -K PEER gro on`) or attach an XDP program there")
    } else {
        "run with --path af-xdp".to_owned()
    };
    format!("{name} ({driver}) does not take frames an XDP program redirects to it (its XDP features: {}; no ndo-xmit); {fix}", features.xdp_names())
}

/// The first of `ports` whose driver says, through the netdev family, that it has no AF_XDP
/// zero-copy; `None` where none does or the family cannot say (a driver that reports no XDP
/// feature at all says nothing).
fn says_no_zero_copy(ports: &[PortInfo]) -> Option<usize> {
    let mut netdev = Netdev::open().ok().flatten()?;
    ports.iter().position(|p| netdev.dev(p.ifindex).is_ok_and(|f| f.xdp_features != 0 && !f.zero_copy()))
}

/// Step 4: the UMEMs and every worker's sockets, bound and registered in the program's XSKMAP:
/// per queue, a UMEM for each worker ([`Layout::PerQueue`]), or per port, a UMEM for all the
/// workers on queue 0, each worker's socket registered for the CPUs it serves
/// ([`Layout::PerCpu`]). The
/// first bind settles zero-copy against copy mode for all ([`plan::BindMode`]), unless a
/// port's driver says beforehand that it has no zero-copy. Returns the sockets by worker and
/// whether they are zero-copy.
fn open_sockets(
    cfg: &ForwarderConfig,
    plan: &Plan<'_>,
    (ports, xdp): (&[PortInfo], &XdpProgram),
    warnings: &mut Vec<String>,
) -> Result<(Vec<QueueSockets>, bool), StartError> {
    let mode = plan::bind_mode(cfg.workers.zero_copy, plan.xdp_mode)?;
    let mut zero_copy = mode.tries_zero_copy();
    // Under auto, a driver that says it has no AF_XDP zero-copy (the netdev family's XDP
    // features, Linux 6.3+) is taken at its word: every socket binds in copy mode at once.
    // Trying first would make a UMEM that the kernel frees late after the failed bind — twice
    // the memory for a while, twice the huge pages with --huge-pages. Without the family, the
    // first bind decides, as before.
    if mode == plan::BindMode::PreferZeroCopy {
        if let Some(p) = says_no_zero_copy(ports) {
            warnings.push(plan::fallback_warning(&ports[p].name));
            zero_copy = false;
        }
    }
    // Each UMEM: the queue its sockets bind, its workers and its ports.
    let all_ports: Vec<usize> = (0..cfg.ports.len()).collect();
    let umems: Vec<(u32, Vec<u32>, Vec<usize>)> = match plan.layout {
        Layout::PerQueue => (0..plan.queues).map(|q| (q, vec![q], all_ports.clone())).collect(),
        Layout::PerCpu { .. } => {
            all_ports.iter().map(|&p| (plan.layout.bind_queue(0), (0..plan.queues).collect(), vec![p])).collect()
        }
    };
    // By worker, its sockets from each UMEM it is a member of.
    let mut parts: Vec<Vec<QueueSockets>> = (0..plan.queues).map(|_| Vec::new()).collect();
    for (q, workers, ports) in umems {
        let names: Vec<String> = ports.iter().map(|&p| cfg.ports[p].clone()).collect();
        let port_of = |e: xsk::OpenError| xsk::OpenError { port: ports[e.port], ..e };
        let opened =
            match xsk::open(&names, q, &workers, FRAMES_PER_PORT, plan.bind_options(zero_copy)).map_err(port_of) {
                Err(e) if zero_copy && mode.falls_back(q, &e) => {
                    warnings.push(plan::fallback_warning(&cfg.ports[e.port]));
                    zero_copy = false;
                    xsk::open(&names, q, &workers, FRAMES_PER_PORT, plan.bind_options(false)).map_err(port_of)
                }
                r => r,
            };
        let (sockets, notes) = opened.map_err(|e| plan::socket_error(&cfg.ports, q, zero_copy, &e))?;
        for n in notes {
            if !warnings.contains(&n) {
                warnings.push(n);
            }
        }
        for (&w, s) in workers.iter().zip(sockets) {
            parts[w as usize].push(s);
        }
    }
    let all: Vec<QueueSockets> = parts.into_iter().map(QueueSockets::join).collect();
    for (w, sockets) in all.iter().enumerate() {
        let slots: Vec<u32> = match &plan.layout {
            Layout::PerQueue => vec![w as u32],
            Layout::PerCpu { slots } => (0..slots.len() as u32).filter(|&s| slots[s as usize] == w as u32).collect(),
        };
        for (p, ring) in sockets.ports.iter().enumerate() {
            for &slot in &slots {
                xdp.register_socket(p, slot, ring.fd)?;
            }
        }
    }
    Ok((all, zero_copy))
}

/// Step 5: a worker per queue over its sockets (which fills their fill rings), with its
/// counters, pinned later to `cores[q]`.
fn make_workers(
    sockets: Vec<QueueSockets>,
    shared: &Shared,
    plan: &Plan<'_>,
    stamp_key: Option<u64>,
    poll: PollMode,
    stop: &Arc<AtomicBool>,
    clock: Clock,
) -> (Vec<Job>, Vec<Arc<QueueCounters>>) {
    let queues = sockets.len() as u32;
    let mut jobs: Vec<Job> = Vec::with_capacity(sockets.len());
    let mut counters = Vec::with_capacity(sockets.len());
    for (q, (sockets, &core)) in sockets.into_iter().zip(&plan.cores).enumerate() {
        let qc = Arc::new(QueueCounters::new(q as u32, Some(core), sockets.ports.len()));
        counters.push(Arc::clone(&qc));
        let busy_poll = sockets.busy_poll;
        let stop = Arc::clone(stop);
        jobs.push(match &shared.router {
            None => {
                let decide = BridgeDecide {
                    fdb: Arc::clone(&shared.fdb),
                    frame_max: Arc::clone(&shared.frame_max),
                    policies: shared.policies.clone(),
                };
                let w = Worker::new(sockets, decide, qc, stop, poll, clock)
                    .drive_busy_poll(busy_poll)
                    .manage_queues(plan.aqm.zip(stamp_key));
                Box::new(move || w.run())
            }
            Some(r) => {
                let w = Worker::new(sockets, r.decide(queues), qc, stop, poll, clock)
                    .drive_busy_poll(busy_poll)
                    .manage_queues(plan.aqm.zip(stamp_key));
                Box::new(move || w.run())
            }
        });
    }
    (jobs, counters)
}

/// Step 6: the program attached to every port in `mode`. Returns the mode each port got.
fn attach(
    ports: &[PortInfo],
    xdp: &mut XdpProgram,
    mode: XdpMode,
    zero_copy: bool,
) -> Result<Vec<XdpMode>, StartError> {
    let mut modes = Vec::with_capacity(ports.len());
    for p in ports {
        let got = xdp.attach(p.ifindex, mode).map_err(|cause| PortError::new(&p.name, PortErrorKind::Xdp(cause)))?;
        plan::check_attached(&p.name, got, zero_copy)?;
        modes.push(got);
    }
    Ok(modes)
}

/// Step 7 (router): the ARP thread's packet sockets and engine, ready to run; the router's
/// live view; what the control thread keeps for reloads.
fn open_arp(
    r: RouterParts,
    ports: &[PortInfo],
    queues: u32,
    stop: &Arc<AtomicBool>,
    clock: Clock,
    xdp: &XdpProgram,
) -> Result<(ArpReady, RouterView, RouterControl, Option<KernelSync>), StartError> {
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let limits = Arc::new(std::sync::Mutex::new((r.limits, false)));
    let asks = match &r.kernel {
        Some(_) => Some(
            Rtnl::open()
                .map_err(|e| StartError::System(format!("cannot open a netlink socket for the ARP thread: {e}")))?,
        ),
        None => None,
    };
    let (sync, sync_counters, listings) = match r.kernel {
        Some(synced) => {
            let counters = Arc::clone(&synced.counters);
            let (sync, neighbors) = KernelSync::new(
                synced,
                Arc::clone(&r.tables),
                Arc::clone(&limits),
                control_tx.clone(),
                (xdp.local_maps()?, Arc::clone(&r.published)),
            );
            // Queued before the ARP thread starts: it begins with the kernel's entries.
            sync.send_neighbors(neighbors);
            let listings = sync.listings();
            (Some(sync), Some(counters), Some(listings))
        }
        None => (None, None, None),
    };
    let counters = Arc::new(ArpCounters::default());
    let arp_ports = ports.iter().map(|p| ArpPort { ifindex: p.ifindex }).collect();
    let (icmp_rate, icmp_burst) = icmp_share(r.limits.icmp_rate, r.limits.icmp_burst, queues + 1);
    let cfg = ArpConfig {
        glean_queue: r.limits.glean_queue,
        max_pending: (r.limits.neighbors / 4).clamp(16, 4096),
        icmp_rate,
        icmp_burst,
    };
    let ndp = Arc::new(ArpCounters::default());
    let ready = resolver::open(
        arp_ports,
        Arc::clone(&r.tables),
        resolver::Neighbors {
            v4: Arc::clone(&r.neighbors),
            v6: Arc::clone(&r.neighbors6),
            statics: r.statics,
            statics6: r.statics6,
        },
        cfg,
        (Arc::clone(&counters), Arc::clone(&ndp)),
        r.glean_rx,
        control_rx,
        Arc::clone(stop),
        clock,
        asks,
    )
    .map_err(|e| StartError::System(format!("cannot open the ARP packet sockets: {e}")))?;
    let view = RouterView {
        tables: r.tables,
        neighbors: r.neighbors,
        neighbors6: r.neighbors6,
        arp: counters,
        ndp,
        kernel: sync_counters,
        kernel_routes: listings,
    };
    let control = RouterControl {
        specs: std::sync::Mutex::new(r.specs),
        limits: r.limits,
        control: control_tx,
        kernel: sync.is_some().then_some(limits),
    };
    Ok((ready, view, control, sync))
}

/// The threads started so far. Dropped before [`Threads::keep`] (a later step failed), it
/// stops them and waits for them, so that the sockets and the program they use go after them.
struct Threads {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Threads {
    fn new(stop: Arc<AtomicBool>) -> Threads {
        Threads { stop, handles: Vec::new() }
    }

    /// Starts `f` on a thread named `name`.
    fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        self.handles.push(std::thread::Builder::new().name(name).spawn(f)?);
        Ok(())
    }

    /// Takes in a thread started elsewhere.
    fn adopt(&mut self, handle: JoinHandle<()>) {
        self.handles.push(handle);
    }

    /// Start-up succeeded: the threads are the forwarder's to stop.
    fn keep(mut self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut self.handles)
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        if self.handles.is_empty() {
            return;
        }
        self.stop.store(true, Ordering::Relaxed);
        for t in self.handles.drain(..) {
            let _ = t.join();
        }
    }
}

/// Step 9: each worker on its own thread, pinned to its core (a pin that fails is a warning:
/// the worker runs unpinned). Returns each worker's core, `None` where pinning failed.
fn spawn_workers(
    workers: Vec<Job>,
    cores: &[usize],
    threads: &mut Threads,
    warnings: &mut Vec<String>,
) -> Result<Vec<Option<usize>>, StartError> {
    let mut pinned = Vec::with_capacity(workers.len());
    for (q, (worker, &core)) in workers.into_iter().zip(cores).enumerate() {
        let (tx, rx) = std::sync::mpsc::channel();
        threads
            .spawn(format!("xfwd-q{q}"), move || {
                let ok = core_affinity::set_for_current(core_affinity::CoreId { id: core });
                let _ = tx.send(ok);
                worker();
            })
            .map_err(|e| StartError::System(format!("cannot start worker {q}: {e}")))?;
        let ok = rx.recv().unwrap_or(false);
        if !ok {
            warnings.push(format!("queue {q}: could not pin the worker to core {core}; it runs unpinned"));
        }
        pinned.push(ok.then_some(core));
    }
    Ok(pinned)
}

/// Step 10 (busy mode with preferred busy polling): advice for each port whose interrupt
/// deferral is off, read from sysfs ([`plan::deferral_advice`]).
fn read_deferral_advice(ports: &[PortInfo]) -> Vec<String> {
    ports
        .iter()
        .filter_map(|p| {
            let read = |attr: &str| {
                std::fs::read_to_string(format!("/sys/class/net/{}/{attr}", p.name))
                    .map(|v| v.trim().to_owned())
                    .unwrap_or_default()
            };
            plan::deferral_advice(&p.name, &read("napi_defer_hard_irqs"), &read("gro_flush_timeout"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// A job that runs until `stop`, then counts itself in `done`.
    fn until_stopped(stop: &Arc<AtomicBool>, done: &Arc<AtomicUsize>) -> impl FnOnce() + Send + 'static {
        let (stop, done) = (Arc::clone(stop), Arc::clone(done));
        move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            done.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_dropped_guard_stops_and_joins_its_threads_and_a_kept_one_leaves_them_running() {
        let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let mut threads = Threads::new(Arc::clone(&stop));
        threads.spawn("xfwd-test-a".into(), until_stopped(&stop, &done)).unwrap();
        threads.adopt(std::thread::spawn(until_stopped(&stop, &done)));
        drop(threads);
        assert_eq!(done.load(Ordering::Relaxed), 2, "both stopped and joined before the drop returned");

        let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let mut threads = Threads::new(Arc::clone(&stop));
        threads.spawn("xfwd-test-b".into(), until_stopped(&stop, &done)).unwrap();
        let handles = threads.keep();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!stop.load(Ordering::Relaxed), "kept: not stopped");
        assert_eq!(done.load(Ordering::Relaxed), 0);
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(done.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn workers_are_pinned_to_their_cores_and_a_failed_pin_is_a_warning() {
        let stop = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicUsize::new(0));
        let job = |ran: &Arc<AtomicUsize>| -> Job {
            let ran = Arc::clone(ran);
            Box::new(move || {
                ran.fetch_add(1, Ordering::Relaxed);
            })
        };
        let mut threads = Threads::new(Arc::clone(&stop));
        let mut warnings = Vec::new();
        // Core 0 always exists; core 1000 fits a CPU set (1024 cores) but not this machine.
        let cores = spawn_workers(vec![job(&ran), job(&ran)], &[0, 1000], &mut threads, &mut warnings).unwrap();
        assert_eq!(cores, vec![Some(0), None]);
        assert_eq!(warnings, vec!["queue 1: could not pin the worker to core 1000; it runs unpinned".to_owned()]);
        drop(threads);
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }
}
