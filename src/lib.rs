//! The `xfwd` command: CLI glue over the data plane, the namespace rig used by the tests and
//! the A/B harness (`bench`), and the kernel-path twin of each mode (`kernel`).

pub mod bench;
pub mod control;
pub mod kernel;
pub mod privs;
pub mod remote;
pub mod render;
pub mod rig;
