//! IPv4 headers (RFC 791).
//!
//! [`Ipv4Packet::new_checked`] checks version, IHL and total length against the buffer, so after
//! it no accessor panics; the header checksum is verified separately
//! ([`Ipv4Packet::checksum_ok`]), because a forwarder updates it incrementally rather than
//! recomputing it.

use core::net::Ipv4Addr;

use super::{be16, checksum, Error};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;

    /// In FLAGS_FRAG: Don't Fragment, More Fragments, and the offset in 8-byte units.
    pub const DONT_FRAG: u16 = 0x4000;
    pub const MORE_FRAGS: u16 = 0x2000;
    pub const FRAG_OFFSET: u16 = 0x1fff;
}

/// The version field's value.
pub const VERSION: u8 = 4;
/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = field::DST.end;
/// Length of a header with the most options (IHL 15).
pub const MAX_HEADER_LEN: usize = 15 * 4;
/// The ICMP protocol number.
pub const PROTO_ICMP: u8 = 1;
/// The TCP protocol number.
pub const PROTO_TCP: u8 = 6;
/// The UDP protocol number.
pub const PROTO_UDP: u8 = 17;
/// The four type-of-service bits of the TOS byte (RFC 1349), below the precedence.
pub const TOS_BITS: u8 = 0x1e;
/// Precedence "internetwork control" (RFC 791: 110 in the TOS byte's top three bits).
pub const PRECEDENCE_INTERNETWORK_CONTROL: u8 = 0xc0;

/// The packet's length (its total length field) after the checks of the header's own fields:
/// IHL ≥ 5 and a total length that holds the header; `b` holds the fixed header.
#[inline(always)]
fn packet_len(b: &[u8]) -> Result<usize, Error> {
    let hl = usize::from(b[field::VER_IHL] & 0x0f) * 4;
    if hl < MIN_HEADER_LEN {
        return Err(Error::Malformed("IHL below 5"));
    }
    let total = usize::from(be16(b, field::TOTAL_LEN));
    if total < hl {
        return Err(Error::Malformed("total length shorter than the header"));
    }
    Ok(total)
}

/// A view of an IPv4 packet (header and payload).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

ip_view!(Ipv4Packet { addr: Ipv4Addr, octets: 4, fixed: MIN_HEADER_LEN, not_version: "IP version is not 4" });

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }

    getters! {
        /// Total length field: header plus payload.
        pub total_len: usize = TOTAL_LEN;
        /// Type-of-service byte (DSCP and ECN in today's terms).
        pub tos: u8 = TOS;
        /// Identification field.
        pub ident: u16 = IDENT;
        flags_frag: u16 = FLAGS_FRAG;
        /// Time to live.
        pub ttl: u8 = TTL;
        /// Protocol number of the payload.
        pub protocol: u8 = PROTOCOL;
        /// Header checksum field.
        pub checksum: u16 = CHECKSUM;
    }

    /// Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & field::DONT_FRAG != 0
    }

    /// More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & field::MORE_FRAGS != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> usize {
        usize::from(self.flags_frag() & field::FRAG_OFFSET) * 8
    }

    /// Whether the header checksum verifies. Always true when fuzzing, so that the fuzzer
    /// reaches the code behind the check.
    #[inline]
    pub fn checksum_ok(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        checksum::sum(&self.b()[..self.header_len()]) == 0xffff
    }

    /// Where the payload lies: after the header, up to the total length.
    #[inline]
    fn payload_range(&self) -> core::ops::Range<usize> {
        self.header_len()..self.total_len()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Decrements the TTL by one and updates the checksum incrementally (RFC 1624). The caller
    /// has checked that the TTL is above 1.
    #[inline(always)]
    pub fn decrement_ttl(&mut self) {
        let b = self.bm();
        let old = u16::from_be_bytes([b[field::TTL], b[field::PROTOCOL]]);
        b[field::TTL] -= 1;
        let new = u16::from_be_bytes([b[field::TTL], b[field::PROTOCOL]]);
        let c = field::CHECKSUM.start;
        let hc = u16::from_be_bytes([b[c], b[c + 1]]);
        b[field::CHECKSUM].copy_from_slice(&checksum::update(hc, old, new).to_be_bytes());
    }

    /// Writes a fresh 20-byte header (no options, TOS 0, no flags) with the given fields and its
    /// checksum at the start of `buffer`, and wraps it: the checked constructor of a packet being
    /// built. Fails, writing nothing, when `total_len` is shorter than the header or longer than
    /// the buffer.
    pub fn emit(
        mut buffer: T,
        total_len: u16,
        ident: u16,
        ttl: u8,
        protocol: u8,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<Self, Error> {
        let len = buffer.as_ref().len();
        let total = usize::from(total_len);
        if total < MIN_HEADER_LEN {
            return Err(Error::Malformed("total length shorter than the header"));
        }
        if total > len {
            return Err(Error::Truncated { len, need: total });
        }
        let b = buffer.as_mut();
        b[field::VER_IHL] = VERSION << 4 | (MIN_HEADER_LEN / 4) as u8;
        b[field::TOS] = 0;
        b[field::TOTAL_LEN].copy_from_slice(&total_len.to_be_bytes());
        b[field::IDENT].copy_from_slice(&ident.to_be_bytes());
        b[field::FLAGS_FRAG].copy_from_slice(&0u16.to_be_bytes());
        b[field::TTL] = ttl;
        b[field::PROTOCOL] = protocol;
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        b[field::SRC].copy_from_slice(&src.octets());
        b[field::DST].copy_from_slice(&dst.octets());
        let c = checksum::checksum(&b[..MIN_HEADER_LEN]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        Ok(Ipv4Packet { buffer })
    }

    /// Sets the TOS byte and updates the checksum incrementally (RFC 1624).
    #[inline]
    pub fn set_tos(&mut self, tos: u8) {
        let b = self.bm();
        let old = u16::from_be_bytes([b[field::VER_IHL], b[field::TOS]]);
        b[field::TOS] = tos;
        let new = u16::from_be_bytes([b[field::VER_IHL], b[field::TOS]]);
        let c = field::CHECKSUM.start;
        let hc = u16::from_be_bytes([b[c], b[c + 1]]);
        b[field::CHECKSUM].copy_from_slice(&checksum::update(hc, old, new).to_be_bytes());
    }

    /// Sets the source address and recomputes the header checksum.
    pub fn set_src(&mut self, src: Ipv4Addr) {
        let hl = self.header_len();
        let b = self.bm();
        b[field::SRC].copy_from_slice(&src.octets());
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&b[..hl]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }

    /// Sets Don't Fragment (the offset and the other flags kept) and updates the checksum
    /// incrementally (RFC 1624).
    pub fn set_dont_frag(&mut self) {
        let b = self.bm();
        let old = be16(b, field::FLAGS_FRAG);
        let new = old | field::DONT_FRAG;
        b[field::FLAGS_FRAG].copy_from_slice(&new.to_be_bytes());
        let hc = be16(b, field::CHECKSUM);
        b[field::CHECKSUM].copy_from_slice(&checksum::update(hc, old, new).to_be_bytes());
    }

    /// Sets the TTL and recomputes the header checksum.
    pub fn set_ttl(&mut self, ttl: u8) {
        let hl = self.header_len();
        let b = self.bm();
        b[field::TTL] = ttl;
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&b[..hl]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv4Header};

    fn packet(ttl: u8, payload: usize) -> Vec<u8> {
        let mut h = Ipv4Header::new(payload as u16, ttl, IpNumber::UDP, [198, 18, 0, 1], [198, 19, 0, 1]).unwrap();
        h.dont_fragment = true;
        h.header_checksum = h.calc_header_checksum();
        let mut v = h.to_bytes().to_vec();
        v.resize(20 + payload, 0xab);
        v
    }

    #[test]
    fn fields() {
        let v = packet(64, 8);
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), PROTO_UDP);
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.src(), Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(p.dst(), Ipv4Addr::new(198, 19, 0, 1));
        assert_eq!((p.src_octets(), p.dst_octets()), ([198, 18, 0, 1], [198, 19, 0, 1]));
        assert!(p.checksum_ok());
        assert_eq!(p.payload(), &[0xab; 8]);
    }

    #[test]
    fn malformed_headers_are_refused() {
        let v = packet(64, 8);
        assert!(Ipv4Packet::new_checked(&v[..19]).is_err());
        assert!(Ipv4Packet::new_checked(&v[..27]).is_err(), "total length beyond the buffer");
        let mut bad = v.clone();
        bad[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed("IP version is not 4"));
        let mut bad = v.clone();
        bad[0] = 0x44;
        assert_eq!(Ipv4Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed("IHL below 5"));
        let mut bad = v.clone();
        bad[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert!(Ipv4Packet::new_checked(&bad[..]).is_err());
        let mut bad = v.clone();
        bad[12] ^= 1;
        assert!(!Ipv4Packet::new_checked(&bad[..]).unwrap().checksum_ok());
        // Ethernet padding after the packet is fine.
        let mut padded = v.clone();
        padded.resize(46, 0);
        assert_eq!(Ipv4Packet::new_checked(&padded[..]).unwrap().payload().len(), 8);
    }

    #[test]
    fn ttl_decrement_keeps_the_checksum_valid() {
        for ttl in 2..=255u8 {
            let mut v = packet(ttl, 0);
            let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
            p.decrement_ttl();
            assert_eq!(p.ttl(), ttl - 1);
            assert!(p.checksum_ok(), "ttl {ttl}");
            let reference = {
                let (h, _) = Ipv4Header::from_slice(&v).unwrap();
                h.calc_header_checksum()
            };
            let got = u16::from_be_bytes([v[10], v[11]]);
            assert!(got == reference || (got == 0xffff && reference == 0) || (got == 0 && reference == 0xffff));
        }
    }

    #[test]
    fn written_headers_parse_back() {
        let mut v = vec![0xa5u8; 30];
        let p = Ipv4Packet::emit(
            &mut v[..],
            28,
            7,
            64,
            PROTO_ICMP,
            Ipv4Addr::new(198, 18, 0, 254),
            Ipv4Addr::new(198, 18, 0, 1),
        )
        .unwrap();
        assert_eq!((p.header_len(), p.total_len(), p.tos(), p.ident()), (20, 28, 0, 7));
        let (h, _) = Ipv4Header::from_slice(&v).unwrap();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!((h.time_to_live, h.protocol, h.identification, h.total_len), (64, IpNumber::ICMP, 7, 28));
        assert!(!h.dont_fragment && !h.more_fragments && h.fragment_offset.value() == 0);
        assert_eq!(v[20..], [0xa5; 10], "nothing written past the header");
        let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
        p.swap_addresses();
        assert!(p.checksum_ok());
        assert_eq!(p.src(), Ipv4Addr::new(198, 18, 0, 1));
        p.set_src(Ipv4Addr::new(198, 18, 1, 254));
        p.set_ttl(1);
        assert!(p.checksum_ok());
        assert_eq!((p.src(), p.ttl()), (Ipv4Addr::new(198, 18, 1, 254), 1));
    }

    #[test]
    fn emit_refuses_a_total_length_the_buffer_or_header_cannot_hold() {
        let mut v = [0xa5u8; 27];
        let src = Ipv4Addr::new(198, 18, 0, 1);
        assert_eq!(
            Ipv4Packet::emit(&mut v[..], 28, 0, 64, PROTO_UDP, src, src).unwrap_err(),
            Error::Truncated { len: 27, need: 28 }
        );
        assert!(Ipv4Packet::emit(&mut v[..], 19, 0, 64, PROTO_UDP, src, src).is_err());
        assert!(Ipv4Packet::emit(&mut v[..19], 19, 0, 64, PROTO_UDP, src, src).is_err());
        assert_eq!(v, [0xa5; 27], "nothing written");
        assert!(Ipv4Packet::emit(&mut v[..], 20, 0, 64, PROTO_UDP, src, src).is_ok());
    }

    #[test]
    fn tos_reads_and_writes_byte_one_keeping_the_checksum_valid() {
        for tos in [0u8, 0x02, 0x10, 0xc0 | 0x1e, 0xff] {
            let mut v = packet(64, 4);
            v[1] = 0x2c;
            let c = checksum::checksum(&{
                let mut h = v[..20].to_vec();
                h[10..12].copy_from_slice(&[0, 0]);
                h
            });
            v[10..12].copy_from_slice(&c.to_be_bytes());
            let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
            assert_eq!(p.tos(), 0x2c);
            p.set_tos(tos);
            assert_eq!(p.tos(), tos);
            assert!(p.checksum_ok(), "tos {tos:#x}");
            assert_eq!(v[1], tos);
            let (h, _) = Ipv4Header::from_slice(&v).unwrap();
            assert_eq!((h.dscp.value(), h.ecn.value()), (tos >> 2, tos & 3));
        }
    }

    #[test]
    fn payload_mut_is_the_bytes_between_header_and_total_length() {
        let mut v = packet(64, 8);
        v.extend_from_slice(&[0xee; 6]); // Ethernet padding: not payload
        let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
        assert_eq!(p.payload_mut().len(), 8);
        p.payload_mut().fill(0x11);
        assert_eq!(p.payload(), &[0x11; 8]);
        assert_eq!(&v[20..28], &[0x11; 8]);
        assert_eq!(&v[28..], &[0xee; 6]);
        // With options, the payload starts after them.
        let mut v = packet(64, 8);
        v[0] = 0x46;
        let mut p = Ipv4Packet::new_checked(&mut v[..]).unwrap();
        assert_eq!(p.payload_mut().len(), 4);
        p.payload_mut()[0] = 0x77;
        assert_eq!(v[24], 0x77);
    }

    #[test]
    fn peek_dst_reads_bytes_16_to_20_of_anything_long_enough() {
        let v = packet(64, 0);
        assert_eq!(peek_dst(&v), Some(Ipv4Addr::new(198, 19, 0, 1)));
        let junk: Vec<u8> = (0..20).collect();
        assert_eq!(peek_dst(&junk), Some(Ipv4Addr::new(16, 17, 18, 19)), "no check that it is IPv4");
        assert_eq!(peek_dst(&junk[..19]), None);
        assert_eq!(peek_dst(&[]), None);
    }

    #[test]
    fn constants_agree_with_etherparse() {
        assert_eq!(MIN_HEADER_LEN, Ipv4Header::MIN_LEN);
        assert_eq!(MAX_HEADER_LEN, Ipv4Header::MAX_LEN);
        assert_eq!(PROTO_ICMP, u8::from(IpNumber::ICMP));
        assert_eq!(PROTO_TCP, u8::from(IpNumber::TCP));
        assert_eq!(PROTO_UDP, u8::from(IpNumber::UDP));
        assert_eq!(TOS_BITS | PRECEDENCE_INTERNETWORK_CONTROL, 0b1101_1110);
    }
}
