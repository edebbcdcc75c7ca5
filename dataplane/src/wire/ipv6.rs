//! IPv6 fixed headers (RFC 8200): what forwarding, flow classification and ECN marking need.
//!
//! Extension headers are not walked: [`Ipv6Packet::next_header`] is what the fixed header says,
//! so a packet with a hop-by-hop or fragment header is seen as that protocol, not as the TCP or
//! UDP behind it. [`Ipv6Packet::new_checked`] checks the version and that the header and payload
//! length fit the buffer; after it no accessor panics. [`Ipv6Packet::emit`] writes a header for
//! a packet the router originates; [`pseudo_header_sum`] starts the checksum of what it carries.

use core::net::Ipv6Addr;

use super::{be16, Error};

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
/// The hop-by-hop options header's next-header number.
pub const NEXT_HEADER_HOP_BY_HOP: u8 = 0;
/// ICMPv6's next-header number.
pub const NEXT_HEADER_ICMPV6: u8 = 58;
/// The smallest MTU every IPv6 link has (RFC 8200 section 5): an ICMPv6 error never exceeds it.
pub const MIN_MTU: usize = 1280;

/// The one's-complement sum (unfolded) of the pseudo-header (RFC 8200 section 8.1) that an
/// upper-layer checksum covers: addresses, upper-layer length, next header.
#[inline]
pub fn pseudo_header_sum(src: &Ipv6Addr, dst: &Ipv6Addr, upper_len: u32, next_header: u8) -> u64 {
    let mut acc = 0u64;
    for w in src.segments().iter().chain(dst.segments().iter()) {
        acc += u64::from(*w);
    }
    acc + u64::from(upper_len >> 16) + u64::from(upper_len & 0xffff) + u64::from(next_header)
}

/// A view of an IPv6 packet (fixed header and payload).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// The packet's length: the fixed header and the payload length after it (`b` holds the fixed
/// header; there is nothing else in it to check).
#[inline(always)]
fn packet_len(b: &[u8]) -> Result<usize, Error> {
    Ok(HEADER_LEN + usize::from(be16(b, field::PAYLOAD_LEN)))
}

ip_view!(Ipv6Packet { addr: Ipv6Addr, octets: 16, fixed: HEADER_LEN, not_version: "IP version is not 6" });

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Traffic class byte (DSCP in the top six bits, ECN in the low two).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        let b = self.b();
        (b[0] << 4) | (b[1] >> 4)
    }

    getters! {
        /// Payload length field: the bytes after the fixed header.
        pub payload_len: usize = PAYLOAD_LEN;
        /// Next header: the protocol (or first extension header) after the fixed header.
        pub next_header: u8 = NEXT_HEADER;
        /// Hop limit.
        pub hop_limit: u8 = HOP_LIMIT;
    }

    /// Where the payload lies: after the fixed header, up to the payload length.
    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        HEADER_LEN..HEADER_LEN + self.payload_len()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Writes a fixed header (traffic class and flow label zero) at the start of `buffer`,
    /// which must hold it and `payload_len` bytes after it, and wraps it.
    pub fn emit(
        mut buffer: T,
        payload_len: u16,
        next_header: u8,
        hop_limit: u8,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<Self, Error> {
        let need = HEADER_LEN + usize::from(payload_len);
        let b = buffer.as_mut();
        if b.len() < need {
            return Err(Error::Truncated { len: b.len(), need });
        }
        b[field::VER_TC_FLOW].copy_from_slice(&[VERSION << 4, 0, 0, 0]);
        b[field::PAYLOAD_LEN].copy_from_slice(&payload_len.to_be_bytes());
        b[field::NEXT_HEADER] = next_header;
        b[field::HOP_LIMIT] = hop_limit;
        b[field::SRC].copy_from_slice(&src.octets());
        b[field::DST].copy_from_slice(&dst.octets());
        Ok(Ipv6Packet { buffer })
    }

    /// Decrements the hop limit (the caller has checked it is above 1; IPv6 has no header
    /// checksum to update).
    #[inline]
    pub fn decrement_hop_limit(&mut self) {
        let b = self.buffer.as_mut();
        b[field::HOP_LIMIT] = b[field::HOP_LIMIT].wrapping_sub(1);
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }

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
    fn emitted_headers_parse_back_and_hop_limit_and_addresses_change() {
        let (a, b): (Ipv6Addr, Ipv6Addr) = ("2001:db8::1".parse().unwrap(), "fe80::2".parse().unwrap());
        let mut v = vec![0u8; 60];
        assert!(Ipv6Packet::emit(&mut v[..], 21, 58, 64, &a, &b).is_err(), "21 bytes of payload do not fit");
        let mut p = Ipv6Packet::emit(&mut v[..], 20, 58, 64, &a, &b).unwrap();
        p.decrement_hop_limit();
        p.swap_addresses();
        p.payload_mut().fill(7);
        let (h, rest) = Ipv6Header::from_slice(&v).unwrap();
        assert_eq!((h.payload_length, h.next_header, h.hop_limit, h.traffic_class), (20, IpNumber(58), 63, 0));
        assert_eq!((Ipv6Addr::from(h.source), Ipv6Addr::from(h.destination)), (b, a));
        assert_eq!(rest, &[7; 20]);
        assert_eq!(peek_dst(&v), Some(a));
        assert_eq!(peek_dst(&v[..39]), None);
    }

    #[test]
    fn the_pseudo_header_sum_is_what_etherparse_checksums_start_from() {
        use etherparse::{Icmpv6Header, Icmpv6Type};
        let h = Ipv6Header {
            source: "2001:db8::1".parse::<Ipv6Addr>().unwrap().octets(),
            destination: "2001:db8:ffff::2".parse::<Ipv6Addr>().unwrap().octets(),
            ..Default::default()
        };
        let payload = [1u8, 2, 3, 4, 5];
        let m = Icmpv6Header::with_checksum(
            Icmpv6Type::EchoRequest(etherparse::IcmpEchoHeader { id: 9, seq: 1 }),
            h.source,
            h.destination,
            &payload,
        )
        .unwrap();
        let mut bytes = m.to_bytes().to_vec();
        bytes.extend_from_slice(&payload);
        let acc = pseudo_header_sum(&h.source.into(), &h.destination.into(), bytes.len() as u32, NEXT_HEADER_ICMPV6);
        let total = super::super::checksum::fold(acc + u64::from(super::super::checksum::sum(&bytes)));
        assert_eq!(total, 0xffff, "a correct checksum sums to all ones");
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
