//! The synthetic full tables, from the bench's own generator (`xfwd::bench::tables`), so that
//! the router benches, the examples and `xfwd bench --routes` measure the same table.

pub use xfwd::bench::tables::*;
