//! ARP for IPv4 over Ethernet (RFC 826): the 28-byte packet after the Ethernet header.

use core::net::Ipv4Addr;

use super::{Error, MacAddr};

/// Length of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = 28;
/// ARP request.
pub const OP_REQUEST: u16 = 1;
/// ARP reply.
pub const OP_REPLY: u16 = 2;

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` after checking its length and that it is Ethernet (1) / IPv4 (0x0800)
    /// with 6-byte and 4-byte addresses.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        if b.len() < LEN {
            return Err(Error::Truncated { len: b.len(), need: LEN });
        }
        if b[0..2] != [0, 1] || b[2..4] != [0x08, 0x00] || b[4] != 6 || b[5] != 4 {
            return Err(Error::Malformed("not Ethernet/IPv4 ARP"));
        }
        Ok(ArpPacket { buffer })
    }

    /// Operation (request 1, reply 2).
    pub fn op(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[6], b[7]])
    }

    /// Sender hardware address.
    pub fn sha(&self) -> MacAddr {
        let b = &self.buffer.as_ref()[8..14];
        MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Sender protocol address.
    pub fn spa(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[14..18];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Target hardware address.
    pub fn tha(&self) -> MacAddr {
        let b = &self.buffer.as_ref()[18..24];
        MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// Target protocol address.
    pub fn tpa(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[24..28];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
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
    out[0..6].copy_from_slice(&eth_dst.0);
    out[6..12].copy_from_slice(&eth_src.0);
    out[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let a = &mut out[14..14 + LEN];
    a[0..2].copy_from_slice(&1u16.to_be_bytes());
    a[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
    a[4] = 6;
    a[5] = 4;
    a[6..8].copy_from_slice(&op.to_be_bytes());
    a[8..14].copy_from_slice(&sha.0);
    a[14..18].copy_from_slice(&spa.octets());
    a[18..24].copy_from_slice(&tha.0);
    a[24..28].copy_from_slice(&tpa.octets());
    let len = 14 + LEN;
    let padded = 60.min(out.len());
    out[len..padded].fill(0);
    padded.max(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{ArpHardwareId, ArpOperation, ArpPacketSlice, EtherType};

    #[test]
    fn written_frames_parse_with_etherparse_and_back() {
        let mut buf = [0u8; 64];
        let me = MacAddr([2, 0, 0, 0, 0, 1]);
        let n = write_frame(
            &mut buf,
            MacAddr::BROADCAST,
            me,
            OP_REQUEST,
            me,
            Ipv4Addr::new(198, 18, 0, 254),
            MacAddr([0; 6]),
            Ipv4Addr::new(198, 18, 0, 1),
        );
        assert_eq!(n, 60);
        let a = ArpPacketSlice::from_slice(&buf[14..42]).unwrap();
        assert_eq!(a.hw_addr_type(), ArpHardwareId::ETHERNET);
        assert_eq!(a.proto_addr_type(), EtherType::IPV4);
        assert_eq!(a.operation(), ArpOperation::REQUEST);
        assert_eq!(a.sender_hw_addr(), &me.0);
        assert_eq!(a.target_protocol_addr(), &[198, 18, 0, 1]);
        let p = ArpPacket::new_checked(&buf[14..n]).unwrap();
        assert_eq!(p.op(), OP_REQUEST);
        assert_eq!(p.sha(), me);
        assert_eq!(p.spa(), Ipv4Addr::new(198, 18, 0, 254));
        assert_eq!(p.tha(), MacAddr([0; 6]));
        assert_eq!(p.tpa(), Ipv4Addr::new(198, 18, 0, 1));
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
        assert!(ArpPacket::new_checked(&buf[14..41]).is_err());
        buf[14 + 4] = 8;
        assert!(ArpPacket::new_checked(&buf[14..42]).is_err());
    }
}
