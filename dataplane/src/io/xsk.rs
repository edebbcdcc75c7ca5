//! Creating one worker's UMEM and its AF_XDP sockets (one per port, same queue id).

use std::ffi::CString;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use xsk_rs::config::{BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

use crate::wire::ethernet;

/// Bytes per UMEM frame (one page half: the kernel's default, and a power of two as required).
pub const FRAME_SIZE: u32 = 2048;
/// Descriptors per ring (RX, TX, fill, completion).
pub const RING_SIZE: u32 = 2048;
/// Headroom the kernel keeps in front of each frame in copy mode (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// Room for the Ethernet header and one VLAN tag on top of the MTU.
pub const L2_OVERHEAD: u32 = (ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN) as u32;
/// The largest port MTU whose frames fit a UMEM frame.
pub const MAX_MTU: u32 = FRAME_SIZE - XDP_HEADROOM - L2_OVERHEAD;

/// One port's four rings on one queue.
#[derive(Debug)]
pub struct PortRings {
    /// Received frames.
    pub rx: RxQueue,
    /// Frames to send.
    pub tx: TxQueue,
    /// Free frames handed to the kernel for receiving.
    pub fill: FillQueue,
    /// Sent frames handed back.
    pub comp: CompQueue,
    /// The socket's fd (for kicks, poll and statistics).
    pub fd: RawFd,
}

/// A worker's UMEM, its frames and one socket per port.
#[derive(Debug)]
pub struct QueueSockets {
    /// The shared UMEM.
    pub umem: Umem,
    /// Every frame of it, all free.
    pub frames: Vec<FrameDesc>,
    /// Per port, in port order.
    pub ports: Vec<PortRings>,
    /// Whether every socket took the preferred-busy-polling options.
    pub busy_poll: bool,
}

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

/// `setsockopt(fd, level, name, &value)` for an int-sized value.
fn set_opt<T: Copy>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: T) -> std::io::Result<()> {
    // SAFETY: `value` is a live, initialised T and its exact size is passed.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Creates the UMEM and binds a socket on `queue` of each port in `ports` (in order). Options
/// that only tune (busy polling, TX budget) and that the kernel refuses are reported in the
/// returned notes rather than failing the start.
pub fn open(
    ports: &[String],
    queue: u32,
    frames_per_port: u32,
    opts: BindOptions,
) -> Result<(QueueSockets, Vec<String>), OpenError> {
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(FRAME_SIZE).map_err(|e| OpenError::new(0, e.to_string()))?)
        .fill_queue_size(QueueSize::new(RING_SIZE).map_err(|e| OpenError::new(0, e.to_string()))?)
        .comp_queue_size(QueueSize::new(RING_SIZE).map_err(|e| OpenError::new(0, e.to_string()))?)
        .build()
        .map_err(|e| OpenError::new(0, e.to_string()))?;
    let count = NonZeroU32::new(frames_per_port * ports.len() as u32).ok_or_else(|| OpenError::new(0, "no ports"))?;
    let (umem, frames) = Umem::new(umem_cfg, count, opts.huge_pages).map_err(|e| {
        let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
        let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
        let kib = u64::from(count.get()) * u64::from(FRAME_SIZE) / 1024;
        let fix = if opts.huge_pages {
            format!(
                "--huge-pages needs {} free 2 MiB huge pages per worker (see HugePages_Free in /proc/meminfo; \
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
        .rx_queue_size(QueueSize::new(RING_SIZE).map_err(|e| OpenError::new(0, e.to_string()))?)
        .tx_queue_size(QueueSize::new(RING_SIZE).map_err(|e| OpenError::new(0, e.to_string()))?)
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        // A shared UMEM has one mode for all its sockets.
        .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP | mode)
        .build();
    let mut notes = Vec::new();
    let mut busy_poll = opts.busy_poll_budget.is_some();
    let mut rings = Vec::with_capacity(ports.len());
    for (i, name) in ports.iter().enumerate() {
        let ifname = Interface::new(CString::new(name.as_str()).map_err(|e| OpenError::new(i, e.to_string()))?);
        let started = Instant::now();
        let (tx, rx, fq_cq) = loop {
            // SAFETY: the socket is bound with INHIBIT_PROG_LOAD (xsk-rs's shared-UMEM rule),
            // each (port, queue) pair is bound once from this UMEM, and `umem` outlives the
            // queues (they hold clones of it).
            match unsafe { Socket::new(sock_cfg, &umem, &ifname, queue) } {
                Ok(q) => break q,
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
        };
        let (fill, comp) = fq_cq.ok_or_else(|| OpenError::new(i, "the kernel gave no fill/completion rings"))?;
        let fd = rx.fd().as_raw_fd();
        if let Some(budget) = opts.busy_poll_budget {
            let set = set_opt(fd, libc::SOL_SOCKET, libc::SO_PREFER_BUSY_POLL, 1 as libc::c_int)
                .and_then(|()| set_opt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, 20 as libc::c_int))
                .and_then(|()| set_opt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL_BUDGET, libc::c_int::from(budget)));
            if let Err(e) = set {
                busy_poll = false;
                notes.push(format!("{name}: preferred busy polling refused ({e}); busy mode polls the rings only"));
            }
        }
        if let (Some(budget), false) = (opts.tx_budget, opts.zero_copy) {
            if let Err(e) = set_opt(fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, budget.clamp(32, RING_SIZE) as libc::c_uint) {
                notes.push(format!("{name}: TX budget per kick left at the kernel's 32 ({e})"));
            }
        }
        rings.push(PortRings { rx, tx, fill, comp, fd });
    }
    Ok((QueueSockets { umem, frames, ports: rings, busy_poll }, notes))
}
