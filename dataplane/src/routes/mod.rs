//! Where the router's routes come from, and how a change reaches the workers.
//!
//! A route **enters** from the router's file (built into tables at start and at each reload:
//! [`crate::l3::RouterTables`]'s builders), or from the kernel (`[fib] source = "kernel"`):
//! [`rtnl`] dumps and follows the kernel's routes, nexthop objects, addresses, links,
//! neighbours and policy rules over rtnetlink; [`mirror`] keeps them as the kernel holds them
//! (pure: events in, the routes out); [`incremental`] turns a batch of changes into new tables
//! by prefix, without rebuilding what did not change (pure); [`kernel`] is the thread that
//! runs the three and **swaps** the new tables in whole, so that a worker sees the tables
//! before a batch or after it, never between. The workers only read tables
//! ([`crate::l3`]); nothing here runs on the packet path.
//!
//! **Counted**: each batch's delay from the first message read to the swap, resyncs and their
//! causes ([`kernel::SyncCounters`]); what the mirror could not follow is refused at start or
//! counted as an unsupported route.
//!
//! Only [`rtnl`] and [`kernel`] make system calls; [`mirror`] and [`incremental`] are tested
//! without root.

pub mod incremental;
pub mod kernel;
pub mod mirror;
pub mod rtnl;
