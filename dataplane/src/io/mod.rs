//! I/O on the frames' way: the XDP program, the AF_XDP sockets and the workers that move frames
//! between them, start-up. (The threads that resolve next hops and follow the kernel's routes
//! are in [`crate::resolve`] and [`crate::routes`].)
//!
//! # Modules
//!
//! Where frames go:
//! - [`xdp`]: loads and attaches `bpf/xfwd.bpf.c`, which redirects each frame to the AF_XDP
//!   socket of its (port, queue) or hands it to the kernel, and counts what it does;
//! - [`xsk`]: the UMEMs and the workers' sockets, one per port each;
//! - [`ring`]: the ring boundary, all a worker needs of AF_XDP as one trait: xsk-rs's sockets
//!   behind it in a run, an in-memory kernel in tests;
//! - [`worker`]: one per queue (or CPU): RX rings → decision ([`crate::l2`], [`crate::l3`]) → TX rings,
//!   counting every outcome in its [`crate::stats::QueueCounters`] (a folder: the round, receive,
//!   transmit, frames, queue management, the real-time step-down);
//! - frames whose next hop is unresolved go to the resolver thread ([`crate::resolve`]);
//! - [`view`]: what the stats printer and the control socket read: counters, tables, reports.
//!
//! Starting and running:
//! - [`config`]: what to start, and why a start failed;
//! - [`settings`]: every worker option declared once (default, flag, router.toml key), merged
//!   defaults < file < flags and checked once; [`options`]: the values of its modes (poll, XDP
//!   and zero-copy mode, socket layout, queue management);
//! - [`port`]: the ports, found and checked in sysfs;
//! - [`start`]: start-up as a pure plan ([`start::plan`], tested without root), then steps;
//! - [`forwarder`]: the running forwarder: reload, stop; [`supervise`]: watching it from the
//!   control thread (the ports' link, MAC and MTU followed; what the counters say to warn of);
//! - [`memory`]: how the decision layer's large tables are backed (huge pages).
//! - [`netdev`]: what a port's driver can do with XDP, as the kernel says (`--path xdp`, doctor);
//! - [`fast`]: the XDP path's maps kept in step with the workers' tables (`--path xdp`);
//! - [`poll_time`]: the kernel's time in chosen ports' NAPI polls (the bench's direct measure
//!   of the box's own cost per frame); [`frame_gen`]: the bench's frame generator, frames sent
//!   as a NIC hands them to XDP.
//!
//! # Shape
//!
//! One worker thread per queue id, pinned to its own core. In the **per-queue layout**
//! ([`start::plan::Layout::PerQueue`]) worker *q* owns one UMEM and, for every port, the AF_XDP
//! socket bound to (port, *q*), all sharing that UMEM: a frame received on one port leaves by
//! another's TX ring as the same descriptor, never copied (a flood makes one copy per extra
//! egress port). One UMEM per worker, not one for all, keeps every ring single-producer,
//! single-consumer; each port's fill and completion rings sit behind a lock that only their
//! worker ever takes.
//!
//! In the **per-CPU layout** ([`start::plan::Layout::PerCpu`]), for drivers that give every
//! frame queue 0 from every CPU (generic XDP on veth and `dpaa_eth`), every worker binds queue
//! 0 of every port and the XDP program picks the socket by the CPU the frame arrived on. The
//! kernel keeps one fill and one completion ring per (device, queue, UMEM), so the workers
//! share each port's pair under that lock ([`xsk::Pool`]); a worker that finds it taken leaves
//! the work to the holder. Each port has a UMEM of its own (the kernel shares a queue's rings
//! only with a socket bound through a socket of that queue, and libxdp binds through a UMEM's
//! first socket), so a frame forwarded to another port is copied once into that port's UMEM.
//!
//! # Frame ownership
//!
//! Every UMEM frame is, at every moment, in exactly one place, and only that place touches it:
//! a port's **fill ring** (kernel may write it), an **RX ring** of that port (received, kernel
//! done), a **worker** (between RX and TX, or while copying), a **TX ring** (kernel may read
//! it), the port's **completion ring** (kernel done), a worker's **free list**, or a shared
//! pool's **spare list**. Workers move descriptors between those places and nowhere else, and
//! count what they hand to the kernel, so `free + in fill rings + in TX/completion rings =
//! total` for each UMEM between batches ([`crate::stats::PoolGauges`]). Every `unsafe` ring or
//! UMEM access in this module relies on that rule: a descriptor is used only while its worker
//! holds it.

pub mod config;
pub mod drivers;
pub mod fast;
pub mod fib_lookup;
pub mod forwarder;
pub mod frame_gen;
pub mod memory;
pub mod netdev;
pub mod options;
pub mod poll_time;
pub mod port;
pub mod refused;
pub mod ring;
pub mod settings;
pub mod start;
pub mod supervise;
pub mod view;
pub mod worker;
pub mod xdp;
pub mod xsk;

pub use crate::l3::tables::RouterLimits;
pub use config::{FibSource, ForwarderConfig, Mode, Request, RouterSetup, StartError};
pub use forwarder::{frame_max, Forwarder};
pub use options::{AqmMode, DataPath, PollMode, RtPriority, Sockets, XdpMode, ZeroCopy};
pub use port::{PortError, PortErrorKind, PortInfo};
pub use view::{LiveView, PortReport, Report, RouterView};
pub use xdp::XdpCounter;
