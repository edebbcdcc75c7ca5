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

/// The header offsets ICMP and ICMPv6 share.
mod icmp_field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// The "rest of header" word: identifier and sequence of an echo, the next-hop MTU
    /// (Fragmentation Needed, Packet Too Big), the pointer of Parameter Problem, the flags of a
    /// Neighbor Advertisement, or unused.
    pub const REST: Range<usize> = 4..8;
    pub const PAYLOAD: RangeFrom<usize> = 8..;
}

/// What ICMP and ICMPv6 messages share: a header of type, code, checksum and a "rest" word,
/// then the payload. Written once here for [`icmp::IcmpPacket`] and [`icmpv6::Icmpv6Packet`]:
/// the view's checked constructor, its header and payload accessors, and the echo reply made in
/// place. Each family's module gives the offsets (`field`), `HEADER_LEN`, `ECHO_REPLY` and
/// what differs (the checksum: ICMPv6's covers a pseudo-header).
macro_rules! icmp_view {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buffer` (the whole message) after checking it holds a header.
            #[inline]
            pub fn new_checked(buffer: T) -> Result<Self, Error> {
                let len = buffer.as_ref().len();
                if len < HEADER_LEN {
                    return Err(Error::Truncated { len, need: HEADER_LEN });
                }
                Ok($name { buffer })
            }

            /// Message type.
            #[inline]
            pub fn msg_type(&self) -> u8 {
                self.buffer.as_ref()[field::TYPE]
            }

            /// Message code.
            #[inline]
            pub fn code(&self) -> u8 {
                self.buffer.as_ref()[field::CODE]
            }

            /// The word after the checksum (see `field::REST` for what it holds).
            #[inline]
            pub fn rest(&self) -> u32 {
                let b = &self.buffer.as_ref()[field::REST];
                u32::from_be_bytes([b[0], b[1], b[2], b[3]])
            }

            /// What follows the header: echo data, the packet an error quotes, a target and
            /// options.
            #[inline]
            pub fn payload(&self) -> &[u8] {
                &self.buffer.as_ref()[field::PAYLOAD]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Turns an echo request into an echo reply in place, updating the checksum
            /// incrementally (for ICMPv6 the pseudo-header sum does not change when the
            /// addresses swap).
            pub fn echo_request_to_reply(&mut self) {
                let b = self.buffer.as_mut();
                let old = u16::from_be_bytes([b[field::TYPE], b[field::CODE]]);
                b[field::TYPE] = ECHO_REPLY;
                let new = u16::from_be_bytes([b[field::TYPE], b[field::CODE]]);
                let c = &b[field::CHECKSUM];
                let hc = u16::from_be_bytes([c[0], c[1]]);
                b[field::CHECKSUM].copy_from_slice(&checksum::update(hc, old, new).to_be_bytes());
            }

            /// What follows the header, writable (where an error's quote is copied before its
            /// checksum is summed).
            #[inline]
            pub fn payload_mut(&mut self) -> &mut [u8] {
                &mut self.buffer.as_mut()[field::PAYLOAD]
            }
        }
    };
}

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
