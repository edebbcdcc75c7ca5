//! ICMP messages (RFC 792) that the router sends or inspects: echo, and the error messages
//! Destination Unreachable and Time Exceeded.

use super::{checksum, Error};

/// Echo Reply.
pub const ECHO_REPLY: u8 = 0;
/// Destination Unreachable.
pub const DEST_UNREACHABLE: u8 = 3;
/// Echo Request.
pub const ECHO_REQUEST: u8 = 8;
/// Time Exceeded.
pub const TIME_EXCEEDED: u8 = 11;
/// Destination Unreachable code: network unreachable.
pub const CODE_NET_UNREACHABLE: u8 = 0;
/// Destination Unreachable code: host unreachable.
pub const CODE_HOST_UNREACHABLE: u8 = 1;
/// Destination Unreachable code: fragmentation needed and DF set.
pub const CODE_FRAG_NEEDED: u8 = 4;
/// Time Exceeded code: TTL exceeded in transit.
pub const CODE_TTL_EXCEEDED: u8 = 0;

/// Length of the ICMP header (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = 8;

/// A view of an ICMP message.
#[derive(Debug, Clone, Copy)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wraps `buffer` (the whole ICMP message) after checking it holds a header.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated { len, need: HEADER_LEN });
        }
        Ok(IcmpPacket { buffer })
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Whether the message is an error (RFC 1812 4.3.2.7: never answer an error with an error).
    /// Types other than echo, timestamp, information and address mask requests/replies are
    /// treated as errors, as the kernel does (`icmp_is_err`'s complement is the query set).
    pub fn is_error(&self) -> bool {
        !matches!(self.msg_type(), 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18)
    }

    /// Whether the checksum over the whole message verifies (always true when fuzzing).
    pub fn checksum_ok(&self) -> bool {
        cfg!(fuzzing) || checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Turns an echo request into an echo reply in place, updating the checksum incrementally.
    pub fn echo_request_to_reply(&mut self) {
        let b = self.buffer.as_mut();
        let old = u16::from_be_bytes([b[0], b[1]]);
        b[0] = ECHO_REPLY;
        let new = u16::from_be_bytes([b[0], b[1]]);
        let hc = u16::from_be_bytes([b[2], b[3]]);
        b[2..4].copy_from_slice(&checksum::update(hc, old, new).to_be_bytes());
    }

    /// Writes an error header (type, code, `rest` word) and computes the checksum over the
    /// whole buffer, which must already hold the quoted datagram after the header.
    pub fn write_error(&mut self, msg_type: u8, code: u8, rest: u32) {
        let b = self.buffer.as_mut();
        b[0] = msg_type;
        b[1] = code;
        b[2..4].copy_from_slice(&[0, 0]);
        b[4..8].copy_from_slice(&rest.to_be_bytes());
        let c = checksum::checksum(b);
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IcmpEchoHeader, Icmpv4Header, Icmpv4Type};

    #[test]
    fn echo_reply_in_place_has_a_valid_checksum() {
        let payload = [1u8, 2, 3, 4, 5];
        let h = Icmpv4Header::with_checksum(Icmpv4Type::EchoRequest(IcmpEchoHeader { id: 7, seq: 9 }), &payload);
        let mut v = h.to_bytes().to_vec();
        v.extend_from_slice(&payload);
        let mut p = IcmpPacket::new_checked(&mut v[..]).unwrap();
        assert_eq!(p.msg_type(), ECHO_REQUEST);
        assert!(!p.is_error());
        p.echo_request_to_reply();
        assert!(p.checksum_ok());
        let (h, _) = Icmpv4Header::from_slice(&v).unwrap();
        assert_eq!(h.icmp_type, Icmpv4Type::EchoReply(IcmpEchoHeader { id: 7, seq: 9 }));
    }

    #[test]
    fn errors_are_recognised_and_written() {
        let mut v = vec![0u8; 8 + 28];
        v[8] = 0x45;
        let mut p = IcmpPacket::new_checked(&mut v[..]).unwrap();
        p.write_error(DEST_UNREACHABLE, CODE_FRAG_NEEDED, 1400);
        assert!(p.is_error());
        assert!(p.checksum_ok());
        let (h, _) = Icmpv4Header::from_slice(&v).unwrap();
        assert!(matches!(h.icmp_type, Icmpv4Type::DestinationUnreachable(_)));
        assert_eq!(u32::from_be_bytes([v[4], v[5], v[6], v[7]]), 1400);
        assert!(IcmpPacket::new_checked(&v[..7]).is_err());
    }
}
