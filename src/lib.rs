//! The `xfwd` command: CLI glue over the data plane, the router's files read from disk
//! (`config_file`), the namespace rig used by the tests and the A/B harness (`bench`), the
//! kernel-path twin of each mode (`kernel`), and `doctor`, which tells what will work on a box's
//! ports.

// Production code: no function over 100 lines of code (clippy.toml); tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod bench;
pub mod config_file;
pub mod control;
pub mod doctor;
pub mod kernel;
pub mod log;
pub mod metrics;
pub mod notify;
pub mod privs;
pub mod remote;
pub mod render;
pub mod rig;
pub mod show;
pub mod top;

/// Bad usage of the command line, found by the CLI itself (exit code 2): the message names what
/// to change.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
