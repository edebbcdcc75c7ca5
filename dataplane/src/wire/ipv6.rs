//! IPv6 fixed headers (RFC 8200), as far as flow classification and ECN marking need them.
//!
//! The router does not forward IPv6 (the XDP program hands it to the kernel), but the bridge
//! carries it, and a flow queue must tell its flows apart and mark them. Extension headers are
//! not walked: [`Ipv6Packet::next_header`] is what the fixed header says, so a packet with a
//! hop-by-hop or fragment header is seen as that protocol, not as the TCP or UDP behind it.
//! [`Ipv6Packet::new_checked`] checks the version and that the header and payload length fit
//! the buffer; after it no accessor panics.

use core::net::Ipv6Addr;

use super::Error;

mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// The version field's value.
pub const VERSION: u8 = 6;
/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST.end;
/// The fragment extension header's next-header number.
pub const NEXT_HEADER_FRAGMENT: u8 = 44;

/// A view of an IPv6 packet (fixed header and payload).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` (which may extend past the packet) after checking version 6 and that the
    /// fixed header and the payload length fit the buffer.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated { len: b.len(), need: HEADER_LEN });
        }
        if b[0] >> 4 != VERSION {
            return Err(Error::Malformed("IP version is not 6"));
        }
        let p = field::PAYLOAD_LEN.start;
        let total = HEADER_LEN + usize::from(u16::from_be_bytes([b[p], b[p + 1]]));
        if total > b.len() {
            return Err(Error::Truncated { len: b.len(), need: total });
        }
        Ok(Ipv6Packet { buffer })
    }

    #[inline]
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Traffic class byte (DSCP in the top six bits, ECN in the low two).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        let b = self.b();
        (b[0] << 4) | (b[1] >> 4)
    }

    /// Payload length field: the bytes after the fixed header.
    #[inline]
    pub fn payload_len(&self) -> usize {
        let (b, p) = (self.b(), field::PAYLOAD_LEN.start);
        usize::from(u16::from_be_bytes([b[p], b[p + 1]]))
    }

    /// Next header: the protocol (or first extension header) after the fixed header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_octets())
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_octets())
    }

    /// Source address as bytes.
    #[inline]
    pub fn src_octets(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.b()[field::SRC]);
        a
    }

    /// Destination address as bytes.
    #[inline]
    pub fn dst_octets(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.b()[field::DST]);
        a
    }

    /// The payload (after the fixed header, up to the payload length).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + self.payload_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the traffic class, keeping the version and the flow label (IPv6 has no header
    /// checksum to update).
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_TC_FLOW];
        b[0] = (b[0] & 0xf0) | (tc >> 4);
        b[1] = (b[1] & 0x0f) | (tc << 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv6FlowLabel, Ipv6Header};

    fn packet(tc: u8, payload: usize) -> Vec<u8> {
        let h = Ipv6Header {
            traffic_class: tc,
            flow_label: Ipv6FlowLabel::try_new(0xabcde).unwrap(),
            payload_length: payload as u16,
            next_header: IpNumber::UDP,
            hop_limit: 63,
            source: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            destination: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        };
        let mut v = h.to_bytes().to_vec();
        v.resize(HEADER_LEN + payload, 0xab);
        v
    }

    #[test]
    fn fields() {
        let v = packet(0xb9, 8);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!((p.traffic_class(), p.payload_len(), p.next_header(), p.hop_limit()), (0xb9, 8, 17, 63));
        assert_eq!(p.src(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &[0xab; 8]);
    }

    #[test]
    fn malformed_headers_are_refused() {
        let v = packet(0, 8);
        assert_eq!(Ipv6Packet::new_checked(&v[..39]).unwrap_err(), Error::Truncated { len: 39, need: 40 });
        assert_eq!(Ipv6Packet::new_checked(&v[..47]).unwrap_err(), Error::Truncated { len: 47, need: 48 });
        let mut bad = v.clone();
        bad[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed("IP version is not 6"));
    }

    #[test]
    fn traffic_class_is_written_between_version_and_flow_label() {
        for tc in [0u8, 0x01, 0x03, 0x30, 0xfc, 0xff] {
            let mut v = packet(0x5a, 0);
            Ipv6Packet::new_checked(&mut v[..]).unwrap().set_traffic_class(tc);
            let (h, _) = Ipv6Header::from_slice(&v).unwrap();
            assert_eq!(h.traffic_class, tc);
            assert_eq!(h.flow_label.value(), 0xabcde, "flow label kept");
            assert_eq!(v[0] >> 4, 6, "version kept");
        }
    }
}
