//! Creating one worker's UMEM and its AF_XDP sockets (one per port, same queue id).

use std::ffi::CString;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use xsk_rs::config::{BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

/// Bytes per UMEM frame (one page half: the kernel's default, and a power of two as required).
pub const FRAME_SIZE: u32 = 2048;
/// Descriptors per ring (RX, TX, fill, completion).
pub const RING_SIZE: u32 = 2048;
/// Headroom the kernel keeps in front of each frame in copy mode (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// Room for the Ethernet header and one VLAN tag on top of the MTU.
pub const L2_OVERHEAD: u32 = 14 + 4;
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
}

/// How long to retry a bind that finds the queue busy: the kernel releases a dead process's
/// sockets in the background, so a restart right after a crash can race it.
const BUSY_RETRY: Duration = Duration::from_secs(2);

/// Creates the UMEM and binds a socket on `queue` of each port in `ports` (in order).
/// On error, returns the index of the port that failed and the kernel's reason.
pub fn open(ports: &[String], queue: u32, frames_per_port: u32) -> Result<QueueSockets, (usize, String)> {
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(FRAME_SIZE).map_err(|e| (0, e.to_string()))?)
        .fill_queue_size(QueueSize::new(RING_SIZE).map_err(|e| (0, e.to_string()))?)
        .comp_queue_size(QueueSize::new(RING_SIZE).map_err(|e| (0, e.to_string()))?)
        .build()
        .map_err(|e| (0, e.to_string()))?;
    let count = NonZeroU32::new(frames_per_port * ports.len() as u32).ok_or((0, "no ports".to_owned()))?;
    let (umem, frames) = Umem::new(umem_cfg, count, false).map_err(|e| {
        let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
        let kib = u64::from(count.get()) * u64::from(FRAME_SIZE) / 1024;
        (
            0,
            format!(
                "creating the UMEM ({kib} KiB): {cause}; it needs CAP_NET_RAW, and CAP_IPC_LOCK or a locked-memory \
                 limit (ulimit -l) above {kib} KiB"
            ),
        )
    })?;
    let sock_cfg = SocketConfig::builder()
        .rx_queue_size(QueueSize::new(RING_SIZE).map_err(|e| (0, e.to_string()))?)
        .tx_queue_size(QueueSize::new(RING_SIZE).map_err(|e| (0, e.to_string()))?)
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        // Copy mode: veth (the rig) has no zero-copy, and a shared UMEM has one mode for all.
        .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP | BindFlags::XDP_COPY)
        .build();
    let mut rings = Vec::with_capacity(ports.len());
    for (i, name) in ports.iter().enumerate() {
        let ifname = Interface::new(CString::new(name.as_str()).map_err(|e| (i, e.to_string()))?);
        let started = Instant::now();
        let (tx, rx, fq_cq) = loop {
            // SAFETY: the socket is bound with INHIBIT_PROG_LOAD (xsk-rs's shared-UMEM rule),
            // each (port, queue) pair is bound once from this UMEM, and `umem` outlives the
            // queues (they hold clones of it).
            match unsafe { Socket::new(sock_cfg, &umem, &ifname, queue) } {
                Ok(q) => break q,
                Err(e) => {
                    let text = format!("{e}");
                    let busy = std::error::Error::source(&e)
                        .and_then(|s| s.downcast_ref::<std::io::Error>())
                        .is_some_and(|io| io.raw_os_error() == Some(libc::EBUSY));
                    if busy && started.elapsed() < BUSY_RETRY {
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                    let cause = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or(text);
                    return Err((i, cause));
                }
            }
        };
        let (fill, comp) = fq_cq.ok_or((i, "the kernel gave no fill/completion rings".to_owned()))?;
        let fd = rx.fd().as_raw_fd();
        rings.push(PortRings { rx, tx, fill, comp, fd });
    }
    Ok(QueueSockets { umem, frames, ports: rings })
}
