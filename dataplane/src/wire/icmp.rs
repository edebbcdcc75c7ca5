//! ICMP messages (RFC 792) that the router sends or inspects: echo, and the error messages
//! Destination Unreachable and Time Exceeded.

use super::icmp_field as field;
use super::{checksum, Error};

/// Echo Reply.
pub const ECHO_REPLY: u8 = 0;
/// Destination Unreachable.
pub const DEST_UNREACHABLE: u8 = 3;
/// Echo Request.
pub const ECHO_REQUEST: u8 = 8;
/// Time Exceeded.
pub const TIME_EXCEEDED: u8 = 11;
/// Parameter Problem (RFC 792): the rest word's top byte points at the octet in error.
pub const PARAMETER_PROBLEM: u8 = 12;
/// Timestamp.
pub const TIMESTAMP: u8 = 13;
/// Timestamp Reply.
pub const TIMESTAMP_REPLY: u8 = 14;
/// Information Request.
pub const INFO_REQUEST: u8 = 15;
/// Information Reply.
pub const INFO_REPLY: u8 = 16;
/// Address Mask Request (RFC 950).
pub const ADDRESS_MASK_REQUEST: u8 = 17;
/// Address Mask Reply (RFC 950).
pub const ADDRESS_MASK_REPLY: u8 = 18;
/// Destination Unreachable code: network unreachable.
pub const CODE_NET_UNREACHABLE: u8 = 0;
/// Destination Unreachable code: host unreachable.
pub const CODE_HOST_UNREACHABLE: u8 = 1;
/// Destination Unreachable code: communication administratively prohibited (RFC 1812).
pub const CODE_ADMIN_PROHIBITED: u8 = 13;
/// Destination Unreachable code: fragmentation needed and DF set.
pub const CODE_FRAG_NEEDED: u8 = 4;
/// Time Exceeded code: TTL exceeded in transit.
pub const CODE_TTL_EXCEEDED: u8 = 0;

/// Length of the ICMP header (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = field::PAYLOAD.start;
/// Bytes of the offending datagram's payload that an error quotes after its IP header (RFC 792).
pub const QUOTED_PAYLOAD_LEN: usize = 8;

/// A view of an ICMP message.
#[derive(Debug, Clone, Copy)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

icmp_view!(IcmpPacket);

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Whether the message is an error (RFC 1812 4.3.2.7: never answer an error with an error).
    /// Types other than echo, timestamp, information and address mask requests/replies are
    /// treated as errors, as the kernel does (`icmp_is_err`'s complement is the query set).
    pub fn is_error(&self) -> bool {
        !matches!(
            self.msg_type(),
            ECHO_REPLY
                | ECHO_REQUEST
                | TIMESTAMP
                | TIMESTAMP_REPLY
                | INFO_REQUEST
                | INFO_REPLY
                | ADDRESS_MASK_REQUEST
                | ADDRESS_MASK_REPLY
        )
    }

    /// Whether the checksum over the whole message verifies (always true when fuzzing).
    pub fn checksum_ok(&self) -> bool {
        cfg!(fuzzing) || checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Writes an error header (type, code, `rest` word) and computes the checksum over the
    /// whole buffer, which must already hold the quoted datagram after the header.
    pub fn write_error(&mut self, msg_type: u8, code: u8, rest: u32) {
        let b = self.buffer.as_mut();
        b[field::TYPE] = msg_type;
        b[field::CODE] = code;
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::REST].copy_from_slice(&rest.to_be_bytes());
        let c = checksum::checksum(b);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
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
        assert_eq!(v[8], 0x45, "the quote is left as it was");
        assert!(IcmpPacket::new_checked(&v[..7]).is_err());
    }

    #[test]
    fn short_buffer_is_refused() {
        assert_eq!(IcmpPacket::new_checked(&[0u8; 7][..]).unwrap_err(), Error::Truncated { len: 7, need: 8 });
        let bare = IcmpPacket::new_checked(&[0u8; 8][..]).unwrap();
        assert!(bare.payload().is_empty(), "a bare header has no payload");
    }

    #[test]
    fn fields_read_and_write_by_offset() {
        let mut v = [3u8, 4, 0xab, 0xcd, 0, 0, 0x05, 0x78, 0x45, 0, 0, 28];
        let mut p = IcmpPacket::new_checked(&mut v[..]).unwrap();
        assert_eq!((p.msg_type(), p.code(), p.checksum(), p.rest()), (3, 4, 0xabcd, 1400));
        assert_eq!(p.payload(), &[0x45, 0, 0, 28]);
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(&v[8..], &[1, 2, 3, 4]);
        assert_eq!(&v[..8], &[3, 4, 0xab, 0xcd, 0, 0, 0x05, 0x78], "the header is untouched");
        // An echo's identifier and sequence number are the rest word.
        let h = Icmpv4Header::with_checksum(Icmpv4Type::EchoRequest(IcmpEchoHeader { id: 0x1234, seq: 0x5678 }), &[]);
        let b = h.to_bytes();
        let p = IcmpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((p.rest(), p.checksum()), (0x1234_5678, h.checksum));
    }

    #[test]
    fn queries_are_not_errors_and_everything_else_is() {
        use etherparse::icmpv4 as ep;
        let queries = [
            ep::TYPE_ECHO_REPLY,
            ep::TYPE_ECHO_REQUEST,
            ep::TYPE_TIMESTAMP,
            ep::TYPE_TIMESTAMP_REPLY,
            ep::TYPE_INFO_REQUEST,
            ep::TYPE_INFO_REPLY,
            ep::TYPE_ADDRESS,
            ep::TYPE_ADDRESSREPLY,
        ];
        for t in 0..=255u8 {
            let m = [t, 0, 0, 0, 0, 0, 0, 0];
            assert_eq!(IcmpPacket::new_checked(&m[..]).unwrap().is_error(), !queries.contains(&t), "type {t}");
        }
    }

    #[test]
    fn constants_agree_with_etherparse() {
        use etherparse::icmpv4 as ep;
        let ours = [
            (ECHO_REPLY, ep::TYPE_ECHO_REPLY),
            (DEST_UNREACHABLE, ep::TYPE_DEST_UNREACH),
            (ECHO_REQUEST, ep::TYPE_ECHO_REQUEST),
            (TIME_EXCEEDED, ep::TYPE_TIME_EXCEEDED),
            (TIMESTAMP, ep::TYPE_TIMESTAMP),
            (TIMESTAMP_REPLY, ep::TYPE_TIMESTAMP_REPLY),
            (INFO_REQUEST, ep::TYPE_INFO_REQUEST),
            (INFO_REPLY, ep::TYPE_INFO_REPLY),
            (ADDRESS_MASK_REQUEST, ep::TYPE_ADDRESS),
            (ADDRESS_MASK_REPLY, ep::TYPE_ADDRESSREPLY),
            (CODE_NET_UNREACHABLE, ep::CODE_DST_UNREACH_NET),
            (CODE_HOST_UNREACHABLE, ep::CODE_DST_UNREACH_HOST),
            (CODE_FRAG_NEEDED, ep::CODE_DST_UNREACH_NEED_FRAG),
            (CODE_TTL_EXCEEDED, ep::CODE_TIME_EXCEEDED_TTL_EXCEEDED_IN_TRANSIT),
        ];
        for (a, b) in ours {
            assert_eq!(a, b);
        }
        assert_eq!(HEADER_LEN, Icmpv4Header::MIN_LEN);
    }
}
