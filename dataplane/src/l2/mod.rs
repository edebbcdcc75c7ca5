//! Layer 2: the forwarding database and the learning-bridge decision.

pub mod bridge;
pub mod fdb;
pub mod policy;

pub use bridge::{decide, prefetch, Verdict};
pub use fdb::{Fdb, FdbEntry, Learn};
pub use policy::{FloodKind, Policies, PortPolicy, PortSet};
