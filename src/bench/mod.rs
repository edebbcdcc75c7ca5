//! The A/B harness's building blocks: statistics, CPU sampling, traffic and reports.

pub mod cpu;
pub mod stats;
