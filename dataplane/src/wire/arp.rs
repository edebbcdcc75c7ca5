//! ARP for IPv4 over Ethernet (RFC 826): the 28-byte packet after the Ethernet header.

use core::net::Ipv4Addr;

use super::ethernet::{self, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use super::{Error, EthernetFrame, MacAddr};

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = field::TPA.end;
/// The hardware type of Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;
/// ARP request.
pub const OP_REQUEST: u16 = 1;
/// ARP reply.
pub const OP_REPLY: u16 = 2;
/// Hardware and protocol address lengths of Ethernet/IPv4 ARP.
const HLEN_ETHERNET: u8 = 6;
const PLEN_IPV4: u8 = 4;

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` after checking its length and that it is Ethernet (1) / IPv4 (0x0800)
    /// with 6-byte and 4-byte addresses.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        if b.len() < LEN {
            return Err(Error::Truncated { len: b.len(), need: LEN });
        }
        if b[field::HTYPE] != HTYPE_ETHERNET.to_be_bytes()
            || b[field::PTYPE] != ETHERTYPE_IPV4.to_be_bytes()
            || b[field::HLEN] != HLEN_ETHERNET
            || b[field::PLEN] != PLEN_IPV4
        {
            return Err(Error::Malformed("not Ethernet/IPv4 ARP"));
        }
        Ok(ArpPacket { buffer })
    }

    /// Operation (request 1, reply 2).
    #[inline]
    pub fn op(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::OPER];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Sender hardware address.
    #[inline]
    pub fn sha(&self) -> MacAddr {
        let b = &self.buffer.as_ref()[field::SHA];
        MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Sender protocol address.
    #[inline]
    pub fn spa(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SPA];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Target hardware address.
    #[inline]
    pub fn tha(&self) -> MacAddr {
        let b = &self.buffer.as_ref()[field::THA];
        MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Target protocol address.
    #[inline]
    pub fn tpa(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::TPA];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes a whole Ethernet/IPv4 ARP packet at the start of `buffer` and wraps it: the checked
    /// constructor of a packet being built. Fails, writing nothing, when `buffer` is shorter than
    /// [`LEN`].
    pub fn emit(
        mut buffer: T,
        op: u16,
        sha: MacAddr,
        spa: Ipv4Addr,
        tha: MacAddr,
        tpa: Ipv4Addr,
    ) -> Result<Self, Error> {
        let len = buffer.as_ref().len();
        if len < LEN {
            return Err(Error::Truncated { len, need: LEN });
        }
        let b = buffer.as_mut();
        b[field::HTYPE].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        b[field::PTYPE].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        b[field::HLEN] = HLEN_ETHERNET;
        b[field::PLEN] = PLEN_IPV4;
        let mut p = ArpPacket { buffer };
        p.set_op(op);
        p.set_sha(sha);
        p.set_spa(spa);
        p.set_tha(tha);
        p.set_tpa(tpa);
        Ok(p)
    }

    /// Sets the operation.
    #[inline]
    pub fn set_op(&mut self, op: u16) {
        self.buffer.as_mut()[field::OPER].copy_from_slice(&op.to_be_bytes());
    }

    /// Sets the sender hardware address.
    #[inline]
    pub fn set_sha(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&mac.0);
    }

    /// Sets the sender protocol address.
    #[inline]
    pub fn set_spa(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&addr.octets());
    }

    /// Sets the target hardware address.
    #[inline]
    pub fn set_tha(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&mac.0);
    }

    /// Sets the target protocol address.
    #[inline]
    pub fn set_tpa(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&addr.octets());
    }
}

/// Writes a whole Ethernet frame carrying an ARP packet into `out` (at least 42 bytes) and
/// returns its length (padded to the 60-byte Ethernet minimum when `out` allows).
#[allow(clippy::too_many_arguments, reason = "the eight fields of an ARP frame")]
pub fn write_frame(
    out: &mut [u8],
    eth_dst: MacAddr,
    eth_src: MacAddr,
    op: u16,
    sha: MacAddr,
    spa: Ipv4Addr,
    tha: MacAddr,
    tpa: Ipv4Addr,
) -> usize {
    let len = ethernet::HEADER_LEN + LEN;
    // Slicing first keeps the documented contract: a buffer shorter than the frame panics here,
    // and with it both views below are sure to wrap.
    if let Ok(mut eth) = EthernetFrame::new_checked(&mut out[..len]) {
        eth.set_dst(eth_dst);
        eth.set_src(eth_src);
        eth.set_ethertype(ETHERTYPE_ARP);
        let _ = ArpPacket::emit(eth.payload_mut(), op, sha, spa, tha, tpa);
    }
    let padded = ethernet::MIN_FRAME_LEN.min(out.len());
    out[len..padded].fill(0);
    padded.max(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{ArpHardwareId, ArpOperation, ArpPacketSlice, EtherType, Ethernet2Header};

    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    #[test]
    fn written_frames_parse_with_etherparse_and_back() {
        let mut buf = [0xa5u8; 64];
        let n = write_frame(
            &mut buf,
            MacAddr::BROADCAST,
            ME,
            OP_REQUEST,
            ME,
            Ipv4Addr::new(198, 18, 0, 254),
            MacAddr([0; 6]),
            Ipv4Addr::new(198, 18, 0, 1),
        );
        assert_eq!(n, 60);
        assert_eq!(&buf[42..60], &[0; 18], "padded with zeroes");
        assert_eq!(&buf[60..], &[0xa5; 4], "nothing written past the minimum frame");
        let (e, _) = Ethernet2Header::from_slice(&buf).unwrap();
        assert_eq!((e.destination, e.source, e.ether_type), ([0xff; 6], ME.0, EtherType::ARP));
        let a = ArpPacketSlice::from_slice(&buf[14..42]).unwrap();
        assert_eq!(a.hw_addr_type(), ArpHardwareId::ETHERNET);
        assert_eq!(a.proto_addr_type(), EtherType::IPV4);
        assert_eq!(a.operation(), ArpOperation::REQUEST);
        assert_eq!(a.sender_hw_addr(), &ME.0);
        assert_eq!(a.sender_protocol_addr(), &[198, 18, 0, 254]);
        assert_eq!(a.target_hw_addr(), &[0; 6]);
        assert_eq!(a.target_protocol_addr(), &[198, 18, 0, 1]);
        let p = ArpPacket::new_checked(&buf[14..n]).unwrap();
        assert_eq!(p.op(), OP_REQUEST);
        assert_eq!(p.sha(), ME);
        assert_eq!(p.spa(), Ipv4Addr::new(198, 18, 0, 254));
        assert_eq!(p.tha(), MacAddr([0; 6]));
        assert_eq!(p.tpa(), Ipv4Addr::new(198, 18, 0, 1));
        // A buffer shorter than the minimum frame is filled, not overrun.
        let mut short = [0xa5u8; 50];
        let args = (MacAddr::BROADCAST, ME, OP_REPLY, ME, Ipv4Addr::LOCALHOST, ME, Ipv4Addr::LOCALHOST);
        let n = write_frame(&mut short, args.0, args.1, args.2, args.3, args.4, args.5, args.6);
        assert_eq!(n, 50);
        assert_eq!(&short[42..], &[0; 8]);
    }

    #[test]
    fn non_ethernet_ipv4_arp_is_refused() {
        let mut buf = [0u8; 64];
        write_frame(
            &mut buf,
            MacAddr::BROADCAST,
            MacAddr([2; 6]),
            1,
            MacAddr([2; 6]),
            Ipv4Addr::LOCALHOST,
            MacAddr([0; 6]),
            Ipv4Addr::LOCALHOST,
        );
        assert_eq!(ArpPacket::new_checked(&buf[14..41]).unwrap_err(), Error::Truncated { len: 27, need: 28 });
        assert!(ArpPacket::new_checked(&buf[14..42]).is_ok());
        for (at, value) in [(0, 1), (1, 6), (2, 0x86), (3, 0xdd), (4, 8), (5, 16)] {
            let mut bad = buf;
            bad[14 + at] = value;
            assert!(ArpPacket::new_checked(&bad[14..42]).is_err(), "byte {at} = {value}");
        }
    }

    #[test]
    fn fields_read_and_write_by_offset() {
        let mut v: Vec<u8> = (0..30).collect();
        v[..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
        let mut p = ArpPacket::new_checked(&mut v[..]).unwrap();
        assert_eq!(p.op(), 0x0607);
        assert_eq!(p.sha(), MacAddr([8, 9, 10, 11, 12, 13]));
        assert_eq!(p.spa(), Ipv4Addr::new(14, 15, 16, 17));
        assert_eq!(p.tha(), MacAddr([18, 19, 20, 21, 22, 23]));
        assert_eq!(p.tpa(), Ipv4Addr::new(24, 25, 26, 27));
        p.set_op(OP_REPLY);
        p.set_sha(MacAddr([0xa0; 6]));
        p.set_spa(Ipv4Addr::new(0xb0, 0xb1, 0xb2, 0xb3));
        p.set_tha(MacAddr([0xc0; 6]));
        p.set_tpa(Ipv4Addr::new(0xd0, 0xd1, 0xd2, 0xd3));
        let mut want = vec![0, 1, 8, 0, 6, 4, 0, 2];
        want.extend_from_slice(&[0xa0; 6]);
        want.extend_from_slice(&[0xb0, 0xb1, 0xb2, 0xb3]);
        want.extend_from_slice(&[0xc0; 6]);
        want.extend_from_slice(&[0xd0, 0xd1, 0xd2, 0xd3]);
        want.extend_from_slice(&[28, 29]);
        assert_eq!(v, want, "each field at its offset, nothing past the packet");
    }

    #[test]
    fn emit_writes_a_whole_packet_and_refuses_short_buffers() {
        let mut v = [0xa5u8; 28];
        let tha = MacAddr([0; 6]);
        let (spa, tpa) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(
            ArpPacket::emit(&mut v[..27], OP_REQUEST, ME, spa, tha, tpa).unwrap_err(),
            Error::Truncated { len: 27, need: 28 }
        );
        assert_eq!(v, [0xa5; 28], "nothing written");
        let p = ArpPacket::emit(&mut v[..], OP_REPLY, ME, spa, tha, tpa).unwrap();
        assert_eq!((p.op(), p.sha(), p.spa(), p.tha(), p.tpa()), (OP_REPLY, ME, spa, tha, tpa));
        let a = ArpPacketSlice::from_slice(&v).unwrap();
        assert_eq!((a.hw_addr_type(), a.proto_addr_type()), (ArpHardwareId::ETHERNET, EtherType::IPV4));
        assert_eq!((a.hw_addr_size(), a.proto_addr_size()), (6, 4));
        assert!(ArpPacket::new_checked(&v[..]).is_ok());
    }

    #[test]
    fn constants_agree_with_etherparse() {
        assert_eq!(HTYPE_ETHERNET, u16::from(ArpHardwareId::ETHERNET));
        assert_eq!((OP_REQUEST, OP_REPLY), (ArpOperation::REQUEST.0, ArpOperation::REPLY.0));
    }
}
