//! Layer 3: the FIBs, the neighbour tables, the router's tables and the router decision —
//! what the workers read. Where routes come from is [`crate::routes`]; how neighbours are
//! resolved, [`crate::resolve`].

pub mod export;
pub mod family;
pub mod fib;
pub mod fib6;
pub mod neighbors;
pub mod prefix;
pub mod router;
pub mod router6;
pub mod tables;
#[doc(hidden)]
pub mod testing;

pub use family::{decide, icmp_share, IpFamily, RouterState, TokenBucket, V4, V6};
pub use fib::{Fib, NhIndex, Prefix};
pub use fib6::{Fib6, Prefix6};
pub use neighbors::{Key6, Neighbor, NeighborTable, NeighborTable6};
pub use router::prefetch;
pub use router6::prefetch6;
pub use tables::{
    Mirrored4, Mirrored6, MirroredRoute, NextHop, NextHop4, NextHop6, NhKind, NhKind4, NhKind6, Path, PortSpec,
    RouteKind, RouteTarget, RouteTarget4, RouteTarget6, RouterTables, Special,
};
