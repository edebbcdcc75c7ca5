//! Wire formats: zero-copy views over frame bytes.
//!
//! A view is built with `new_checked`, which verifies the buffer is long enough for every fixed
//! field; after that no accessor can panic. A packet being built is wrapped by `emit` (IPv4,
//! ARP), which checks the buffer's length and writes the fields that `new_checked` would read.
//! Fields are read and written by offset (the private `field` module of each format), never by
//! casting bytes to a struct, so alignment and endianness are explicit.
//!
//! Each number of a format (header lengths, EtherTypes, IP protocol numbers, ICMP types and
//! codes, ARP opcodes) is defined once, in that format's module, and the layers above use it
//! from there and write frames through the views' setters. The XDP program (bpf/xfwd.bpf.c)
//! keeps its own copies in C, each naming the constant it mirrors.

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;

pub use arp::ArpPacket;
pub use ethernet::{EthernetFrame, MacAddr};
pub use icmp::IcmpPacket;
pub use icmpv6::Icmpv6Packet;
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;

/// Why a buffer is not a valid frame of the expected format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the format's fixed header.
    #[error("truncated: {len} bytes, the header needs {need}")]
    Truncated { len: usize, need: usize },
    /// A field holds a value the format does not allow.
    #[error("malformed: {0}")]
    Malformed(&'static str),
}
