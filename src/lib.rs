//! The `xfwd` command: CLI glue over the data plane, plus the namespace rig used by the demo,
//! the integration tests and (later) the A/B harness.

pub mod bench;
pub mod control;
pub mod demo;
pub mod kernel;
pub mod render;
pub mod rig;
