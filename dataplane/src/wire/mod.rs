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

/// The big-endian `u16` of the two-byte field `at` of `b`.
#[inline(always)]
fn be16(b: &[u8], at: core::ops::Range<usize>) -> u16 {
    let b = &b[at];
    u16::from_be_bytes([b[0], b[1]])
}

/// The bytes of the `N`-byte field `at` of `b` (an address).
#[inline(always)]
fn octets<const N: usize>(b: &[u8], at: core::ops::Range<usize>) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&b[at]);
    a
}

/// A view's getters of fields that are plain numbers, one line each (the IPv4 and IPv6 views'
/// would otherwise repeat the same four lines a field): `name: u8 = FIELD` reads the byte at
/// offset `field::FIELD`, `name: u16 = FIELD` the big-endian pair at range `field::FIELD`, and
/// `name: usize = FIELD` that pair widened (a length). Each is `#[inline]` and carries the doc
/// comment written above it; the view's `b()` is its bytes, which `new_checked` has made long
/// enough for every fixed field.
macro_rules! getters {
    ($($(#[$doc:meta])* $vis:vis $name:ident: $ty:ident = $at:ident;)*) => {
        $(getters!(@$ty $(#[$doc])* $vis $name $at);)*
    };
    (@u8 $(#[$doc:meta])* $vis:vis $name:ident $at:ident) => {
        $(#[$doc])*
        #[inline]
        $vis fn $name(&self) -> u8 {
            self.b()[field::$at]
        }
    };
    (@u16 $(#[$doc:meta])* $vis:vis $name:ident $at:ident) => {
        $(#[$doc])*
        #[inline]
        $vis fn $name(&self) -> u16 {
            super::be16(self.b(), field::$at)
        }
    };
    (@usize $(#[$doc:meta])* $vis:vis $name:ident $at:ident) => {
        $(#[$doc])*
        #[inline]
        $vis fn $name(&self) -> usize {
            usize::from(super::be16(self.b(), field::$at))
        }
    };
}

/// What the IPv4 and IPv6 views share: the checked constructor's steps (the fixed header is
/// there, its version is the family's, the packet it describes fits the buffer), the addresses,
/// the payload and the address swap; and `peek_dst`, the prefetch hint. Written once here for
/// [`ipv4::Ipv4Packet`] and [`ipv6::Ipv6Packet`]. Each family's module gives the offsets
/// (`field::SRC` before `field::DST`), `VERSION`, and what differs: its header's own checks
/// and the packet's length (`packet_len`: IPv4's total length, IPv6's payload length after the
/// fixed header) and where its payload lies (`payload_range`).
macro_rules! ip_view {
    ($name:ident { addr: $addr:ident, octets: $octets:literal, fixed: $fixed:ident, not_version: $not_version:literal }) => {
        /// The destination address of whatever sits at the start of `buf`, read without checking
        /// that a header is there: a hint (what to prefetch), never a basis for a decision.
        /// `None` when the buffer is too short to hold the field.
        #[inline]
        pub fn peek_dst(buf: &[u8]) -> Option<$addr> {
            let b: [u8; $octets] = buf.get(field::DST)?.try_into().ok()?;
            Some($addr::from(b))
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buffer` (which may extend past the packet, e.g. Ethernet padding) after
            /// checking that it holds the fixed header, that the version is [`VERSION`], the
            /// family's own header checks, and that the packet the header describes fits it.
            #[inline]
            pub fn new_checked(buffer: T) -> Result<Self, Error> {
                let b = buffer.as_ref();
                if b.len() < $fixed {
                    return Err(Error::Truncated { len: b.len(), need: $fixed });
                }
                if b[0] >> 4 != VERSION {
                    return Err(Error::Malformed($not_version));
                }
                let total = packet_len(b)?;
                if total > b.len() {
                    return Err(Error::Truncated { len: b.len(), need: total });
                }
                Ok($name { buffer })
            }

            #[inline]
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }

            /// Source address.
            #[inline]
            pub fn src(&self) -> $addr {
                $addr::from(self.src_octets())
            }

            /// Destination address.
            #[inline]
            pub fn dst(&self) -> $addr {
                $addr::from(self.dst_octets())
            }

            /// Source address as bytes.
            #[inline]
            pub fn src_octets(&self) -> [u8; $octets] {
                super::octets(self.b(), field::SRC)
            }

            /// Destination address as bytes.
            #[inline]
            pub fn dst_octets(&self) -> [u8; $octets] {
                super::octets(self.b(), field::DST)
            }

            /// The payload (after the header, up to the length the header gives).
            #[inline]
            pub fn payload(&self) -> &[u8] {
                &self.b()[self.payload_range()]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            #[inline]
            fn bm(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }

            /// The payload (after the header, up to the length the header gives), writable.
            #[inline]
            pub fn payload_mut(&mut self) -> &mut [u8] {
                let r = self.payload_range();
                &mut self.bm()[r]
            }

            /// Swaps source and destination (IPv4's header checksum is unchanged: a sum does not
            /// depend on order).
            #[inline]
            pub fn swap_addresses(&mut self) {
                let (head, tail) = self.bm().split_at_mut(field::DST.start);
                head[field::SRC].swap_with_slice(&mut tail[..$octets]);
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
