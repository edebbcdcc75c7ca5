//! Active queue management: which frames wait, in what order, and which are dropped or marked
//! because the queue has grown.
//!
//! - [`codel`]: CoDel (RFC 8289), the sojourn-time drop and ECN-mark law for one queue;
//! - [`fq`]: flow queues in the RFC 8290 style: a set-associative flow table that keeps the
//!   keys (so collisions are seen and counted), deficit round robin with new flows first, and
//!   CoDel per flow queue, over a fixed pool of item slots;
//! - [`flow`]: what a frame's flow is ([`flow::flow_key`]) and how its ECN field is read and
//!   set ([`flow::is_ect`], [`flow::mark_ce`]).
//!
//! Like the decisions, this is pure code: time comes in as nanoseconds from the caller, nothing
//! is allocated after construction, nothing touches the kernel. The queues are generic over the
//! item they hold (the worker stores frame descriptors), so they never see frame bytes: the
//! caller classifies and marks frames with [`flow`] and frees what the queues hand back.

pub mod codel;
pub mod flow;
pub mod fq;

pub use codel::{Codel, CodelParams, Verdict};
pub use flow::{flow_key, is_ect, mark_ce, EcnOutcome, FlowKey};
pub use fq::{Dequeued, Fate, FlowQueues, FqCounters, FqParams};
