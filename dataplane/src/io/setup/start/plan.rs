//! Start-up, decided: everything that follows from the request, the ports' facts (read from
//! sysfs by [`crate::io::setup::port::check_ports`]) and the number of cores, worked out before any
//! kernel object is made. Pure — no system calls, no threads — so every refusal and every
//! choice here is unit-tested without root; [`super`] then carries the plan out step by step.
//!
//! Refusals come in the order a user has always met them: the request alone
//! ([`check_request`]), then the ports, then queues, cores and the router's addresses
//! ([`Plan::new`]). One check runs later, where it always has: the zero-copy and XDP-mode
//! combination ([`bind_mode`]) is refused when the sockets are opened, after the program is
//! loaded. Moving it here would change which error a user sees when loading the program fails
//! too (without privileges, say), so it stays a pure function called at that step.

use std::net::IpAddr;

use crate::aqm::codel::CodelParams;
use crate::aqm::fq::FqParams;
use crate::io::frames::xsk::{BindOptions, OpenError};
use crate::io::program::xdp::LocalKind;
use crate::io::setup::config::{ForwarderConfig, Mode, Request, RouterSetup, StartError};
use crate::io::setup::drivers::{self, QueueIndex};
use crate::io::setup::options::{AqmMode, PollMode, RtPriority, Sockets, XdpMode, ZeroCopy};
use crate::io::setup::port::{PortError, PortErrorKind, PortInfo};
use crate::io::setup::settings::{Cores, Opt, Refusal, WorkerOptions};
use crate::l3::{PortSpec, Prefix};
use crate::{MAX_PORTS, MAX_QUEUES};

/// Refuses what is wrong with the request itself, before the ports are looked at.
pub fn check_request(cfg: &ForwarderConfig) -> Result<(), StartError> {
    let min_ports = if matches!(cfg.mode, Mode::Bridge { .. }) { 2 } else { 1 };
    if cfg.ports.len() < min_ports {
        return Err(Request::BridgePorts.into());
    }
    if cfg.ports.len() > MAX_PORTS {
        return Err(Request::TooManyPorts { given: cfg.ports.len(), max: MAX_PORTS }.into());
    }
    cfg.workers.check()?;
    if let Mode::Bridge { fdb_size, settings, .. } = &cfg.mode {
        if *fdb_size == 0 {
            return Err(Request::FdbSize.into());
        }
        let bad_static = settings.statics.iter().any(|(_, p)| p.index() >= cfg.ports.len());
        if (!settings.ports.is_empty() && settings.ports.len() != cfg.ports.len()) || bad_static {
            return Err(Request::BridgeSettings { given: settings.ports.len(), ports: cfg.ports.len() }.into());
        }
    }
    Ok(())
}

/// The queue management `cfg` asks for.
fn aqm_plan(cfg: &ForwarderConfig) -> Option<AqmPlan> {
    let w = &cfg.workers;
    let codel =
        CodelParams { target_ns: nanos(w.aqm_target), interval_ns: nanos(w.aqm_interval), ..CodelParams::default() };
    match w.aqm {
        AqmMode::Off => None,
        AqmMode::Codel => Some(AqmPlan { codel, flow_queues: None }),
        AqmMode::FqCodel => Some(AqmPlan {
            codel,
            flow_queues: Some(FqParams {
                slots: FQ_SLOTS,
                queues: FQ_QUEUES,
                quantum: FQ_QUANTUM,
                codel,
                ..FqParams::default()
            }),
        }),
    }
}

/// A duration in whole nanoseconds (saturating).
fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What start-up will make.
#[derive(Debug)]
pub struct Plan<'a> {
    /// Workers: one per queue id ([`Layout::PerQueue`]), or as many as asked, else one per
    /// core ([`Layout::PerCpu`]).
    pub queues: u32,
    /// How the workers' sockets are laid out over the ports' queues.
    pub layout: Layout,
    /// The XDP mode to attach in: as asked, except that `auto` takes generic mode on a driver
    /// known to break native AF_XDP ([`xdp_mode`]).
    pub xdp_mode: XdpMode,
    /// The core of each worker, by queue.
    pub cores: Vec<usize>,
    /// How every worker's sockets bind, but for zero-copy, which [`bind_mode`] decides.
    pub bind: BindOptions,
    /// What the ports do.
    pub role: Role<'a>,
    /// To say first: ports without carrier, queues left to the kernel.
    pub warnings: Vec<String>,
    /// To say last, after what start-up itself finds: busy polling with no core to spare.
    pub crowded: Option<String>,
    /// Whether to read the ports' interrupt deferral settings for advice ([`deferral_advice`]).
    pub deferral_advice: bool,
    /// The workers' real-time priority, if they are to have one ([`RtPriority`]).
    pub realtime: Option<RealTimeAsk>,
    /// Queue management, if on; the XDP program then stamps arrival times.
    pub aqm: Option<AqmPlan>,
}

/// Queue management in the workers ([`AqmMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AqmPlan {
    /// CoDel's settings: for the RX rings (`codel`), or for each flow queue (`fq-codel`).
    pub codel: CodelParams,
    /// Flow queues per egress port (`fq-codel`); `None`: CoDel on the RX rings.
    pub flow_queues: Option<FqParams>,
}

/// Frames one egress port's flow queues may hold, per worker: half the frames a port brings
/// to a UMEM (`FRAMES_PER_PORT`, 4,096). With the default rings (512) the fill and TX rings
/// keep theirs whatever every port's queues hold; with the largest fill rings (4,096, kept
/// topped up to half the frames) only every port's queues full at once leaves the fill rings
/// short, and the kernel then drops at the socket (`fill-ring-empty`), as without queues. Measured on the rig (router, 450 TCP
/// flows, one worker): with 1,024 frames most drops were overflow drops (11,694 against 23
/// CoDel drops in three runs) and Jain's index fell to 0.22 — hundreds of TCP flows hold at
/// least two frames each in the queue whatever their rate, so the queue must hold them
/// without overflowing for CoDel, not overflow, to be the drop policy.
pub const FQ_SLOTS: usize = 2048;

/// Bytes of credit a flow queue gets per DRR round: four full-sized frames, not RFC 8290's one.
/// Served one frame per flow per round, each flow's segments reach its receiver one at a time
/// between other flows' and the receivers acknowledge more of them (0.23 ACKs per data frame
/// against 0.17 with four frames, 4 TCP flows through `xfwd bridge`, from `xfwd show stats`):
/// more frames for the worker and, on veth, more receiver work in its `sendto`. Measured
/// against `--aqm off` (router, 4 TCP flows, 12 runs per arm over two bench runs): one frame
/// cost 7.5 % of throughput (t = −2.12, a difference), four frames 2.7 % (none proven), with
/// the ping's RTT p99 0.60–0.65 ms either way; eight frames raised that p99 to 1.66 ms in one
/// run. A sparse flow is not delayed by it: it is served from the new list, ahead of every
/// bulk flow's quantum.
pub const FQ_QUANTUM: u32 = 4 * 1514;

/// Flow queues per egress port: sets of 8 in a table that keeps each flow's key; 450 flows
/// fill an eighth of 1,024 queues on average, and a flow shares a queue only when the 8
/// ways of its set are all busy.
pub const FQ_QUEUES: usize = 1024;

/// SCHED_FIFO for the workers, and whether a refusal stops the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealTimeAsk {
    /// The priority.
    pub priority: u8,
    /// Asked for by number (`--rt-priority N`): a refusal is an error. Else (`auto`) the
    /// workers run as normal threads, said at start.
    pub required: bool,
}

/// How the workers' sockets are laid out (the resolved [`Sockets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Worker *q* binds queue *q* of every port, on a UMEM of its own; the XDP program picks
    /// the socket by the frame's queue index.
    PerQueue,
    /// Every worker binds queue 0 of every port, on a UMEM per port, sharing each port's fill
    /// and completion rings; the XDP program picks the socket by the CPU the frame arrived on.
    PerCpu {
        /// For each CPU slot of the program's socket map (CPU *c* uses slot *c* mod
        /// [`MAX_QUEUES`]), the worker whose socket takes its frames: the worker pinned to that
        /// CPU, else one in turn.
        slots: Vec<u32>,
    },
}

impl Layout {
    /// The queue every socket of a worker binds.
    pub fn bind_queue(&self, worker: u32) -> u32 {
        match self {
            Layout::PerQueue => worker,
            Layout::PerCpu { .. } => 0,
        }
    }

    /// The option's word for the layout.
    pub fn name(&self) -> &'static str {
        match self {
            Layout::PerQueue => Sockets::PerQueue.name(),
            Layout::PerCpu { .. } => Sockets::PerCpu.name(),
        }
    }
}

/// The mode, with what the router needs made from the ports.
#[derive(Debug)]
pub enum Role<'a> {
    /// Learning bridge.
    Bridge {
        /// FDB capacity (entries).
        fdb_size: usize,
        /// FDB ageing time, seconds.
        ageing_s: u32,
        /// Per-port settings and static stations.
        settings: &'a crate::io::setup::config::BridgeSettings,
    },
    /// IPv4 router.
    Router(RouterPlan<'a>),
}

/// The router's ports as the tables see them, and the addresses the XDP program keeps local.
#[derive(Debug)]
pub struct RouterPlan<'a> {
    /// Routes, neighbours and limits as configured.
    pub setup: &'a RouterSetup,
    /// Each port with its addresses, in port order.
    pub specs: Vec<PortSpec>,
    /// The box's addresses (both families), and the broadcast address of each IPv4 subnet
    /// with one.
    pub local: Vec<(IpAddr, LocalKind)>,
}

impl<'a> Plan<'a> {
    /// Plans a start of `cfg` (already through [`check_request`]) over `ports` (its ports'
    /// facts, in order) on a machine of `ncores` cores running Linux `kernel` (major, minor;
    /// `None`: could not tell).
    pub fn new(
        cfg: &'a ForwarderConfig,
        ports: &[PortInfo],
        ncores: usize,
        kernel: Option<(u32, u32)>,
    ) -> Result<Plan<'a>, StartError> {
        let mut warnings = Vec::new();
        for p in ports.iter().filter(|p| !p.carrier) {
            warnings.push(format!("{}: no carrier (link down); frames will flow once it comes up", p.name));
        }
        let w = &cfg.workers;
        let xdp_mode = attach_mode(w, ports, &mut warnings)?;
        // Ports whose driver gives every frame queue 0 in this mode, from whichever CPU
        // received it (generic XDP on veth and dpaa_eth).
        let zero: Vec<&PortInfo> = ports.iter().filter(|p| xdp_mode == XdpMode::Generic && queue_zero(p)).collect();
        let per_cpu = per_cpu_sockets(w, ports, &zero, ncores, kernel, &mut warnings);
        let queues = worker_queues(w, ports, &zero, per_cpu, ncores, &mut warnings)?;
        let cores = worker_cores(w, queues, ncores)?;
        let layout = socket_layout(per_cpu, &cores, queues, ncores, &mut warnings);
        let role = match &cfg.mode {
            Mode::Bridge { fdb_size, ageing_s, settings } => {
                Role::Bridge { fdb_size: *fdb_size, ageing_s: *ageing_s, settings }
            }
            Mode::Router(setup) => Role::Router(RouterPlan::new(setup, ports)?),
        };
        let busy = w.poll == PollMode::Busy;
        let crowded = (busy && queues as usize >= ncores).then(|| {
            format!(
                "busy polling with {queues} worker(s) on {ncores} core(s) leaves no core idle for the kernel or other programs; consider --poll adaptive"
            )
        });
        Ok(Plan {
            queues,
            layout,
            xdp_mode,
            cores,
            bind: BindOptions {
                zero_copy: false,
                huge_pages: w.huge_pages,
                busy_poll_budget: (busy && w.busy_poll_budget > 0).then_some(w.busy_poll_budget),
                tx_budget: w.tx_budget,
                sndbuf: w.sndbuf,
                rings: w.rings(),
            },
            role,
            warnings,
            crowded,
            deferral_advice: busy && w.busy_poll_budget > 0,
            aqm: aqm_plan(cfg),
            realtime: realtime_ask(w.rt_priority, busy),
        })
    }

    /// The bind options for every worker's sockets, in zero-copy mode or copy mode.
    pub fn bind_options(&self, zero_copy: bool) -> BindOptions {
        BindOptions { zero_copy, ..self.bind }
    }
}

/// The XDP mode to attach in: [`xdp_mode`]'s (its warning added to `warnings`), but generic
/// for per-CPU sockets in auto mode; per-CPU sockets in native mode are refused.
fn attach_mode(w: &WorkerOptions, ports: &[PortInfo], warnings: &mut Vec<String>) -> Result<XdpMode, StartError> {
    let (xdp_mode, why) = xdp_mode(w.xdp_mode, ports);
    warnings.extend(why);
    match (w.sockets, xdp_mode) {
        (Sockets::PerCpu, XdpMode::Native) => Err(Refusal::PerCpuNative.into()),
        (Sockets::PerCpu, XdpMode::Auto) => Ok(XdpMode::Generic),
        (_, m) => Ok(m),
    }
}

/// Whether the workers' sockets are per CPU: as asked, or in auto when every port gives every
/// frame queue 0 (`zero`: those ports), more than one worker would run and Linux `kernel`
/// shares a queue's rings safely. Where it may not, `warnings` says so: the risk, if per-CPU
/// sockets were asked for; the one worker that takes all, if they would have been chosen.
fn per_cpu_sockets(
    w: &WorkerOptions,
    ports: &[PortInfo],
    zero: &[&PortInfo],
    ncores: usize,
    kernel: Option<(u32, u32)>,
    warnings: &mut Vec<String>,
) -> bool {
    let fit = zero.len() == ports.len() && w.queues.unwrap_or(ncores as u32) > 1;
    let fixed = kernel.is_some_and(|k| k >= PER_CPU_KERNEL);
    let per_cpu = match w.sockets {
        Sockets::PerCpu => true,
        Sockets::PerQueue => false,
        Sockets::Auto => fit && fixed,
    };
    let release = kernel.map_or_else(|| "unknown".to_owned(), |(a, b)| format!("{a}.{b}"));
    if !fixed && (per_cpu || (fit && w.sockets == Sockets::Auto)) {
        let (a, b) = PER_CPU_KERNEL;
        warnings.push(if per_cpu {
            format!(
                "--sockets per-cpu on Linux {release}: workers sharing a queue need Linux {a}.{b}+ (generic receive serialised per buffer pool, completions written only once sent); \
                 unless this kernel carries both fixes, two CPUs can take one frame at once: use --sockets per-queue --queues 1 there"
            )
        } else {
            format!(
                "{}: every frame arrives as queue 0, but per-CPU sockets need Linux {a}.{b}+ (this is {release}): one worker takes all; \
                 if this kernel carries the fixes (generic receive serialised per buffer pool, completions written only once sent), use --sockets per-cpu",
                zero[0].name
            )
        });
    }
    per_cpu
}

/// How many workers run: per CPU, as many as asked or one per core ([`worker_count`]); per
/// queue, as [`queue_count`] says, one on a queue-0 port unless more are asked. `warnings`
/// names the workers a queue-0 port gives nothing and the RX queues no worker binds.
fn worker_queues(
    w: &WorkerOptions,
    ports: &[PortInfo],
    zero: &[&PortInfo],
    per_cpu: bool,
    ncores: usize,
    warnings: &mut Vec<String>,
) -> Result<u32, StartError> {
    let queues = if per_cpu {
        worker_count(w.queues.unwrap_or(ncores as u32))?
    } else {
        // On a queue-0 port one worker takes all, so one is what runs unless more are asked.
        let asked = w.queues.or(zero.first().map(|_| 1));
        queue_count(asked, ports, ncores)?
    };
    if let (Some(p), false, true) = (zero.first(), per_cpu, queues > 1) {
        warnings.push(format!(
            "{}: in generic mode {} gives every frame queue 0: the workers of queues 1..{} receive nothing from it; use --sockets per-cpu",
            p.name,
            p.driver.as_deref().unwrap_or("its driver"),
            queues - 1
        ));
    }
    // (On a queue-0 port the other queues are no loss: nothing arrives there.)
    let bound = if per_cpu { 1 } else { queues };
    for p in ports.iter().filter(|p| p.rx_queues > bound && !zero.iter().any(|z| z.name == p.name)) {
        warnings.push(if per_cpu {
            format!(
                "{}: {} RX queues, but --sockets per-cpu binds queue 0 only: frames on queues 1..{} go to the kernel (counted as pass-no-socket); use ethtool -L {} combined 1, or --sockets per-queue",
                p.name, p.rx_queues, p.rx_queues - 1, p.name
            )
        } else {
            format!(
                "{}: {} RX queues but {queues} worker(s): frames on queues {}..{} go to the kernel (counted as pass-no-socket); use --queues {} or ethtool -L {} combined {queues}",
                p.name, p.rx_queues, queues, p.rx_queues - 1, p.rx_queues, p.name
            )
        });
    }
    Ok(queues)
}

/// The core of each of `queues` workers, from `--cores` ([`assign_cores`]); `irq` must have
/// been resolved to a list before planning.
fn worker_cores(w: &WorkerOptions, queues: u32, ncores: usize) -> Result<Vec<usize>, StartError> {
    let asked = match &w.cores {
        None => None,
        Some(Cores::List(l)) => Some(l.as_slice()),
        Some(Cores::Irq) => return Err(Refusal::CoresIrqUnresolved.into()),
    };
    assign_cores(asked, queues, ncores)
}

/// The sockets' layout: per queue, or per CPU with each CPU slot's worker ([`cpu_slots`]);
/// `warnings` names per-CPU workers no CPU leads to.
fn socket_layout(per_cpu: bool, cores: &[usize], queues: u32, ncores: usize, warnings: &mut Vec<String>) -> Layout {
    let layout = if per_cpu { Layout::PerCpu { slots: cpu_slots(cores) } } else { Layout::PerQueue };
    if let Layout::PerCpu { slots } = &layout {
        let idle: Vec<String> = (0..queues)
            .filter(|w| !slots.iter().take(ncores.min(MAX_QUEUES)).any(|s| s == w))
            .map(|w| w.to_string())
            .collect();
        if !idle.is_empty() {
            warnings.push(format!(
                "--sockets per-cpu: queue(s) {} serve no CPU (workers share cores or outnumber them) and receive nothing; use --queues {} with one core each",
                idle.join(","),
                ncores
            ));
        }
    }
    layout
}

/// The workers' real-time priority for `--rt-priority`: none when off, or in auto mode when
/// the workers busy-poll.
fn realtime_ask(rt: RtPriority, busy: bool) -> Option<RealTimeAsk> {
    match rt {
        RtPriority::Off => None,
        // A real-time worker that never sleeps would take its core from everything else.
        RtPriority::Auto if busy => None,
        RtPriority::Auto => Some(RealTimeAsk { priority: RtPriority::AUTO, required: false }),
        RtPriority::Fixed(priority) => Some(RealTimeAsk { priority, required: true }),
    }
}

/// The ports whose driver gives XDP hardware queue ids rather than 0-based queue indices.
fn hardware_queue_ids(ports: &[PortInfo]) -> impl Iterator<Item = &PortInfo> {
    ports.iter().filter(|p| {
        p.driver.as_deref().and_then(drivers::lookup).is_some_and(|q| q.queue_index == QueueIndex::HardwareQueueId)
    })
}

/// The XDP mode to attach in, and what to say about it. `auto` means native where the driver
/// has it, generic otherwise — and generic on a driver whose native XDP gives hardware queue
/// ids, which no AF_XDP socket can be bound to match (the table in [`drivers`]): there native
/// mode would attach and forward nothing. An explicit mode is kept, with a warning in that case.
pub fn xdp_mode(asked: XdpMode, ports: &[PortInfo]) -> (XdpMode, Option<String>) {
    let Some(p) = hardware_queue_ids(ports).next() else {
        return (asked, None);
    };
    let driver = p.driver.as_deref().unwrap_or("its driver");
    match asked {
        XdpMode::Auto => (
            XdpMode::Generic,
            Some(format!(
                "{}: {driver} gives native XDP hardware frame-queue ids, which no AF_XDP socket matches: attaching in generic mode (--xdp-mode auto; see xfwd doctor {})",
                p.name, p.name
            )),
        ),
        XdpMode::Native => (
            XdpMode::Native,
            Some(format!(
                "{}: {driver} gives native XDP hardware frame-queue ids, which no AF_XDP socket matches: in native mode nothing will reach the workers; use --xdp-mode generic",
                p.name
            )),
        ),
        XdpMode::Generic => (XdpMode::Generic, None),
    }
}

/// The first mainline Linux whose AF_XDP lets sockets on several CPUs share one queue's rings
/// in generic mode: receive serialised per buffer pool (6.15, "xsk: Fix race condition in
/// AF_XDP generic RX path") and a completion written only once its frame is sent (6.17, "xsk:
/// Fix immature cq descriptor production"). Stable kernels may carry both as backports.
pub const PER_CPU_KERNEL: (u32, u32) = (6, 17);

/// Linux's major and minor version from a release string (`uname -r`: "6.18.44-foo").
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether `p`'s driver gives every frame queue 0 in generic mode (the table in [`drivers`]),
/// with as many queues as it has.
fn queue_zero(p: &PortInfo) -> bool {
    p.driver.as_deref().and_then(drivers::lookup).is_some_and(|q| q.queue_index.generic_queue_zero(p.rx_queues))
}

/// For each CPU slot of the program's socket map, the worker that takes its frames: the first
/// worker pinned to a CPU of that slot, else the workers in turn.
pub fn cpu_slots(cores: &[usize]) -> Vec<u32> {
    let n = cores.len().max(1);
    (0..MAX_QUEUES).map(|s| cores.iter().position(|&c| c % MAX_QUEUES == s).unwrap_or(s % n) as u32).collect()
}

/// A worker count asked for (or the cores) where queues do not bound it.
fn worker_count(n: u32) -> Result<u32, StartError> {
    match n {
        0 => Err(Refusal::AtLeastOne(Opt::Queues).into()),
        n if n as usize > MAX_QUEUES => Err(Refusal::TooManyQueues { asked: n }.into()),
        n => Ok(n),
    }
}

/// Workers to start: as asked (each port must have that many RX queues), else the smallest RX
/// queue count among the ports, capped by the cores.
fn queue_count(asked: Option<u32>, ports: &[PortInfo], ncores: usize) -> Result<u32, StartError> {
    let queues = match asked {
        Some(0) => return Err(Refusal::AtLeastOne(Opt::Queues).into()),
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
        None => {
            let min_rx = ports.iter().map(|p| p.rx_queues).min().unwrap_or(1);
            min_rx.min(ncores as u32).max(1)
        }
    };
    if queues as usize > MAX_QUEUES {
        return Err(Refusal::TooManyQueues { asked: queues }.into());
    }
    Ok(queues)
}

/// The core of each of `queues` workers: the first ones of `asked` (each must exist), else
/// queue *i* on core *i*, wrapping round the cores.
fn assign_cores(asked: Option<&[usize]>, queues: u32, ncores: usize) -> Result<Vec<usize>, StartError> {
    let Some(list) = asked else {
        return Ok((0..queues as usize).map(|q| q % ncores).collect());
    };
    if list.len() < queues as usize {
        return Err(Refusal::TooFewCores { given: list.len(), queues }.into());
    }
    if let Some(c) = list.iter().find(|&&c| c >= ncores) {
        return Err(Refusal::NoSuchCore { core: *c, ncores }.into());
    }
    Ok(list[..queues as usize].to_vec())
}

impl<'a> RouterPlan<'a> {
    fn new(setup: &'a RouterSetup, ports: &[PortInfo]) -> Result<RouterPlan<'a>, StartError> {
        if setup.addresses.len() != ports.len()
            || setup.addresses6.len() != ports.len()
            || setup.link_locals.len() != ports.len()
        {
            return Err(Request::Addresses.into());
        }
        // IPv6 needs links of 1,280 bytes at least (RFC 8200 section 5): on a smaller one no
        // Packet Too Big could name an MTU a sender may use.
        if let Some((p, _)) = ports.iter().zip(&setup.addresses6).find(|(p, a)| !a.is_empty() && p.mtu < 1280) {
            return Err(Request::Ipv6Mtu { port: p.name.clone(), mtu: p.mtu }.into());
        }
        let specs = ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortSpec {
                name: p.name.clone(),
                mac: p.mac,
                mtu: p.mtu,
                addrs: setup.addresses[i].clone(),
                addrs6: setup.addresses6[i].clone(),
                // The configured one, else the kernel's.
                link_local: setup.link_locals[i].or(p.link_local),
            })
            .collect();
        let mut local = Vec::new();
        for (a, len) in setup.addresses.iter().flatten() {
            local.push((IpAddr::V4(*a), LocalKind::Address));
            if *len < 31 {
                local.push((IpAddr::V4(Prefix::truncate(*a, *len).broadcast()), LocalKind::Broadcast));
            }
        }
        local.extend(setup.addresses6.iter().flatten().map(|(a, _)| (IpAddr::V6(*a), LocalKind::Address)));
        Ok(RouterPlan { setup, specs, local })
    }
}

/// How the AF_XDP sockets bind. One worker's sockets share a UMEM, which has one mode for all
/// of them, and the first queue decides for every worker: one mode for the whole forwarder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// Copy mode: asked for, or implied by generic XDP (which cannot feed zero-copy sockets).
    Copy,
    /// Zero-copy where the drivers have it, else copy mode for all (said at start).
    PreferZeroCopy,
    /// Zero-copy or no start.
    RequireZeroCopy,
}

/// The bind mode for `--zero-copy` and `--xdp-mode`; refuses the pair that cannot work.
pub fn bind_mode(zero_copy: ZeroCopy, xdp_mode: XdpMode) -> Result<BindMode, StartError> {
    match (zero_copy, xdp_mode) {
        // Zero-copy needs the driver's own XDP: a generic attachment cannot feed it.
        (ZeroCopy::On, XdpMode::Generic) => Err(Refusal::ZeroCopyGeneric.into()),
        (ZeroCopy::Off, _) | (_, XdpMode::Generic) => Ok(BindMode::Copy),
        (ZeroCopy::Auto, _) => Ok(BindMode::PreferZeroCopy),
        (ZeroCopy::On, _) => Ok(BindMode::RequireZeroCopy),
    }
}

impl BindMode {
    /// Whether the first bind tries zero-copy.
    pub fn tries_zero_copy(self) -> bool {
        self != BindMode::Copy
    }

    /// Whether a zero-copy bind of `queue` that failed with `e` is retried, for every queue,
    /// in copy mode: only under auto, only on the first queue (later queues follow its
    /// choice), and only when the driver lacks zero-copy.
    pub fn falls_back(self, queue: u32, e: &OpenError) -> bool {
        self == BindMode::PreferZeroCopy && queue == 0 && e.no_zero_copy()
    }
}

/// What to say when the first queue falls back to copy mode because of port `port`.
pub fn fallback_warning(port: &str) -> String {
    format!("{port}: no AF_XDP zero-copy in its driver; every socket binds in copy mode")
}

/// The error for a failed bind of `queue` over `ports` (`zero_copy`: tried in zero-copy mode),
/// naming the port and, where zero-copy was the cause, the fix.
pub fn socket_error(ports: &[String], queue: u32, zero_copy: bool, e: &OpenError) -> StartError {
    let mut cause = e.cause.clone();
    if zero_copy && e.no_zero_copy() {
        cause.push_str("; the driver has no AF_XDP zero-copy: use --zero-copy auto or off");
    } else if e.errno == Some(libc::EBUSY) {
        let others = crate::io::program::xdp::other_xfwds();
        cause.push_str("; another AF_XDP socket holds this queue");
        if others.is_empty() {
            cause.push_str(" (another xfwd, or another AF_XDP program): stop it first");
        } else {
            cause.push_str(&format!(", likely another xfwd (running: pid {}): stop it first", others.join(", ")));
        }
    }
    PortError::new(&ports[e.port], PortErrorKind::Socket { queue, cause }).into()
}

/// Refuses port `port` when the program took it only in generic mode while the sockets are
/// zero-copy (generic XDP cannot feed them).
pub fn check_attached(port: &str, got: XdpMode, zero_copy: bool) -> Result<(), StartError> {
    if zero_copy && got == XdpMode::Generic {
        return Err(PortError::new(
            port,
            PortErrorKind::Xdp(
                "took XDP only in generic mode, which cannot feed zero-copy sockets: use --zero-copy off, or --xdp-mode native to see why native failed".into(),
            ),
        )
        .into());
    }
    Ok(())
}

/// Advice for preferred busy polling on `port`, given its `napi_defer_hard_irqs` and
/// `gro_flush_timeout` (as read from sysfs, empty if unreadable): with either at 0 the driver's
/// interrupts stay on, and xfwd changes no system setting itself.
pub fn deferral_advice(port: &str, napi_defer_hard_irqs: &str, gro_flush_timeout: &str) -> Option<String> {
    (napi_defer_hard_irqs == "0" || gro_flush_timeout == "0").then(|| {
        format!(
            "{port}: preferred busy polling keeps the driver's interrupts off only with deferral set: \
             echo 2 > /sys/class/net/{port}/napi_defer_hard_irqs; echo 200000 > /sys/class/net/{port}/gro_flush_timeout \
             (xfwd changes no system setting)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::frames::xsk::RingSizes;
    use crate::io::setup::settings::WorkerOptions;
    use crate::l3::tables::RouterLimits;
    use crate::wire::MacAddr;
    use std::net::Ipv4Addr;

    /// `base` with its worker options changed by `f`.
    fn with(base: ForwarderConfig, f: impl FnOnce(&mut WorkerOptions)) -> ForwarderConfig {
        let mut cfg = base;
        f(&mut cfg.workers);
        cfg
    }

    /// A plan on a kernel with what per-CPU sockets need.
    fn plan_new<'a>(cfg: &'a ForwarderConfig, ports: &[PortInfo], ncores: usize) -> Result<Plan<'a>, StartError> {
        Plan::new(cfg, ports, ncores, Some((6, 18)))
    }

    fn port(name: &str, rx_queues: u32) -> PortInfo {
        PortInfo {
            name: name.into(),
            ifindex: 7,
            mtu: 1500,
            rx_queues,
            up: true,
            carrier: true,
            mac: MacAddr([2, 0, 0, 0, 0, 7]),
            driver: Some("veth".into()),
            link_local: None,
        }
    }

    fn bridge(ports: &[&str]) -> ForwarderConfig {
        ForwarderConfig {
            ports: ports.iter().map(|p| (*p).to_owned()).collect(),
            workers: WorkerOptions { busy_poll_budget: 64, aqm: AqmMode::Codel, ..WorkerOptions::default() },
            mode: Mode::Bridge { fdb_size: 4096, ageing_s: 300, settings: Default::default() },
        }
    }

    fn router(addresses: Vec<Vec<(Ipv4Addr, u8)>>) -> ForwarderConfig {
        let limits =
            RouterLimits { neighbors: 64, glean_queue: 4, icmp_rate: 100, icmp_burst: 10, rfc1812_martians: false };
        let setup = RouterSetup {
            addresses6: vec![Vec::new(); addresses.len()],
            link_locals: vec![None; addresses.len()],
            addresses,
            routes: Vec::new(),
            routes6: Vec::new(),
            neighbors: Vec::new(),
            neighbors6: Vec::new(),
            limits,
            fib: Default::default(),
        };
        ForwarderConfig { mode: Mode::Router(Box::new(setup)), ..bridge(&["eth4", "eth5"]) }
    }

    fn usage(r: Result<impl std::fmt::Debug, StartError>) -> String {
        match r {
            Err(StartError::Request(m)) => m.to_string(),
            Err(StartError::Refused(r)) => r.to_string(),
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    fn dpaa(name: &str) -> PortInfo {
        PortInfo { driver: Some("fsl_dpa".into()), rx_queues: 8, ..port(name, 8) }
    }

    #[test]
    fn auto_takes_generic_mode_and_per_cpu_sockets_on_a_driver_with_hardware_queue_ids() {
        let ports = [dpaa("eth4"), dpaa("eth5")];
        let cfg = bridge(&["eth4", "eth5"]);
        let plan = plan_new(&cfg, &ports, 4).unwrap();
        // Every CPU's portal delivers frames as queue 0: a worker per core, chosen by CPU.
        assert_eq!((plan.xdp_mode, plan.queues), (XdpMode::Generic, 4));
        let Layout::PerCpu { slots } = &plan.layout else { panic!("{:?}", plan.layout) };
        assert_eq!(slots[..6], [0, 1, 2, 3, 0, 1], "CPU k to the worker on core k, the others in turn");
        assert_eq!(slots.len(), MAX_QUEUES);
        // One warning, the mode's: not "frames on queues 1..7 go to the kernel", which in
        // generic mode is untrue there.
        assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
        assert!(
            plan.warnings.iter().all(|w| w.contains("fsl_dpa gives native XDP hardware frame-queue ids")
                && w.contains("attaching in generic mode")),
            "{:?}",
            plan.warnings
        );
        // Per-queue sockets asked for: one worker takes all, unless more are asked, which is
        // kept with what it costs.
        let cfg = with(bridge(&["eth4", "eth5"]), |w| w.sockets = Sockets::PerQueue);
        let plan = plan_new(&cfg, &ports, 4).unwrap();
        assert_eq!((plan.queues, &plan.layout), (1, &Layout::PerQueue));
        let cfg = with(bridge(&["eth4", "eth5"]), |w| {
            w.queues = Some(2);
            w.sockets = Sockets::PerQueue
        });
        let plan = plan_new(&cfg, &ports, 4).unwrap();
        assert_eq!((plan.xdp_mode, plan.queues), (XdpMode::Generic, 2));
        assert!(
            plan.warnings
                .iter()
                .any(|w| w.contains("workers of queues 1..1 receive nothing") && w.ends_with("use --sockets per-cpu")),
            "{:?}",
            plan.warnings
        );
        // One core: one worker, per queue.
        let cfg = bridge(&["eth4", "eth5"]);
        let plan = plan_new(&cfg, &ports, 1).unwrap();
        assert_eq!((plan.queues, &plan.layout), (1, &Layout::PerQueue));
        // Native forced: kept, and said to forward nothing.
        let cfg = with(bridge(&["eth4", "eth5"]), |w| w.xdp_mode = XdpMode::Native);
        let plan = plan_new(&cfg, &ports, 4).unwrap();
        assert_eq!((plan.xdp_mode, plan.queues, &plan.layout), (XdpMode::Native, 4, &Layout::PerQueue));
        assert!(plan.warnings.iter().any(|w| w.contains("in native mode nothing will reach the workers")));
        // Any other driver: the mode as asked, no word about it.
        let veth = [port("eth4", 2), port("eth5", 2)];
        let cfg = bridge(&["eth4", "eth5"]);
        let plan = plan_new(&cfg, &veth, 4).unwrap();
        assert_eq!((plan.xdp_mode, plan.queues, &plan.layout), (XdpMode::Auto, 2, &Layout::PerQueue));
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
        // One such port among others is enough: the program has one mode per start.
        let mixed = [port("eth4", 2), dpaa("eth5")];
        assert_eq!(xdp_mode(XdpMode::Auto, &mixed).0, XdpMode::Generic);
    }

    #[test]
    fn per_cpu_sockets_where_generic_mode_gives_every_frame_queue_zero() {
        let veth = [port("eth4", 1), port("eth5", 1)];
        // veth in generic mode: per CPU, a worker per core, however many queues the ports have.
        let generic = with(bridge(&["eth4", "eth5"]), |w| w.xdp_mode = XdpMode::Generic);
        let plan = plan_new(&generic, &veth, 2).unwrap();
        assert_eq!((plan.queues, plan.layout.name()), (2, "per-cpu"));
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
        assert_eq!((plan.layout.bind_queue(0), plan.layout.bind_queue(1)), (0, 0), "every worker on queue 0");
        // A veth of more than two queues gives generic XDP the sender's queue less one: per queue.
        let wide = [port("eth4", 4), port("eth5", 4)];
        let plan = plan_new(&generic, &wide, 2).unwrap();
        assert_eq!((plan.queues, &plan.layout), (2, &Layout::PerQueue));
        let cfg = with(generic.clone(), |w| {
            w.queues = Some(3);
            w.cores = Some(Cores::List(vec![1, 0, 1]))
        });
        let plan = plan_new(&cfg, &veth, 2).unwrap();
        let Layout::PerCpu { slots } = &plan.layout else { panic!("{:?}", plan.layout) };
        assert_eq!(slots[..4], [1, 0, 2, 0], "CPU 0 to the worker pinned there; slots no core has in turn");
        assert_eq!(
            plan.warnings,
            ["--sockets per-cpu: queue(s) 2 serve no CPU (workers share cores or outnumber them) and receive nothing; use --queues 2 with one core each"]
        );
        // Per-CPU sockets asked for in auto mode attach in generic mode; native is refused.
        let cfg = with(bridge(&["eth4", "eth5"]), |w| w.sockets = Sockets::PerCpu);
        let plan = plan_new(&cfg, &veth, 2).unwrap();
        assert_eq!((plan.xdp_mode, plan.layout.name()), (XdpMode::Generic, "per-cpu"));
        let native = with(cfg.clone(), |w| w.xdp_mode = XdpMode::Native);
        assert!(usage(plan_new(&native, &veth, 2)).starts_with("--sockets per-cpu with --xdp-mode native"));
        // A driver that records its RX queues keeps them in generic mode: per queue, unless
        // forced, and then its other queues' frames are lost to the kernel, said at start.
        let mlx = |n| PortInfo { driver: Some("mlx5_core".into()), ..port(n, 4) };
        let ports = [mlx("eth4"), mlx("eth5")];
        let plan = plan_new(&generic, &ports, 4).unwrap();
        assert_eq!((plan.queues, &plan.layout), (4, &Layout::PerQueue));
        let plan = plan_new(&cfg, &ports, 4).unwrap();
        assert_eq!(plan.layout.name(), "per-cpu");
        assert_eq!(plan.warnings.len(), 2, "{:?}", plan.warnings);
        assert!(plan.warnings[0].starts_with("eth4: 4 RX queues, but --sockets per-cpu binds queue 0 only"));
        // Mixed drivers: per queue (veth's workers past the first idle, mlx5's queues served).
        let mixed = [port("eth4", 4), mlx("eth5")];
        assert_eq!(plan_new(&generic, &mixed, 4).unwrap().layout, Layout::PerQueue);
        assert_eq!(usage(plan_new(&with(cfg, |w| { w.queues = Some(0) }), &veth, 2)), "--queues must be at least 1");
    }

    #[test]
    fn per_cpu_sockets_wait_for_a_kernel_that_serialises_shared_receive() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("5.10.35-lts"), Some((5, 10)));
        assert_eq!(kernel_version("6"), None);
        assert_eq!(kernel_version(""), None);
        let veth = [port("eth4", 1), port("eth5", 1)];
        let generic = with(bridge(&["eth4", "eth5"]), |w| w.xdp_mode = XdpMode::Generic);
        for old in [Some((6, 16)), Some((5, 10)), None] {
            // Auto: per queue, one worker, and why.
            let plan = Plan::new(&generic, &veth, 2, old).unwrap();
            assert_eq!((plan.queues, &plan.layout), (1, &Layout::PerQueue), "{old:?}");
            assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
            assert!(plan.warnings[0]
                .starts_with("eth4: every frame arrives as queue 0, but per-CPU sockets need Linux 6.17+"));
            // Asked for: kept, with the risk named.
            let asked = with(generic.clone(), |w| w.sockets = Sockets::PerCpu);
            let plan = Plan::new(&asked, &veth, 2, old).unwrap();
            assert_eq!(plan.layout.name(), "per-cpu");
            assert!(plan.warnings[0].contains("two CPUs can take one frame at once"), "{:?}", plan.warnings);
        }
        let plan = Plan::new(&generic, &veth, 2, Some((6, 17))).unwrap();
        assert_eq!((plan.layout.name(), plan.warnings.len()), ("per-cpu", 0));
    }

    #[test]
    fn the_request_alone_is_refused_with_what_to_change() {
        assert!(check_request(&bridge(&["a", "b"])).is_ok());
        assert_eq!(usage(check_request(&bridge(&["a"]))), "a bridge needs at least two ports");
        // A router may route between the subnets of a single port.
        let mut one = router(vec![vec![]]);
        one.ports.truncate(1);
        assert!(check_request(&one).is_ok());
        let many: Vec<String> = (0..=MAX_PORTS).map(|i| format!("p{i}")).collect();
        let cfg = ForwarderConfig { ports: many, ..bridge(&[]) };
        assert_eq!(usage(check_request(&cfg)), format!("at most {MAX_PORTS} ports, {} given", MAX_PORTS + 1));
        for p in [0, 100] {
            let cfg = with(bridge(&["a", "b"]), |w| w.rt_priority = RtPriority::Fixed(p));
            assert_eq!(usage(check_request(&cfg)), format!("--rt-priority {p}: give 1 to 99"));
        }
        let cfg = with(bridge(&["a", "b"]), |w| {
            w.rt_priority = RtPriority::Fixed(10);
            w.poll = PollMode::Busy
        });
        assert!(usage(check_request(&cfg)).starts_with("--rt-priority with --poll busy"));
        let cfg = with(bridge(&["a", "b"]), |w| w.rt_priority = RtPriority::Fixed(99));
        assert!(check_request(&cfg).is_ok());
        let cfg = with(bridge(&["a", "b"]), |w| w.aqm_target = std::time::Duration::from_nanos(100_000_000));
        assert!(usage(check_request(&cfg)).starts_with("--aqm-target (100ms) must be below --aqm-interval (100ms)"));
        let cfg = with(bridge(&["a", "b"]), |w| {
            w.aqm_target = std::time::Duration::from_nanos(100_000_000);
            w.aqm = AqmMode::Off
        });
        assert!(check_request(&cfg).is_ok(), "off: the settings do not matter");
        let cfg = ForwarderConfig {
            mode: Mode::Bridge { fdb_size: 0, ageing_s: 300, settings: Default::default() },
            ..bridge(&["a", "b"])
        };
        assert_eq!(usage(check_request(&cfg)), "--fdb-size must be at least 1");
    }

    #[test]
    fn workers_default_to_the_fewest_rx_queues_capped_by_the_cores() {
        let cfg = bridge(&["a", "b"]);
        let plan = |rx: [u32; 2], ncores| plan_new(&cfg, &[port("a", rx[0]), port("b", rx[1])], ncores).unwrap();
        assert_eq!(plan([4, 2], 8).queues, 2);
        assert_eq!(plan([4, 8], 3).queues, 3);
        assert_eq!(plan([1, 1], 2).queues, 1);
        // A port with more queues than workers leaves the rest to the kernel, and says so.
        let p = plan([4, 2], 8);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].starts_with("a: 4 RX queues but 2 worker(s): frames on queues 2..3 go to the kernel"));
        assert!(plan([2, 2], 8).warnings.is_empty());
    }

    #[test]
    fn an_asked_queue_count_must_fit_every_port() {
        let ports = [port("a", 4), port("b", 2)];
        let cfg = |q| with(bridge(&["a", "b"]), |w| w.queues = Some(q));
        assert_eq!(plan_new(&cfg(2), &ports, 2).unwrap().queues, 2, "more queues than cores is allowed when asked");
        assert_eq!(usage(plan_new(&cfg(0), &ports, 2)), "--queues must be at least 1");
        match plan_new(&cfg(3), &ports, 8) {
            Err(StartError::Port(e)) => {
                assert_eq!(e.port, "b");
                assert!(matches!(e.kind, PortErrorKind::TooFewQueues { has: 2, want: 3, .. }), "{e}");
            }
            other => panic!("{other:?}"),
        }
        let wide = [port("a", 100), port("b", 100)];
        assert_eq!(
            usage(plan_new(&cfg(MAX_QUEUES as u32 + 1), &wide, 2)),
            format!("--queues {}: at most {MAX_QUEUES} queues", MAX_QUEUES + 1)
        );
    }

    #[test]
    fn queues_go_to_cores_in_order_wrapping_round_or_as_listed() {
        assert_eq!(assign_cores(None, 3, 2).unwrap(), vec![0, 1, 0]);
        assert_eq!(assign_cores(None, 2, 4).unwrap(), vec![0, 1]);
        assert_eq!(assign_cores(Some(&[3, 1, 2]), 2, 4).unwrap(), vec![3, 1], "the first of the list");
        assert_eq!(
            usage(assign_cores(Some(&[1]), 2, 4)),
            "--cores names 1 core(s) for 2 queue(s); give one core per queue"
        );
        assert_eq!(usage(assign_cores(Some(&[0, 4]), 2, 4)), "--cores: core 4 does not exist (cores 0..3)");
        // Through the plan: the cores follow the queue count.
        let cfg = with(bridge(&["a", "b"]), |w| {
            w.queues = Some(2);
            w.cores = Some(Cores::List(vec![1, 1]))
        });
        assert_eq!(plan_new(&cfg, &[port("a", 2), port("b", 2)], 2).unwrap().cores, vec![1, 1]);
    }

    #[test]
    fn warnings_come_first_for_the_link_and_last_for_crowded_busy_polling() {
        let mut down = port("a", 1);
        down.carrier = false;
        let cfg = bridge(&["a", "b"]);
        let p = plan_new(&cfg, &[down, port("b", 1)], 2).unwrap();
        assert_eq!(p.warnings, vec!["a: no carrier (link down); frames will flow once it comes up".to_owned()]);
        assert_eq!(p.crowded, None);
        let busy = with(bridge(&["a", "b"]), |w| {
            w.poll = PollMode::Busy;
            w.queues = Some(2)
        });
        let p = plan_new(&busy, &[port("a", 2), port("b", 2)], 2).unwrap();
        assert!(p.crowded.unwrap().starts_with("busy polling with 2 worker(s) on 2 core(s)"));
        let p = plan_new(&busy, &[port("a", 2), port("b", 2)], 3).unwrap();
        assert_eq!(p.crowded, None, "a core to spare");
    }

    /// Every warning a plan can give, word for word (the other tests check how they begin).
    #[test]
    fn warnings_are_said_in_full() {
        let said = |cfg: &ForwarderConfig, ports: &[PortInfo], ncores, kernel| {
            let p = Plan::new(cfg, ports, ncores, kernel).unwrap();
            let mut all = p.warnings;
            all.extend(p.crowded);
            all
        };
        let veth = [port("eth4", 1), port("eth5", 1)];
        let generic = with(bridge(&["eth4", "eth5"]), |w| w.xdp_mode = XdpMode::Generic);
        let per_cpu = with(generic.clone(), |w| w.sockets = Sockets::PerCpu);
        let mlx = |n| PortInfo { driver: Some("mlx5_core".into()), ..port(n, 4) };
        let two_dpaa = with(bridge(&["eth4", "eth5"]), |w| {
            w.queues = Some(2);
            w.sockets = Sockets::PerQueue
        });
        let busy = with(bridge(&["a", "b"]), |w| w.poll = PollMode::Busy);
        let mut down = port("a", 4);
        down.carrier = false;
        assert_eq!(
            said(&generic, &veth, 2, Some((6, 16))),
            ["eth4: every frame arrives as queue 0, but per-CPU sockets need Linux 6.17+ (this is 6.16): one worker takes all; if this kernel carries the fixes (generic receive serialised per buffer pool, completions written only once sent), use --sockets per-cpu"]
        );
        assert_eq!(
            said(&per_cpu, &veth, 2, None),
            ["--sockets per-cpu on Linux unknown: workers sharing a queue need Linux 6.17+ (generic receive serialised per buffer pool, completions written only once sent); unless this kernel carries both fixes, two CPUs can take one frame at once: use --sockets per-queue --queues 1 there"]
        );
        assert_eq!(
            said(&per_cpu, &[mlx("eth4"), mlx("eth5")], 4, Some((6, 18))),
            [
                "eth4: 4 RX queues, but --sockets per-cpu binds queue 0 only: frames on queues 1..3 go to the kernel (counted as pass-no-socket); use ethtool -L eth4 combined 1, or --sockets per-queue",
                "eth5: 4 RX queues, but --sockets per-cpu binds queue 0 only: frames on queues 1..3 go to the kernel (counted as pass-no-socket); use ethtool -L eth5 combined 1, or --sockets per-queue",
            ]
        );
        assert_eq!(
            said(&two_dpaa, &[dpaa("eth4"), dpaa("eth5")], 4, Some((6, 18))),
            [
                "eth4: fsl_dpa gives native XDP hardware frame-queue ids, which no AF_XDP socket matches: attaching in generic mode (--xdp-mode auto; see xfwd doctor eth4)",
                "eth4: in generic mode fsl_dpa gives every frame queue 0: the workers of queues 1..1 receive nothing from it; use --sockets per-cpu",
            ]
        );
        assert_eq!(
            said(&busy, &[down, port("b", 4)], 2, Some((6, 18))),
            [
                "a: no carrier (link down); frames will flow once it comes up",
                "a: 4 RX queues but 2 worker(s): frames on queues 2..3 go to the kernel (counted as pass-no-socket); use --queues 4 or ethtool -L a combined 2",
                "b: 4 RX queues but 2 worker(s): frames on queues 2..3 go to the kernel (counted as pass-no-socket); use --queues 4 or ethtool -L b combined 2",
                "busy polling with 2 worker(s) on 2 core(s) leaves no core idle for the kernel or other programs; consider --poll adaptive",
            ]
        );
    }

    #[test]
    fn workers_are_real_time_by_default_except_when_busy_polling_or_off() {
        let ports = [port("a", 1), port("b", 1)];
        let ask = |rt, poll| {
            let cfg = with(bridge(&["a", "b"]), |w| {
                w.rt_priority = rt;
                w.poll = poll
            });
            plan_new(&cfg, &ports, 2).unwrap().realtime
        };
        let auto = RealTimeAsk { priority: RtPriority::AUTO, required: false };
        assert_eq!(ask(RtPriority::Auto, PollMode::Adaptive), Some(auto), "the default");
        assert_eq!(ask(RtPriority::Auto, PollMode::Busy), None, "a spinning worker stays a normal thread");
        assert_eq!(ask(RtPriority::Off, PollMode::Adaptive), None);
        assert_eq!(ask(RtPriority::Fixed(30), PollMode::Adaptive), Some(RealTimeAsk { priority: 30, required: true }));
    }

    #[test]
    fn busy_poll_options_apply_to_busy_mode_only() {
        let ports = [port("a", 1), port("b", 1)];
        let adaptive = bridge(&["a", "b"]);
        let p = plan_new(&adaptive, &ports, 2).unwrap();
        assert_eq!((p.bind.busy_poll_budget, p.deferral_advice), (None, false));
        let busy = with(adaptive.clone(), |w| {
            w.poll = PollMode::Busy;
            w.tx_budget = Some(512);
            w.huge_pages = true
        });
        let p = plan_new(&busy, &ports, 2).unwrap();
        assert_eq!((p.bind.busy_poll_budget, p.deferral_advice), (Some(64), true));
        assert_eq!((p.bind.tx_budget, p.bind.huge_pages), (Some(512), true));
        assert!(p.bind_options(true).zero_copy && !p.bind_options(false).zero_copy);
        assert_eq!(p.bind_options(true).busy_poll_budget, Some(64));
        let off = with(busy, |w| w.busy_poll_budget = 0);
        let p = plan_new(&off, &ports, 2).unwrap();
        assert_eq!((p.bind.busy_poll_budget, p.deferral_advice), (None, false), "budget 0 turns it off");
    }

    #[test]
    fn ring_sizes_reach_the_sockets_and_are_powers_of_two_within_bounds() {
        let ports = [port("a", 1), port("b", 1)];
        let rings = RingSizes { rx: 512, tx: 256, fill: 1024, completion: 64 };
        let cfg = with(bridge(&["a", "b"]), |w| {
            w.rx_ring = rings.rx;
            w.tx_ring = rings.tx;
            w.fill_ring = rings.fill;
            w.completion_ring = rings.completion
        });
        let p = plan_new(&cfg, &ports, 2).unwrap();
        assert_eq!(p.bind_options(false).rings, rings);
        for (rings, msg) in [
            (RingSizes { rx: 1000, ..RingSizes::default() }, "--rx-ring 1000: give a power of two from 64 to 4096"),
            (RingSizes { tx: 32, ..RingSizes::default() }, "--tx-ring 32: give"),
            (RingSizes { completion: 8192, ..RingSizes::default() }, "--completion-ring 8192: give"),
        ] {
            let e = usage(check_request(&with(bridge(&["a", "b"]), |w| {
                w.rx_ring = rings.rx;
                w.tx_ring = rings.tx;
                w.fill_ring = rings.fill;
                w.completion_ring = rings.completion
            })));
            assert!(e.starts_with(msg), "{e}");
        }
    }

    #[test]
    fn zero_copy_is_tried_unless_off_or_generic_and_forced_only_where_it_can_work() {
        use BindMode::*;
        let cases = [
            (ZeroCopy::Auto, XdpMode::Auto, PreferZeroCopy),
            (ZeroCopy::Auto, XdpMode::Native, PreferZeroCopy),
            (ZeroCopy::Auto, XdpMode::Generic, Copy),
            (ZeroCopy::On, XdpMode::Native, RequireZeroCopy),
            (ZeroCopy::On, XdpMode::Auto, RequireZeroCopy),
            (ZeroCopy::Off, XdpMode::Native, Copy),
            (ZeroCopy::Off, XdpMode::Generic, Copy),
        ];
        for (asked, xdp, want) in cases {
            assert_eq!(bind_mode(asked, xdp).unwrap(), want, "{asked:?} {xdp:?}");
        }
        assert!(usage(bind_mode(ZeroCopy::On, XdpMode::Generic)).contains("zero-copy needs the driver's native XDP"));
        assert!(PreferZeroCopy.tries_zero_copy() && RequireZeroCopy.tries_zero_copy() && !Copy.tries_zero_copy());
    }

    #[test]
    fn only_auto_falls_back_only_on_the_first_queue_only_for_a_driver_without_zero_copy() {
        use BindMode::*;
        let no_zc = OpenError { port: 1, cause: "Operation not supported".into(), errno: Some(libc::EOPNOTSUPP) };
        let other = OpenError { port: 1, cause: "Device or resource busy".into(), errno: Some(libc::EBUSY) };
        assert!(PreferZeroCopy.falls_back(0, &no_zc));
        assert!(!PreferZeroCopy.falls_back(1, &no_zc), "later queues follow the first");
        assert!(!PreferZeroCopy.falls_back(0, &other));
        assert!(!RequireZeroCopy.falls_back(0, &no_zc), "forced: refused instead");
        // The refusal names the port and the fix; other failures are told as they are.
        let ports = ["eth4".to_owned(), "eth5".to_owned()];
        let forced = socket_error(&ports, 0, true, &no_zc).to_string();
        assert_eq!(
            forced,
            "eth5: cannot bind an AF_XDP socket on queue 0: Operation not supported; the driver has no AF_XDP zero-copy: use --zero-copy auto or off"
        );
        let busy = socket_error(&ports, 3, false, &other).to_string();
        assert!(
            busy.starts_with(
                "eth5: cannot bind an AF_XDP socket on queue 3: Device or resource busy; another AF_XDP socket holds this queue"
            ) && busy.contains("stop it first"),
            "{busy}"
        );
        assert_eq!(
            fallback_warning("eth4"),
            "eth4: no AF_XDP zero-copy in its driver; every socket binds in copy mode"
        );
    }

    #[test]
    fn zero_copy_sockets_refuse_a_generic_attachment() {
        assert!(check_attached("eth4", XdpMode::Native, true).is_ok());
        assert!(check_attached("eth4", XdpMode::Generic, false).is_ok());
        let e = check_attached("eth4", XdpMode::Generic, true).unwrap_err();
        assert!(e.is_usage());
        assert!(e.to_string().starts_with("eth4: cannot take XDP: took XDP only in generic mode"), "{e}");
    }

    #[test]
    fn deferral_advice_is_given_when_either_setting_is_off() {
        assert_eq!(deferral_advice("eth4", "2", "200000"), None);
        assert_eq!(deferral_advice("eth4", "", ""), None, "unreadable settings are not advised on");
        for (irqs, flush) in [("0", "200000"), ("2", "0"), ("0", "0")] {
            let a = deferral_advice("eth4", irqs, flush).unwrap();
            assert!(
                a.starts_with("eth4: preferred busy polling keeps the driver's interrupts off only with deferral set")
            );
            assert!(a.contains("echo 2 > /sys/class/net/eth4/napi_defer_hard_irqs"), "{a}");
        }
    }

    #[test]
    fn the_router_needs_addresses_for_every_port_and_keeps_them_local() {
        let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let ports = [port("eth4", 1), port("eth5", 1)];
        let cfg = router(vec![vec![(a("198.18.10.2"), 24)]]);
        assert_eq!(usage(plan_new(&cfg, &ports, 2)), "every port needs its addresses");
        let cfg = router(vec![vec![(a("198.18.10.2"), 24), (a("198.18.11.1"), 31)], vec![(a("198.18.30.1"), 32)]]);
        let plan = plan_new(&cfg, &ports, 2).unwrap();
        let Role::Router(r) = &plan.role else { panic!("{:?}", plan.role) };
        assert_eq!(
            r.specs.iter().map(|s| (s.name.as_str(), s.addrs.len())).collect::<Vec<_>>(),
            [("eth4", 2), ("eth5", 1)]
        );
        assert_eq!(
            r.local,
            vec![
                (a("198.18.10.2").into(), LocalKind::Address),
                (a("198.18.10.255").into(), LocalKind::Broadcast),
                // A /31 and a /32 have no broadcast address.
                (a("198.18.11.1").into(), LocalKind::Address),
                (a("198.18.30.1").into(), LocalKind::Address),
            ]
        );
    }

    #[test]
    fn ipv6_addresses_are_local_and_the_link_local_is_the_kernels_unless_configured() {
        let a6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();
        let mut ports = [port("eth4", 1), port("eth5", 1)];
        ports[0].link_local = Some(a6("fe80::4"));
        ports[1].link_local = Some(a6("fe80::5"));
        let mut cfg = router(vec![vec![], vec![]]);
        let Mode::Router(setup) = &mut cfg.mode else { unreachable!() };
        setup.addresses6 = vec![vec![(a6("2001:2:0:30::1"), 64)], vec![(a6("2001:2:0:10::2"), 64)]];
        setup.link_locals = vec![None, Some(a6("fe80::55"))];
        let plan = plan_new(&cfg, &ports, 2).unwrap();
        let Role::Router(r) = &plan.role else { panic!("{:?}", plan.role) };
        assert_eq!(
            r.local,
            vec![(a6("2001:2:0:30::1").into(), LocalKind::Address), (a6("2001:2:0:10::2").into(), LocalKind::Address)]
        );
        assert_eq!(
            r.specs.iter().map(|s| s.link_local).collect::<Vec<_>>(),
            [Some(a6("fe80::4")), Some(a6("fe80::55"))]
        );
        assert_eq!(r.specs[1].addrs6, [(a6("2001:2:0:10::2"), 64)]);
        ports[0].mtu = 1279;
        assert!(usage(plan_new(&cfg, &ports, 2)).starts_with("eth4: MTU 1279 is below IPv6's minimum of 1280"));
    }
}
