//! I/O on the frames' way: the XDP program, the AF_XDP sockets and the workers that move frames
//! between them, start-up. (The threads that resolve next hops and follow the kernel's routes
//! are in [`crate::resolve`] and [`crate::routes`].)
//!
//! # Rooms
//!
//! - [`frames`]: where frames go — the UMEMs and sockets ([`frames::xsk`]), the ring boundary
//!   all a worker needs of AF_XDP as one trait ([`frames::ring`]: xsk-rs's sockets behind it
//!   in a run, an in-memory kernel in tests), and the workers ([`frames::worker`]: one per
//!   queue or CPU, RX rings → decision ([`crate::l2`], [`crate::l3`]) → TX rings, counting every
//!   outcome in its [`crate::stats::QueueCounters`]). Frames whose next hop is unresolved go to
//!   the resolver thread ([`crate::resolve`]).
//! - [`program`]: the XDP program — loading and attaching `bpf/xfwd.bpf.c` and its maps
//!   ([`program::xdp`]), the XDP path's maps kept in step with the workers' tables
//!   ([`program::fast`]), what a port's driver can do with XDP as the kernel says
//!   ([`program::netdev`]).
//! - [`setup`]: what to start and start-up — the request and why a start failed
//!   ([`setup::config`]), every worker option declared once ([`setup::settings`]) and the values
//!   of its modes ([`setup::options`]), the ports found in sysfs ([`setup::port`]) and the known
//!   drivers' quirks ([`setup::drivers`]), start-up as a pure plan then steps ([`setup::start`]),
//!   how the large tables are backed ([`setup::memory`]).
//! - the running forwarder, here: [`forwarder`] (reload, stop), [`supervise`] (the control
//!   thread's watch: ports' link, MAC and MTU followed, the counters' warnings), [`view`] (what
//!   the stats printer and the control socket read), [`listing`] (the tables as records, what
//!   `xfwd show` answers).
//! - [`probe`]: the bench's and doctor's instruments, BPF programs beside the frames' way —
//!   the kernel's time in NAPI polls ([`probe::poll_time`]), a frame generator handing frames
//!   to XDP as a NIC would ([`probe::frame_gen`]), `bpf_fib_lookup` timed on the kernel's
//!   table ([`probe::fib_lookup`]), frames a driver refused ([`probe::refused`]). They live in
//!   the library because `dataplane/build.rs` builds every BPF object.
//!
//! # Shape
//!
//! One worker thread per queue id, pinned to its own core. In the **per-queue layout**
//! ([`setup::start::plan::Layout::PerQueue`]) worker *q* owns one UMEM and, for every port, the AF_XDP
//! socket bound to (port, *q*), all sharing that UMEM: a frame received on one port leaves by
//! another's TX ring as the same descriptor, never copied (a flood makes one copy per extra
//! egress port). One UMEM per worker, not one for all, keeps every ring single-producer,
//! single-consumer; each port's fill and completion rings sit behind a lock that only their
//! worker ever takes.
//!
//! In the **per-CPU layout** ([`setup::start::plan::Layout::PerCpu`]), for drivers that give every
//! frame queue 0 from every CPU (generic XDP on veth and `dpaa_eth`), every worker binds queue
//! 0 of every port and the XDP program picks the socket by the CPU the frame arrived on. The
//! kernel keeps one fill and one completion ring per (device, queue, UMEM), so the workers
//! share each port's pair under that lock ([`frames::xsk::Pool`]); a worker that finds it taken leaves
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

pub mod forwarder;
pub mod frames;
pub mod listing;
pub mod probe;
pub mod program;
pub mod setup;
pub mod supervise;
pub mod view;

pub use crate::l3::tables::RouterLimits;
pub use forwarder::{frame_max, Forwarder};
pub use program::xdp::XdpCounter;
pub use setup::config::{FibSource, ForwarderConfig, Mode, Request, RouterSetup, StartError};
pub use setup::options::{AqmMode, DataPath, PollMode, RtPriority, Sockets, XdpMode, ZeroCopy};
pub use setup::port::{PortError, PortErrorKind, PortInfo};
pub use view::{LiveView, PortReport, Report, RouterView};
