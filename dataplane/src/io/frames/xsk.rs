//! Creating a UMEM and its workers' AF_XDP sockets: per worker one socket per port, all bound to
//! one queue id, with each port's fill and completion rings shared by the workers ([`Pool`]).
//! The per-queue layout has one UMEM per worker for all ports; the per-CPU layout one UMEM per
//! port for all workers ([`open`] says why).

use std::ffi::CString;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xsk_rs::config::{BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{CompQueue, FillQueue, RxQueue, Socket, TxQueue, Umem};

use super::ring::{AfXdp, PortRings, Xsk};
use crate::stats::PoolGauges;
use crate::wire::ethernet;

/// Bytes per UMEM frame (one page half: the kernel's default, and a power of two as required).
pub const FRAME_SIZE: u32 = 2048;
/// Descriptors per ring (RX, TX, fill, completion) unless set otherwise ([`RingSizes`]).
///
/// Chosen by measurement on the rig (router, 1 queue, release build, 5 runs of 8 s per arm,
/// arms alternating, all four rings the same size): 4 TCP flows gave 1.84, 1.72, 1.87 and 1.89
/// Gb/s (medians) with rings of 2048, 1024, 512 and 256; 64-byte frames flat out 160.3, 160.5,
/// 170.6 and 168.0 kpps, no difference proven by Student's t — but with rings of 256, 0.11 % of
/// the frames were lost and 14 % of the pings beside them went unanswered (none with 512 or
/// more). 512 is the smallest that kept the throughput. On a NIC at line rate a ring absorbs
/// less time (512 frames are 34 µs of 64-byte frames at 10G): measure there with the options.
pub const RING_SIZE: u32 = 512;

/// Descriptors in each of a socket's rings (`--rx-ring`, `--tx-ring`, `--fill-ring`,
/// `--completion-ring`): each a power of two from [`RingSizes::MIN`] to [`RingSizes::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSizes {
    /// Received frames waiting for the worker.
    pub rx: u32,
    /// Frames given to the kernel to send.
    pub tx: u32,
    /// Free frames given to the kernel to receive into.
    pub fill: u32,
    /// Sent frames the kernel gives back.
    pub completion: u32,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes { rx: RING_SIZE, tx: RING_SIZE, fill: RING_SIZE, completion: RING_SIZE }
    }
}

impl RingSizes {
    /// The smallest ring: one batch of the worker's.
    pub const MIN: u32 = 64;
    /// The largest ring: the frames a port brings to a UMEM.
    pub const MAX: u32 = 4096;

    /// The first ring whose size is not a power of two within bounds, as `(option, size)`.
    pub fn invalid(&self) -> Option<(&'static str, u32)> {
        [
            ("--rx-ring", self.rx),
            ("--tx-ring", self.tx),
            ("--fill-ring", self.fill),
            ("--completion-ring", self.completion),
        ]
        .into_iter()
        .find(|&(_, n)| !n.is_power_of_two() || !(Self::MIN..=Self::MAX).contains(&n))
    }
}
/// Headroom the kernel keeps in front of each frame in copy mode (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// Room for the Ethernet header and one VLAN tag on top of the MTU.
pub const L2_OVERHEAD: u32 = (ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN) as u32;
/// The largest port MTU whose frames fit a UMEM frame.
pub const MAX_MTU: u32 = FRAME_SIZE - XDP_HEADROOM - L2_OVERHEAD;

/// One (port, queue)'s fill and completion rings. The kernel keeps one pair per (device,
/// queue, UMEM) and every socket bound there shares it (`XDP_SHARED_UMEM`), so the workers
/// whose sockets are bound there share it too, under a lock of their own.
#[derive(Debug)]
pub struct FrameRings<X: Xsk = AfXdp> {
    /// Free frames handed to the kernel for receiving.
    pub fill: X::Fill,
    /// Sent frames handed back.
    pub comp: X::Comp,
}

/// Frames the kernel holds through one port's shared rings, counted by every member (atomic
/// read-modify-write): what refills and reaps go by. Each count is raised before the kernel
/// can see the frames and lowered after a member took them back, so it never falls below what
/// the kernel holds. (The accounting that must add up is each member's own, [`PoolGauges`].)
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct InFlight {
    /// Handed over through the fill ring, not yet taken off any member's RX ring.
    pub fill: AtomicI64,
    /// Put on a member's TX ring, not yet reaped from the completion ring.
    pub tx: AtomicI64,
}

/// What the workers of one UMEM share: each port's fill and completion rings, and where the
/// frames are ([`PoolGauges`]).
#[derive(Debug)]
pub struct Pool<X: Xsk = AfXdp> {
    /// Per port, in port order. Uncontended in the per-queue layout (one member).
    pub rings: Box<[Mutex<FrameRings<X>>]>,
    /// Per port, in port order.
    pub in_flight: Box<[InFlight]>,
    /// Free frames no member holds: where a member with more than [`Pool::spill`] puts the
    /// rest, and where one short of frames finds some (room for every frame, from the start).
    pub spare: Mutex<Vec<X::Desc>>,
    /// How many frames `spare` holds, set under its lock: lets a member skip the lock when
    /// there is nothing to take.
    pub spare_len: AtomicUsize,
    /// The frame accounting, which the live view reads too.
    pub gauges: Arc<PoolGauges>,
    /// Frames each port's fill ring is kept topped up to: half the frames, over the ports.
    pub fill_target: u32,
    /// Most free frames a member keeps. A member's completions are often another's frames
    /// (they share the completion ring), so without this one member's free list would fill
    /// while another's ran dry; unbounded where the pool has one member.
    pub spill: usize,
    /// The sizes of its sockets' rings.
    pub sizes: RingSizes,
}

impl<X: Xsk> Pool<X> {
    /// The pool of a UMEM whose `frames` are shared by `workers` (by queue number) over
    /// `ports`, whose fill and completion rings are `rings` (in port order): the pool, and each
    /// member's share of the frames. One member holds every frame; several start with half a
    /// spill mark each, the rest spare (a member's share only ever leaves it through the spare
    /// list). Each port's fill ring is kept topped up to half its share of the frames, so that
    /// the rest is left for frames in flight to TX.
    pub fn share_out(
        rings: Vec<FrameRings<X>>,
        mut frames: Vec<X::Desc>,
        workers: &[u32],
        ports: &[String],
        sizes: RingSizes,
    ) -> (Arc<Pool<X>>, Vec<Vec<X::Desc>>) {
        let count = frames.len() as u32;
        let fill_target = (count / ports.len().max(1) as u32 / 2).min(sizes.fill);
        let (spill, share) = if workers.len() > 1 { (SPILL, SPILL / 2) } else { (usize::MAX, frames.len()) };
        let mut spare = Vec::with_capacity(frames.len());
        spare.extend(frames.drain((share * workers.len()).min(frames.len())..));
        let gauges = Arc::new(PoolGauges::new(workers.to_vec(), ports.to_vec(), u64::from(count), spare.len() as u64));
        let pool = Arc::new(Pool {
            rings: rings.into_iter().map(Mutex::new).collect(),
            in_flight: ports.iter().map(|_| InFlight::default()).collect(),
            spare_len: AtomicUsize::new(spare.len()),
            spare: Mutex::new(spare),
            gauges,
            fill_target,
            spill,
            sizes,
        });
        let shares = workers
            .iter()
            .map(|_| {
                let rest = frames.split_off(frames.len().min(share));
                std::mem::replace(&mut frames, rest)
            })
            .collect();
        (pool, shares)
    }
}

/// One worker's part of one UMEM: its share of the frames and the pool it shares.
#[derive(Debug)]
pub struct PoolShare<X: Xsk = AfXdp> {
    /// The UMEM (a handle on the one every member uses).
    pub umem: X::Umem,
    /// This worker's share of the frames, all free.
    pub frames: Vec<X::Desc>,
    /// The shared rings and accounting.
    pub pool: Arc<Pool<X>>,
    /// This worker's index among the pool's members.
    pub member: usize,
}

/// One worker's sockets (one per port) and its part of each UMEM they are bound with: one
/// UMEM for every port (per-queue layout), or one per port (per-CPU layout).
#[derive(Debug)]
pub struct QueueSockets<X: Xsk = AfXdp> {
    /// The UMEMs.
    pub pools: Vec<PoolShare<X>>,
    /// Per port, in port order.
    pub ports: Vec<PortRings<X>>,
    /// Whether every socket took the preferred-busy-polling options.
    pub busy_poll: bool,
}

impl<X: Xsk> QueueSockets<X> {
    /// One worker's sockets made port by port ([`open`] over one port each), as one: the
    /// ports in the order given, each on its own UMEM.
    pub fn join(parts: Vec<QueueSockets<X>>) -> QueueSockets<X> {
        let mut all = QueueSockets { pools: Vec::new(), ports: Vec::new(), busy_poll: true };
        for part in parts {
            let base = all.pools.len();
            all.busy_poll &= part.busy_poll;
            all.ports.extend(part.ports.into_iter().map(|r| PortRings { pool: base + r.pool, ..r }));
            all.pools.extend(part.pools);
        }
        all
    }
}

/// Free frames a member of a shared pool keeps ([`Pool::spill`]): a few batches for every port,
/// enough for a round's copies and a refill without a trip to the spare list.
pub const SPILL: usize = 512;

/// How long to retry a bind that finds the queue busy: the kernel releases a dead process's
/// sockets in the background, so a restart right after a crash can race it.
const BUSY_RETRY: Duration = Duration::from_secs(2);

/// How one worker's UMEM and sockets are made (default: copy mode, nothing tuned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BindOptions {
    /// Bind in zero-copy mode (`XDP_ZEROCOPY`) rather than copy mode (`XDP_COPY`).
    pub zero_copy: bool,
    /// Back the UMEM with huge pages (`MAP_HUGETLB`; the system must have some reserved).
    pub huge_pages: bool,
    /// Prefer busy polling on the sockets (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`,
    /// `SO_BUSY_POLL_BUDGET` = this many frames); `None`: the kernel's interrupt-driven default.
    pub busy_poll_budget: Option<u16>,
    /// Copy mode: frames one TX kick may send (`XDP_MAX_TX_SKB_BUDGET`, 32 up to the ring size;
    /// kernels before 6.17 keep their 32 and say so in the notes); `None`: leave the default.
    pub tx_budget: Option<u32>,
    /// Copy mode: each socket's send buffer in bytes (`SO_SNDBUFFORCE`, else `SO_SNDBUF` capped
    /// by net.core.wmem_max, said in the notes); `None`: the kernel's default.
    pub sndbuf: Option<u32>,
    /// The sockets' ring sizes.
    pub rings: RingSizes,
}

/// Why a worker's sockets could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError {
    /// Index of the port that failed (0 for the UMEM).
    pub port: usize,
    /// What the kernel said, with the fix where there is one.
    pub cause: String,
    /// The errno, when there was one.
    pub errno: Option<i32>,
}

impl OpenError {
    fn new(port: usize, cause: impl Into<String>) -> OpenError {
        OpenError { port, cause: cause.into(), errno: None }
    }

    /// Whether the driver lacks zero-copy support (the bind would work in copy mode).
    pub fn no_zero_copy(&self) -> bool {
        // EINVAL too: some drivers answer that from ndo_bpf; a real configuration error fails
        // the copy-mode retry the same way and is reported then.
        matches!(self.errno, Some(libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::EINVAL))
    }
}

const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
const SOL_XDP: libc::c_int = 283;

/// Creates one UMEM for `workers` (by queue number) and binds, for each of them, a socket on
/// `queue` of each port in `ports` (in order). One worker over every port is the per-queue
/// layout. Several workers share each port's fill and completion rings; the kernel lets a
/// socket share them only when it binds through a socket of the same (port, queue), and
/// libxdp binds every socket through the UMEM's first, so several workers need one port per
/// UMEM (the per-CPU layout opens one per port and [`QueueSockets::join`]s them). Options that only tune (busy polling, TX budget) and
/// that the kernel refuses are reported in the returned notes rather than failing the start.
pub fn open(
    ports: &[String],
    queue: u32,
    workers: &[u32],
    frames_per_port: u32,
    opts: BindOptions,
) -> Result<(Vec<QueueSockets>, Vec<String>), OpenError> {
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(FRAME_SIZE).map_err(|e| OpenError::new(0, e.to_string()))?)
        .fill_queue_size(QueueSize::new(opts.rings.fill).map_err(|e| OpenError::new(0, e.to_string()))?)
        .comp_queue_size(QueueSize::new(opts.rings.completion).map_err(|e| OpenError::new(0, e.to_string()))?)
        .build()
        .map_err(|e| OpenError::new(0, e.to_string()))?;
    let per_worker = frames_per_port * ports.len() as u32;
    let count = NonZeroU32::new(per_worker * workers.len() as u32).ok_or_else(|| OpenError::new(0, "no ports"))?;
    let (umem, frames) = Umem::new(umem_cfg, count, opts.huge_pages).map_err(|e| {
        let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
        let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
        let kib = u64::from(count.get()) * u64::from(FRAME_SIZE) / 1024;
        let fix = if opts.huge_pages {
            format!(
                "--huge-pages needs {} free 2 MiB huge pages for it (see HugePages_Free in /proc/meminfo; \
                 reserve them with sysctl vm.nr_hugepages), or leave --huge-pages off",
                kib.div_ceil(2048)
            )
        } else {
            format!("it needs CAP_NET_RAW, and CAP_IPC_LOCK or a locked-memory limit (ulimit -l) above {kib} KiB")
        };
        OpenError {
            port: 0,
            cause: format!("creating the UMEM ({kib} KiB): {cause}; {fix}"),
            errno: io.and_then(std::io::Error::raw_os_error),
        }
    })?;
    let mode = if opts.zero_copy { BindFlags::XDP_ZEROCOPY } else { BindFlags::XDP_COPY };
    let sock_cfg = SocketConfig::builder()
        .rx_queue_size(QueueSize::new(opts.rings.rx).map_err(|e| OpenError::new(0, e.to_string()))?)
        .tx_queue_size(QueueSize::new(opts.rings.tx).map_err(|e| OpenError::new(0, e.to_string()))?)
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        // A shared UMEM has one mode for all its sockets.
        .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP | mode)
        .build();
    let mut notes = Vec::new();
    let mut busy_poll = opts.busy_poll_budget.is_some();
    let mut shared: Vec<Option<FrameRings>> = ports.iter().map(|_| None).collect();
    if workers.len() > 1 && ports.len() > 1 {
        return Err(OpenError::new(1, "workers sharing a queue need a UMEM per port"));
    }
    let mut members = Vec::with_capacity(workers.len());
    for _ in workers {
        let mut rings = Vec::with_capacity(ports.len());
        for (i, name) in ports.iter().enumerate() {
            let (rx, tx, fq_cq) = bind(sock_cfg, &umem, i, name, queue)?;
            match (fq_cq, shared[i].is_some()) {
                (Some((fill, comp)), false) => shared[i] = Some(FrameRings { fill, comp }),
                // A later socket on the same (port, queue) uses the first one's rings.
                (None, true) => {}
                (Some(_), true) => {
                    return Err(OpenError::new(i, "the kernel gave a second socket on this queue rings of its own"))
                }
                (None, false) => return Err(OpenError::new(i, "the kernel gave no fill/completion rings")),
            }
            let fd = rx.fd().as_raw_fd();
            tune(fd, name, opts, &mut busy_poll, &mut notes);
            rings.push(PortRings { rx, tx, fd, pool: 0, ring: i });
        }
        members.push(rings);
    }
    let rings: Vec<FrameRings> = shared.into_iter().flatten().collect();
    let (pool, shares) = Pool::share_out(rings, frames, workers, ports, opts.rings);
    let out = members
        .into_iter()
        .zip(shares)
        .enumerate()
        .map(|(member, (rings, mine))| QueueSockets {
            pools: vec![PoolShare { umem: umem.clone(), frames: mine, pool: Arc::clone(&pool), member }],
            ports: rings,
            busy_poll,
        })
        .collect();
    Ok((out, notes))
}

/// The fill and completion rings a socket gets when it is the first on its (port, queue).
type NewRings = Option<(FillQueue, CompQueue)>;

/// Binds a socket on `queue` of port `i` (`name`) from `umem`, retrying while the queue is busy.
fn bind(
    sock_cfg: SocketConfig,
    umem: &Umem,
    i: usize,
    name: &str,
    queue: u32,
) -> Result<(RxQueue, TxQueue, NewRings), OpenError> {
    let ifname = Interface::new(CString::new(name).map_err(|e| OpenError::new(i, e.to_string()))?);
    let started = Instant::now();
    loop {
        // SAFETY: the socket is bound with INHIBIT_PROG_LOAD (xsk-rs's shared-UMEM rule), and
        // `umem` outlives the queues (they hold clones of it).
        let r: Result<(TxQueue, RxQueue, NewRings), _> = unsafe { Socket::new(sock_cfg, umem, &ifname, queue) };
        match r {
            Ok((tx, rx, fq_cq)) => return Ok((rx, tx, fq_cq)),
            Err(e) => {
                let text = format!("{e}");
                let errno = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<std::io::Error>())
                    .and_then(std::io::Error::raw_os_error);
                if errno == Some(libc::EBUSY) && started.elapsed() < BUSY_RETRY {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                let cause = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or(text);
                return Err(OpenError { port: i, cause, errno });
            }
        }
    }
}

/// Sets the tuning options on socket `fd` of port `name`; what the kernel refuses is noted.
fn tune(fd: RawFd, name: &str, opts: BindOptions, busy_poll: &mut bool, notes: &mut Vec<String>) {
    if let Some(budget) = opts.busy_poll_budget {
        let set = crate::sys::set_opt(fd, libc::SOL_SOCKET, libc::SO_PREFER_BUSY_POLL, 1 as libc::c_int)
            .and_then(|()| crate::sys::set_opt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, 20 as libc::c_int))
            .and_then(|()| {
                crate::sys::set_opt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL_BUDGET, libc::c_int::from(budget))
            });
        if let Err(e) = set {
            *busy_poll = false;
            let note = format!("{name}: preferred busy polling refused ({e}); busy mode polls the rings only");
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    if let (Some(bytes), false) = (opts.sndbuf, opts.zero_copy) {
        // The kernel doubles what it is given (its bookkeeping overhead): half is asked for.
        let half = (bytes / 2) as libc::c_int;
        if let Err(e) = crate::sys::set_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, half) {
            let capped = crate::sys::set_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, half).is_ok();
            let note = format!(
                "{name}: send buffer of {bytes} bytes refused ({e}){}",
                if capped { "; set as far as net.core.wmem_max allows" } else { "; left at the kernel's" }
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    if let (Some(budget), false) = (opts.tx_budget, opts.zero_copy) {
        if let Err(e) =
            crate::sys::set_opt(fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, budget.clamp(32, opts.rings.tx) as libc::c_uint)
        {
            let note = format!("{name}: TX budget per kick left at the kernel's 32 ({e})");
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
}
