//! What a decision tells the worker to do with a frame.

use core::net::IpAddr;

use crate::reason::Reason;
use crate::wire::{ethernet, icmp, icmpv6, ipv4, ipv6};
use crate::PortId;

/// The outcome of a decision. It names ports and lengths only: the frame itself stays where it
/// is (in its UMEM frame), possibly rewritten in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send the frame, as the decision left it, out of this port.
    Forward(PortId),
    /// Send the first `len` bytes of the frame, as the decision left it, out of `port`: bytes
    /// after the IP packet (beyond Ethernet padding) are not forwarded.
    ForwardTrimmed {
        /// Egress port.
        port: PortId,
        /// Bytes to send.
        len: u16,
    },
    /// Send the frame out of each of these ports (never the one it came in on; the bridge's
    /// per-port settings chose them).
    Flood(crate::l2::PortSet),
    /// Drop it, for this reason.
    Drop(Reason),
    /// The frame is answered instead of forwarded: send the first `len` bytes of the decision's
    /// scratch buffer (an ICMP error) out of `port`. `cause` is why the original was not
    /// forwarded (counted like a drop).
    Reply {
        /// Egress port of the answer.
        port: PortId,
        /// Length of the answer in the scratch buffer.
        len: u16,
        /// Why the original frame was not forwarded.
        cause: Reason,
    },
    /// The next hop's MAC is unknown: hand the frame (ready but for its destination MAC) to
    /// the ARP thread, which queues it, resolves `next_hop` on `port` (by ARP or neighbour
    /// discovery), and sends it.
    Glean {
        /// Egress port.
        port: PortId,
        /// The neighbour to resolve.
        next_hop: IpAddr,
    },
}

/// Room for any answer a decision builds in its scratch buffer: an ICMPv6 error, as long as
/// IPv6's minimum MTU allows (Ethernet + 1,280 bytes), is the longest; an ICMP error (Ethernet,
/// IPv4 and ICMP headers, the quoted header of up to 60 bytes and 8 bytes of the datagram)
/// is shorter.
pub const SCRATCH_LEN: usize = ethernet::HEADER_LEN + ipv6::MIN_MTU;

const _: () = assert!(
    ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN + icmp::HEADER_LEN + ipv4::MAX_HEADER_LEN + icmp::QUOTED_PAYLOAD_LEN
        <= SCRATCH_LEN
        && ipv6::HEADER_LEN + icmpv6::HEADER_LEN < ipv6::MIN_MTU
);
