//! Layer 2: the forwarding database and the learning-bridge decision.

pub mod bridge;
pub mod fdb;

pub use bridge::{decide, prefetch, Verdict};
pub use fdb::{Fdb, FdbEntry, Learn};
