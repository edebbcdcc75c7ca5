//! Ethernet II frames (IEEE 802.3 MAC header), optionally 802.1Q tagged.
//!
//! The bridge needs the two addresses only: it forwards tagged and untagged frames alike
//! (transparent to VLANs), so the tag is exposed for callers that care, not interpreted here.

use core::fmt;

use super::Error;

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
    pub const HEADER_LEN: usize = PAYLOAD.start;
}

/// Length of an untagged Ethernet header.
pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Length of an 802.1Q tag (TPID and TCI), inserted before the EtherType.
pub const VLAN_TAG_LEN: usize = 4;
/// Ethernet's minimum frame without the FCS: shorter frames are sent padded to it.
pub const MIN_FRAME_LEN: usize = 60;

/// The EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// The EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// The EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// The 802.1Q tag protocol identifier.
pub const ETHERTYPE_VLAN: u16 = 0x8100;

/// A 48-bit IEEE 802 MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The group bit (I/G) is set: broadcast or multicast.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// All zeroes: never a valid station address.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 6]
    }

    /// 01:80:C2:00:00:01 to 01:80:C2:00:00:0F: IEEE 802.1D link-local groups (PAUSE, LACP,
    /// 802.1X, LLDP, ...) that a bridge never forwards. 01:80:C2:00:00:00 (STP) is not in it.
    #[inline]
    pub fn is_reserved_link_local(&self) -> bool {
        let a = &self.0;
        a[..5] == [0x01, 0x80, 0xC2, 0x00, 0x00] && (0x01..=0x0F).contains(&a[5])
    }

    /// The address as the low 48 bits of a `u64`, first octet most significant.
    #[inline]
    pub fn to_u64(self) -> u64 {
        let a = self.0;
        u64::from_be_bytes([0, 0, a[0], a[1], a[2], a[3], a[4], a[5]])
    }

    /// The inverse of [`MacAddr::to_u64`]; bits above 48 are ignored.
    #[inline]
    pub fn from_u64(v: u64) -> MacAddr {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", a[0], a[1], a[2], a[3], a[4], a[5])
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error parsing a MAC address from text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a MAC address (expected six hex octets such as 02:00:00:00:00:01)")]
pub struct ParseMacError(String);

impl core::str::FromStr for MacAddr {
    type Err = ParseMacError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let part = parts.next().ok_or_else(|| ParseMacError(s.to_owned()))?;
            if part.is_empty() || part.len() > 2 {
                return Err(ParseMacError(s.to_owned()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| ParseMacError(s.to_owned()))?;
        }
        if parts.next().is_some() {
            return Err(ParseMacError(s.to_owned()));
        }
        Ok(MacAddr(out))
    }
}

/// The network layer of a frame, found through at most one 802.1Q tag: its EtherType, where its
/// header starts in the frame, and the tag's VLAN ID (0 when untagged). `None` when the frame is
/// too short for the Ethernet header (and the tag, if there is one). A second tag is not looked
/// through: the frame is then reported with EtherType [`ETHERTYPE_VLAN`].
#[inline]
pub fn network_layer(frame: &[u8]) -> Option<(u16, usize, u16)> {
    let et = field::ETHERTYPE.start;
    let outer = u16::from_be_bytes([*frame.get(et)?, *frame.get(et + 1)?]);
    if outer != ETHERTYPE_VLAN {
        return Some((outer, HEADER_LEN, 0));
    }
    let tci = u16::from_be_bytes([*frame.get(HEADER_LEN)?, *frame.get(HEADER_LEN + 1)?]);
    let inner = u16::from_be_bytes([*frame.get(HEADER_LEN + 2)?, *frame.get(HEADER_LEN + 3)?]);
    Some((inner, HEADER_LEN + VLAN_TAG_LEN, tci & 0x0fff))
}

/// A view of an Ethernet frame. After [`EthernetFrame::new_checked`] no accessor panics.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` after checking that it holds a whole Ethernet header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let len = buffer.as_ref().len();
        if len < field::HEADER_LEN {
            return Err(Error::Truncated { len, need: field::HEADER_LEN });
        }
        Ok(EthernetFrame { buffer })
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> MacAddr {
        let b = self.buffer.as_ref();
        let d = field::DST.start;
        MacAddr([b[d], b[d + 1], b[d + 2], b[d + 3], b[d + 4], b[d + 5]])
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> MacAddr {
        let b = &self.buffer.as_ref()[field::SRC];
        MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// EtherType (or TPID when tagged).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// What follows the header (for a tagged frame, the tag's TCI comes first).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }

    /// The whole frame, header included.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Unwraps the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    #[inline]
    pub fn set_dst(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac.0);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac.0);
    }

    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, ethertype: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
    }

    /// What follows the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_buffer_is_refused() {
        assert_eq!(EthernetFrame::new_checked(&[0u8; 13][..]).unwrap_err(), Error::Truncated { len: 13, need: 14 });
        assert!(EthernetFrame::new_checked(&[0u8; 14][..]).is_ok());
    }

    #[test]
    fn fields_read_and_write_by_offset() {
        let mut buf = [0u8; 60];
        buf[..6].copy_from_slice(&[0xff; 6]);
        buf[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        buf[12..14].copy_from_slice(&[0x81, 0x00]);
        buf[14..18].copy_from_slice(&[0x00, 0x07, 0x08, 0x00]);
        buf[59] = 0xee;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        assert_eq!(f.dst(), MacAddr::BROADCAST);
        assert_eq!(f.src(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.ethertype(), ETHERTYPE_VLAN);
        assert_eq!(f.payload().len(), 46);
        assert_eq!((&f.payload()[..4], f.payload()[45]), (&[0x00, 0x07, 0x08, 0x00][..], 0xee));
        f.set_dst(MacAddr([2, 0, 0, 0, 0, 9]));
        f.set_src(MacAddr([2, 0, 0, 0, 0, 8]));
        f.set_ethertype(ETHERTYPE_IPV4);
        f.payload_mut()[0] = 0x45;
        f.payload_mut()[45] = 0xdd;
        assert_eq!(&buf[..15], &[2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x08, 0x00, 0x45]);
        assert_eq!(buf[59], 0xdd);
        // A bare header has an empty payload.
        assert!(EthernetFrame::new_checked(&[0u8; 14][..]).unwrap().payload().is_empty());
    }

    #[test]
    fn constants_agree_with_etherparse() {
        use etherparse::{EtherType, Ethernet2Header, SingleVlanHeader};
        assert_eq!(HEADER_LEN, Ethernet2Header::LEN);
        assert_eq!(VLAN_TAG_LEN, SingleVlanHeader::LEN);
        assert_eq!(ETHERTYPE_IPV4, u16::from(EtherType::IPV4));
        assert_eq!(ETHERTYPE_ARP, u16::from(EtherType::ARP));
        assert_eq!(ETHERTYPE_IPV6, u16::from(EtherType::IPV6));
        assert_eq!(ETHERTYPE_VLAN, u16::from(EtherType::VLAN_TAGGED_FRAME));
        // As etherparse writes them, the views read them.
        let mut v = Vec::new();
        Ethernet2Header { source: [2, 0, 0, 0, 0, 1], destination: [2, 0, 0, 0, 0, 2], ether_type: EtherType::ARP }
            .write(&mut v)
            .unwrap();
        let f = EthernetFrame::new_checked(&v[..]).unwrap();
        assert_eq!(
            (f.src(), f.dst(), f.ethertype()),
            (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]), 0x0806)
        );
    }

    #[test]
    fn network_layer_looks_through_one_tag() {
        let mut buf = [0u8; 22];
        buf[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        assert_eq!(network_layer(&buf), Some((ETHERTYPE_IPV4, 14, 0)));
        assert_eq!(network_layer(&buf[..13]), None);
        // Priority 5, VLAN 0x123, IPv6 inside.
        buf[12..18].copy_from_slice(&[0x81, 0x00, 0xa1, 0x23, 0x86, 0xdd]);
        assert_eq!(network_layer(&buf), Some((ETHERTYPE_IPV6, 18, 0x123)));
        assert_eq!(network_layer(&buf[..17]), None, "the tag must fit");
        // A second tag is reported, not looked through.
        buf[16..18].copy_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
        assert_eq!(network_layer(&buf), Some((ETHERTYPE_VLAN, 18, 0x123)));
    }

    #[test]
    fn address_classes() {
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!MacAddr([2, 0, 0, 0, 0, 1]).is_multicast());
        assert!(MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x0E]).is_reserved_link_local());
        assert!(MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x01]).is_reserved_link_local());
        assert!(MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x0F]).is_reserved_link_local());
        assert!(!MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x00]).is_reserved_link_local(), "STP is forwarded");
        assert!(!MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x10]).is_reserved_link_local());
        assert!(MacAddr([0; 6]).is_zero());
    }

    #[test]
    fn u64_round_trip_and_text() {
        let m: MacAddr = "02:ab:cd:ef:01:23".parse().unwrap();
        assert_eq!(m.to_u64(), 0x02ab_cdef_0123);
        assert_eq!(MacAddr::from_u64(m.to_u64()), m);
        assert_eq!(m.to_string(), "02:ab:cd:ef:01:23");
        assert!("02:ab:cd:ef:01".parse::<MacAddr>().is_err());
        assert!("02:ab:cd:ef:01:23:45".parse::<MacAddr>().is_err());
        assert!("02:ab:cd:ef:01:zz".parse::<MacAddr>().is_err());
    }
}
