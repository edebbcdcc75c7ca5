//! ICMPv6 (RFC 4443) and the neighbour discovery messages the router speaks (RFC 4861:
//! Neighbor Solicitation and Advertisement with their link-layer address options).
//!
//! [`Icmpv6Packet::new_checked`] checks the fixed header; the checksum covers a pseudo-header,
//! so checking and writing it take the addresses ([`Icmpv6Packet::checksum_ok`],
//! [`Icmpv6Packet::fill_checksum`]). [`Ndp::parse`] reads a solicitation or advertisement and
//! applies the validity checks of RFC 4861 sections 7.1.1 and 7.1.2 that the message itself
//! can show (hop limit, code, length, target, options); [`write_ns`] and [`write_na`] build them.

use core::net::Ipv6Addr;

use super::{checksum, ipv6, Error, MacAddr};

mod field {
    pub use super::super::icmp_field::*;
    use core::ops::Range;
    /// The target address of a solicitation or advertisement.
    pub const TARGET: Range<usize> = 8..24;
    /// Where their options start.
    pub const OPTIONS: usize = 24;
}

/// Destination Unreachable.
pub const DEST_UNREACHABLE: u8 = 1;
/// Packet Too Big.
pub const PACKET_TOO_BIG: u8 = 2;
/// Time Exceeded.
pub const TIME_EXCEEDED: u8 = 3;
/// Parameter Problem.
pub const PARAMETER_PROBLEM: u8 = 4;
/// Echo Request.
pub const ECHO_REQUEST: u8 = 128;
/// Echo Reply.
pub const ECHO_REPLY: u8 = 129;
/// Router Solicitation.
pub const ROUTER_SOLICITATION: u8 = 133;
/// Router Advertisement.
pub const ROUTER_ADVERTISEMENT: u8 = 134;
/// Neighbor Solicitation.
pub const NEIGHBOR_SOLICITATION: u8 = 135;
/// Neighbor Advertisement.
pub const NEIGHBOR_ADVERTISEMENT: u8 = 136;
/// Redirect.
pub const REDIRECT: u8 = 137;

/// Destination Unreachable: no route to destination.
pub const CODE_NO_ROUTE: u8 = 0;
/// Destination Unreachable: administratively prohibited.
pub const CODE_PROHIBITED: u8 = 1;
/// Destination Unreachable: beyond scope of source address.
pub const CODE_BEYOND_SCOPE: u8 = 2;
/// Destination Unreachable: address unreachable.
pub const CODE_ADDRESS_UNREACHABLE: u8 = 3;
/// Time Exceeded: hop limit exceeded in transit.
pub const CODE_HOP_LIMIT: u8 = 0;

/// Length of the header (type, code, checksum, one word).
pub const HEADER_LEN: usize = field::PAYLOAD.start;
/// Length of a solicitation or advertisement without options.
pub const NDP_LEN: usize = field::OPTIONS;
/// Length of one link-layer address option for Ethernet (8 bytes: type, length, MAC).
pub const LLADDR_OPTION_LEN: usize = 8;
/// The hop limit every neighbour discovery message is sent and must be received with.
pub const NDP_HOP_LIMIT: u8 = 255;

/// Source link-layer address option.
const OPT_SOURCE_LLADDR: u8 = 1;
/// Target link-layer address option.
const OPT_TARGET_LLADDR: u8 = 2;

/// Neighbor Advertisement flags (the top bits of the word after the checksum).
pub const NA_ROUTER: u32 = 1 << 31;
/// Solicited: an answer to a solicitation.
pub const NA_SOLICITED: u32 = 1 << 30;
/// Override: replaces a cached link-layer address.
pub const NA_OVERRIDE: u32 = 1 << 29;

/// Whether an ICMPv6 type is an error message (RFC 4443 section 2.1: types below 128).
#[inline]
pub fn is_error(msg_type: u8) -> bool {
    msg_type < 128
}

/// The solicited-node multicast address of `a` (RFC 4291 section 2.7.1): ff02::1:ff00:0/104
/// with the low 24 bits of `a`.
pub fn solicited_node(a: &Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]])
}

/// The Ethernet group address an IPv6 multicast address maps to (RFC 2464 section 7):
/// 33:33 and the low 32 bits.
pub fn multicast_mac(a: &Ipv6Addr) -> MacAddr {
    let o = a.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// A view of an ICMPv6 message.
#[derive(Debug, Clone, Copy)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

icmp_view!(Icmpv6Packet);

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Whether the message is an error.
    #[inline]
    pub fn is_error(&self) -> bool {
        is_error(self.msg_type())
    }

    /// Whether the checksum over the pseudo-header of `src` → `dst` and the whole message
    /// verifies (always true when fuzzing).
    pub fn checksum_ok(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        let acc = ipv6::pseudo_header_sum(src, dst, b.len() as u32, ipv6::NEXT_HEADER_ICMPV6);
        cfg!(fuzzing) || checksum::fold(acc + u64::from(checksum::sum(b))) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Writes type, code and the word after the checksum.
    pub fn set_header(&mut self, msg_type: u8, code: u8, rest: u32) {
        let b = self.buffer.as_mut();
        b[field::TYPE] = msg_type;
        b[field::CODE] = code;
        b[field::REST].copy_from_slice(&rest.to_be_bytes());
    }

    /// Computes the checksum over the pseudo-header of `src` → `dst` and the whole buffer
    /// (which must be the whole message).
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let acc = ipv6::pseudo_header_sum(src, dst, b.len() as u32, ipv6::NEXT_HEADER_ICMPV6);
        let c = !checksum::fold(acc + u64::from(checksum::sum(b)));
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// A neighbour discovery message, as [`Ndp::parse`] read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ndp {
    /// Neighbor Solicitation: who has `target`; `source_mac` from its option, if any.
    Solicitation {
        /// The address asked for.
        target: Ipv6Addr,
        /// The sender's link-layer address option.
        source_mac: Option<MacAddr>,
    },
    /// Neighbor Advertisement: `target` is at `target_mac` (if the option is there).
    Advertisement {
        /// The address advertised.
        target: Ipv6Addr,
        /// The target link-layer address option.
        target_mac: Option<MacAddr>,
        /// The Router, Solicited and Override flags ([`NA_ROUTER`] …).
        flags: u32,
    },
}

impl Ndp {
    /// Reads a solicitation or advertisement `msg` (the whole ICMPv6 message) carried from
    /// `src` to `dst` with `hop_limit`, with the checks of RFC 4861 sections 7.1.1 and 7.1.2
    /// (the checksum is the caller's: it needs the same addresses). `None` for anything else
    /// or anything invalid, which the RFC says to discard silently.
    pub fn parse(msg: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr, hop_limit: u8) -> Option<Ndp> {
        if hop_limit != NDP_HOP_LIMIT || msg.len() < NDP_LEN || msg[field::CODE] != 0 {
            return None;
        }
        let target = Ipv6Addr::from(<[u8; 16]>::try_from(&msg[field::TARGET]).ok()?);
        if target.is_multicast() {
            return None;
        }
        // Options: type, length in units of 8 bytes (never 0), value.
        let (mut slla, mut tlla) = (None, None);
        let mut opts = &msg[field::OPTIONS..];
        while !opts.is_empty() {
            if opts.len() < 2 || opts[1] == 0 || opts.len() < usize::from(opts[1]) * 8 {
                return None;
            }
            let len = usize::from(opts[1]) * 8;
            if matches!(opts[0], OPT_SOURCE_LLADDR | OPT_TARGET_LLADDR) {
                // On Ethernet a link-layer address option is 8 bytes; another length makes
                // the whole message invalid, as the kernel takes it (ndisc_opt_addr_data).
                if len != LLADDR_OPTION_LEN {
                    return None;
                }
                let mac = MacAddr(<[u8; 6]>::try_from(&opts[2..8]).ok()?);
                if opts[0] == OPT_SOURCE_LLADDR {
                    slla = Some(mac);
                } else {
                    tlla = Some(mac);
                }
            }
            opts = &opts[len..];
        }
        let rest = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
        match msg[field::TYPE] {
            NEIGHBOR_SOLICITATION => {
                // From the unspecified address (duplicate address detection): only to a
                // solicited-node group, and with no source link-layer address.
                if src.is_unspecified() && (*dst != solicited_node(&target) || slla.is_some()) {
                    return None;
                }
                Some(Ndp::Solicitation { target, source_mac: slla })
            }
            NEIGHBOR_ADVERTISEMENT => {
                // An advertisement to a group is never solicited.
                if dst.is_multicast() && rest & NA_SOLICITED != 0 {
                    return None;
                }
                Some(Ndp::Advertisement {
                    target,
                    target_mac: tlla,
                    flags: rest & (NA_ROUTER | NA_SOLICITED | NA_OVERRIDE),
                })
            }
            _ => None,
        }
    }
}

/// Writes a Neighbor Solicitation for `target` with a source link-layer address option of
/// `mac` into `buf` (at least [`NDP_LEN`] + [`LLADDR_OPTION_LEN`] bytes), checksummed for
/// `src` → `dst`. Returns its length.
pub fn write_ns(
    buf: &mut [u8],
    target: &Ipv6Addr,
    mac: MacAddr,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) -> Result<usize, Error> {
    write_nd(buf, NEIGHBOR_SOLICITATION, 0, target, OPT_SOURCE_LLADDR, mac, src, dst)
}

/// Writes a Neighbor Advertisement for `target` with `flags` and a target link-layer address
/// option of `mac` into `buf`, checksummed for `src` → `dst`. Returns its length.
pub fn write_na(
    buf: &mut [u8],
    target: &Ipv6Addr,
    flags: u32,
    mac: MacAddr,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) -> Result<usize, Error> {
    write_nd(buf, NEIGHBOR_ADVERTISEMENT, flags, target, OPT_TARGET_LLADDR, mac, src, dst)
}

#[allow(clippy::too_many_arguments, reason = "the two public writers name them")]
fn write_nd(
    buf: &mut [u8],
    msg_type: u8,
    rest: u32,
    target: &Ipv6Addr,
    option: u8,
    mac: MacAddr,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) -> Result<usize, Error> {
    let len = NDP_LEN + LLADDR_OPTION_LEN;
    let Some(b) = buf.get_mut(..len) else {
        return Err(Error::Truncated { len: buf.len(), need: len });
    };
    b[field::TARGET].copy_from_slice(&target.octets());
    b[field::OPTIONS] = option;
    b[field::OPTIONS + 1] = 1;
    b[field::OPTIONS + 2..len].copy_from_slice(&mac.0);
    let mut m = Icmpv6Packet::new_checked(b)?;
    m.set_header(msg_type, 0, rest);
    m.fill_checksum(src, dst);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{Icmpv6Header, Icmpv6Type};

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn solicited_node_groups_and_their_macs() {
        let a = ip("2001:db8::12:3456");
        assert_eq!(solicited_node(&a), ip("ff02::1:ff12:3456"));
        assert_eq!(multicast_mac(&solicited_node(&a)), MacAddr([0x33, 0x33, 0xff, 0x12, 0x34, 0x56]));
        assert!(is_error(PACKET_TOO_BIG) && !is_error(ECHO_REQUEST) && !is_error(NEIGHBOR_SOLICITATION));
    }

    #[test]
    fn checksums_agree_with_etherparse_both_ways() {
        let (src, dst) = (ip("2001:db8::1"), ip("2001:db8:1::2"));
        let payload = [9u8; 13];
        let h = Icmpv6Header::with_checksum(
            Icmpv6Type::EchoRequest(etherparse::IcmpEchoHeader { id: 7, seq: 3 }),
            src.octets(),
            dst.octets(),
            &payload,
        )
        .unwrap();
        let mut msg = h.to_bytes().to_vec();
        msg.extend_from_slice(&payload);
        let m = Icmpv6Packet::new_checked(&msg[..]).unwrap();
        assert!(m.checksum_ok(&src, &dst));
        assert!(!m.checksum_ok(&src, &ip("2001:db8:1::3")), "the pseudo-header counts");
        assert_eq!((m.msg_type(), m.code(), m.rest()), (ECHO_REQUEST, 0, 7 << 16 | 3));
        // Echo reply, in place: the checksum is updated for the swapped addresses too.
        let mut reply = msg.clone();
        Icmpv6Packet::new_checked(&mut reply[..]).unwrap().echo_request_to_reply();
        let (h, rest) = Icmpv6Header::from_slice(&reply).unwrap();
        assert_eq!(h.icmp_type, Icmpv6Type::EchoReply(etherparse::IcmpEchoHeader { id: 7, seq: 3 }));
        assert_eq!(h.checksum, h.icmp_type.calc_checksum(dst.octets(), src.octets(), rest).unwrap());
        // Written from scratch: a Packet Too Big carrying 1400.
        let mut ptb = vec![0u8; HEADER_LEN + 48];
        let mut m = Icmpv6Packet::new_checked(&mut ptb[..]).unwrap();
        m.payload_mut().fill(0x5a);
        m.set_header(PACKET_TOO_BIG, 0, 1400);
        m.fill_checksum(&src, &dst);
        let (h, rest) = Icmpv6Header::from_slice(&ptb).unwrap();
        assert_eq!(h.icmp_type, Icmpv6Type::PacketTooBig { mtu: 1400 });
        assert_eq!(h.checksum, h.icmp_type.calc_checksum(src.octets(), dst.octets(), rest).unwrap());
    }

    #[test]
    fn solicitations_and_advertisements_round_trip_and_parse_as_etherparse_reads_them() {
        let (me, peer) = (ip("2001:db8::1"), ip("2001:db8::2"));
        let mac = MacAddr([2, 0, 0, 0, 4, 4]);
        let group = solicited_node(&peer);
        let mut buf = [0u8; 64];
        let n = write_ns(&mut buf, &peer, mac, &me, &group).unwrap();
        let (h, _) = Icmpv6Header::from_slice(&buf[..n]).unwrap();
        assert!(matches!(h.icmp_type, Icmpv6Type::NeighborSolicitation));
        assert!(Icmpv6Packet::new_checked(&buf[..n]).unwrap().checksum_ok(&me, &group));
        assert_eq!(
            Ndp::parse(&buf[..n], &me, &group, 255),
            Some(Ndp::Solicitation { target: peer, source_mac: Some(mac) })
        );
        let flags = NA_ROUTER | NA_SOLICITED | NA_OVERRIDE;
        let n = write_na(&mut buf, &me, flags, mac, &me, &peer).unwrap();
        let (h, _) = Icmpv6Header::from_slice(&buf[..n]).unwrap();
        assert!(matches!(h.icmp_type, Icmpv6Type::NeighborAdvertisement(_)));
        assert!(Icmpv6Packet::new_checked(&buf[..n]).unwrap().checksum_ok(&me, &peer));
        assert_eq!(
            Ndp::parse(&buf[..n], &me, &peer, 255),
            Some(Ndp::Advertisement { target: me, target_mac: Some(mac), flags })
        );
        assert!(write_ns(&mut buf[..31], &peer, mac, &me, &group).is_err());
    }

    #[test]
    fn invalid_neighbour_discovery_is_refused_as_rfc_4861_says() {
        let (me, peer) = (ip("2001:db8::1"), ip("2001:db8::2"));
        let mac = MacAddr([2, 0, 0, 0, 4, 4]);
        let group = solicited_node(&peer);
        let mut ns = [0u8; 32];
        write_ns(&mut ns, &peer, mac, &me, &group).unwrap();
        assert!(Ndp::parse(&ns, &me, &group, 255).is_some());
        assert_eq!(Ndp::parse(&ns, &me, &group, 254), None, "hop limit not 255: from off-link");
        let mut bad = ns;
        bad[1] = 1;
        assert_eq!(Ndp::parse(&bad, &me, &group, 255), None, "code not 0");
        assert_eq!(Ndp::parse(&ns[..23], &me, &group, 255), None, "shorter than 24 bytes");
        let mut bad = ns;
        bad[8] = 0xff;
        assert_eq!(Ndp::parse(&bad, &me, &group, 255), None, "multicast target");
        let mut bad = ns;
        bad[25] = 0;
        assert_eq!(Ndp::parse(&bad, &me, &group, 255), None, "option of length 0");
        let mut bad = ns;
        bad[25] = 2;
        assert_eq!(Ndp::parse(&bad, &me, &group, 255), None, "option past the end");
        // Duplicate address detection: from ::, only to the solicited-node group, no option.
        let any = Ipv6Addr::UNSPECIFIED;
        assert_eq!(Ndp::parse(&ns, &any, &group, 255), None, "from :: with a source address option");
        assert_eq!(
            Ndp::parse(&ns[..24], &any, &group, 255),
            Some(Ndp::Solicitation { target: peer, source_mac: None })
        );
        assert_eq!(Ndp::parse(&ns[..24], &any, &peer, 255), None, "from :: to a unicast address");
        // An advertisement to a group with the Solicited flag.
        let mut na = [0u8; 32];
        write_na(&mut na, &me, NA_SOLICITED, mac, &me, &peer).unwrap();
        assert!(Ndp::parse(&na, &me, &peer, 255).is_some());
        assert_eq!(Ndp::parse(&na, &me, &ip("ff02::1"), 255), None);
        // A link-layer address option of 16 bytes (length 2): discarded, as the kernel does,
        // rather than answered as though it had none.
        let mut wide = [0u8; 40];
        wide[..32].copy_from_slice(&ns);
        wide[25] = 2;
        assert_eq!(Ndp::parse(&wide, &me, &group, 255), None, "source link-layer option of 16 bytes");
        let mut wide = [0u8; 40];
        wide[..32].copy_from_slice(&na);
        wide[25] = 2;
        assert_eq!(Ndp::parse(&wide, &me, &peer, 255), None, "target link-layer option of 16 bytes");
        // Unknown options are skipped; other ICMPv6 types are not neighbour discovery.
        let mut long = [0u8; 40];
        long[..32].copy_from_slice(&ns);
        long[32] = 14;
        long[33] = 1;
        assert!(Ndp::parse(&long, &me, &group, 255).is_some());
        let mut echo = ns;
        echo[0] = ECHO_REQUEST;
        assert_eq!(Ndp::parse(&echo, &me, &group, 255), None);
    }
}
