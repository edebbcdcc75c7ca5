//! The bench's and doctor's instruments: BPF programs beside the frames' way, not on it. Kept
//! in the library, where `dataplane/build.rs` builds every BPF object.

pub mod fib_lookup;
pub mod frame_gen;
pub mod poll_time;
pub mod refused;
