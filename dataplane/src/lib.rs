//! xfwd's data plane.
//!
//! The modules are the layers a frame crosses, in order:
//!
//! - [`wire`]: zero-copy views of frame formats (what the bytes say);
//! - [`l2`]: the forwarding database and the bridge decision;
//! - [`l3`]: the FIBs, the neighbour tables, the router's tables and the router decision (what
//!   to do with a frame, as an [`Action`]): what the workers read;
//! - [`aqm`]: the queues between a frame's decision and its TX ring: CoDel, flow fair queueing,
//!   flow keys and ECN marking (pure code, clock passed in; the workers' `--aqm codel` and
//!   `fq-codel`);
//! - [`io`]: everything that needs the kernel on the frames' way: the XDP program's loader, the
//!   AF_XDP sockets, the per-queue workers that move frames between rings and call the
//!   decision, start-up and the live view;
//! - the control plane, off the packet path: [`routes`], where the router's routes come from
//!   (the file, or the kernel's, mirrored over rtnetlink) and how new tables reach the workers;
//!   [`resolve`], how next hops are resolved (ARP, neighbour discovery) and what happens to the
//!   frames that wait;
//! - [`stats`], [`load`] and [`reason`]: what every worker counts, where its time goes, and why a
//!   frame was dropped.
//!
//! A frame's way through them:
//!
//! - **enters**: the XDP program (`bpf/xfwd.bpf.c`, loaded by [`io::program::xdp`]) redirects it to the
//!   AF_XDP socket of its port and queue ([`io::frames::xsk`]); that queue's worker takes it off the RX
//!   ring ([`io::frames::worker`]);
//! - **is decided**: by [`l2::decide`] (bridge) or [`l3::decide`] (router), which the worker
//!   calls through [`io::frames::worker::Decide`]; a frame whose next hop is unresolved goes to the ARP
//!   thread ([`resolve`]), which sends it once it resolves;
//! - **leaves**: the worker puts it on the egress port's TX ring and kicks ([`io::frames::worker`]);
//! - **is counted**: in its worker's [`stats::QueueCounters`] on every path, drops by
//!   [`Reason`]; the XDP program and the ARP thread count their own; [`io::view`] reads them.
//!
//! Decision and table code (`wire`, `l2`, `l3`, `aqm`, and the pure parts of `routes` and
//! `resolve`) does no I/O, makes no system calls and
//! reads no clock (see [`time`]); it is tested without root. The decisions allocate nothing per
//! frame. What needs the kernel lives in `io` (the frames' way) and in the threads of `routes`
//! (`routes::kernel`, `routes::rtnl`: the kernel's routes over rtnetlink) and `resolve`
//! (`resolve::thread`: ARP and neighbour discovery on the wire).
//!
//! # Words
//!
//! Each of these means one thing in the code and its docs:
//!
//! - **port**: one of the interfaces xfwd forwards between, by its index ([`PortId`]);
//! - **queue**: a NIC's RX/TX queue id; `--queues` asks for that many workers, one per queue
//!   id (in the per-CPU layout, one per CPU, all bound to queue 0);
//! - **worker**: the thread that serves one queue id of every port ([`io::frames::worker`]);
//! - **UMEM**: the frame memory a worker's sockets share; **pool**: what the workers using one
//!   UMEM share (its fill and completion rings, the spare list, its accounting); **member**: a
//!   worker's part of a pool;
//! - **ring**: one of a socket's four descriptor rings (RX, TX, fill, completion), reached
//!   through [`io::frames::ring`]; **descriptor**: a frame's place and length on a ring;
//! - **batch**: the frames taken off one RX ring at once (at most 64); **round**: one pass of
//!   a worker over all its rings ([`io::frames::worker::Worker::run`]);
//! - **egress**: the port a frame leaves by (the worker's `out`), as **ingress** is the one it
//!   came in on;
//! - **decision**: the pure function from a frame to an [`Action`]; **drop**: an action with a
//!   [`Reason`], always counted;
//! - **glean**: a frame held while its next hop is resolved (the ARP/NDP thread sends it);
//! - **flow**: the frames of one 5-tuple (flow queues, `xfwd bench`'s flows); **moved**: what a
//!   worker handed to and took back from the kernel, per UMEM (its frame accounting).

// Production code: no function over 100 lines of code (clippy.toml); tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod action;
pub mod aqm;
pub mod io;
pub mod keyed;
pub mod l2;
pub mod l3;
pub mod load;
pub mod prefetch;
pub mod reason;
pub mod resolve;
pub mod routes;
pub mod stats;
mod sys;
pub mod time;
pub mod wire;

pub use action::Action;
pub use reason::Reason;

/// A port's index in the forwarder's port list (the order the ports were given in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u8);

impl PortId {
    /// The index as a `usize`, for indexing per-port arrays.
    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// Most ports one forwarder drives (`XFWD_MAX_PORTS` in bpf/xfwd_abi.h: checked equal at build time).
pub const MAX_PORTS: usize = 64;
/// Highest queue count per port (`XFWD_MAX_QUEUES` in bpf/xfwd_abi.h: checked equal at build time).
pub const MAX_QUEUES: usize = 64;
