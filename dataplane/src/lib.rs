//! xfwd's data plane.
//!
//! The modules are the layers a frame crosses, in order:
//!
//! - [`wire`]: zero-copy views of frame formats (what the bytes say);
//! - [`l2`]: the forwarding database and the bridge decision;
//! - [`l3`]: the FIB, the neighbour table and the router decision (what to do with them, as an
//!   [`Action`]);
//! - [`io`]: the XDP program's loader, the AF_XDP sockets and the per-queue workers that move
//!   frames between rings and call the decision (where frames enter and leave);
//! - [`stats`] and [`reason`]: what every worker counts, and why a frame was dropped.
//!
//! Decision code (`l2`) does no I/O, reads no clock (see [`time`]) and allocates nothing per
//! frame; it is tested without root. Everything that needs the kernel lives in `io`.

pub mod action;
pub mod io;
pub mod l2;
pub mod l3;
pub mod prefetch;
pub mod reason;
pub mod stats;
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

/// Most ports one forwarder drives (mirrors `XFWD_MAX_PORTS` in bpf/xfwd.bpf.c).
pub const MAX_PORTS: usize = 64;
/// Highest queue count per port (mirrors `XFWD_MAX_QUEUES` in bpf/xfwd.bpf.c).
pub const MAX_QUEUES: usize = 64;
