//! A frame's flow, and its ECN field.
//!
//! [`flow_key`] says which flow a frame belongs to, for the flow queues:
//!
//! - IPv4 or IPv6 TCP and UDP: the 5-tuple (addresses, protocol, ports);
//! - IPv4 fragments, and every other protocol: the 3-tuple (addresses, protocol). A fragment's
//!   ports are only in the first fragment, so all fragments of a flow share the 3-tuple's queue
//!   and stay in order. IPv6 extension headers are not walked: a packet with one is keyed by
//!   the 3-tuple with the first extension header as its protocol (IPv6 fragments included);
//! - anything else (ARP, IP too short to read): the MAC pair and the EtherType.
//!
//! All of them are looked for through one 802.1Q tag, and the VLAN ID is part of the key, so
//! the same addresses on two VLANs are two flows.
//!
//! [`is_ect`] and [`mark_ce`] read and set the ECN field (RFC 3168) of IPv4 (TOS byte, with the
//! header checksum updated incrementally, RFC 1624) and IPv6 (traffic class), through one tag.
//! All three read the frame by offset through the [`wire`](crate::wire) views and never panic.

use crate::wire::ethernet::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::wire::ipv4::{PROTO_TCP, PROTO_UDP};
use crate::wire::{Ipv4Packet, Ipv6Packet};

/// The ECN field's value for "congestion experienced".
pub const ECN_CE: u8 = 0b11;
/// The ECN field's bits in the IPv4 TOS byte and the IPv6 traffic class.
pub const ECN_MASK: u8 = 0b11;

/// What a [`FlowKey`]'s addresses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum FlowKind {
    /// Not IP (or IP that could not be read): MAC addresses, EtherType in `protocol`'s place
    /// (split over the two port fields, see [`flow_key`]).
    #[default]
    Mac = 0,
    /// IPv4 addresses in the first four bytes of each address field.
    Ipv4 = 1,
    /// IPv6 addresses.
    Ipv6 = 2,
}

/// Which flow a frame belongs to. Fields a kind does not use are zero, so two keys are the same
/// flow exactly when they are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// What the addresses are.
    pub kind: FlowKind,
    /// VLAN ID of the frame's 802.1Q tag (0 when untagged).
    pub vlan: u16,
    /// IP protocol (IPv6: the fixed header's next header); 0 for [`FlowKind::Mac`].
    pub protocol: u8,
    /// Source address: IPv4 in bytes 0..4, MAC in 0..6, IPv6 all 16.
    pub src: [u8; 16],
    /// Destination address, laid out as `src`.
    pub dst: [u8; 16],
    /// TCP or UDP source port (0 for a 3-tuple); for [`FlowKind::Mac`], the EtherType.
    pub src_port: u16,
    /// TCP or UDP destination port (0 for a 3-tuple).
    pub dst_port: u16,
}

impl FlowKey {
    /// A 32-bit hash of the key, keyed by `seed` (so that which flows collide differs from one
    /// box, or one start, to the next). Not cryptographic: it spreads flows over the table.
    #[inline]
    pub fn hash(&self, seed: u64) -> u32 {
        let w = |b: &[u8; 16], i: usize| {
            u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]])
        };
        let rest = u64::from(self.src_port) << 48
            | u64::from(self.dst_port) << 32
            | u64::from(self.vlan) << 16
            | u64::from(self.protocol) << 8
            | self.kind as u64;
        let mut h = seed ^ 0x243f_6a88_85a3_08d3;
        for x in [w(&self.src, 0), w(&self.src, 8), w(&self.dst, 0), w(&self.dst, 8), rest] {
            h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
        }
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (h >> 32) as u32
    }
}

fn ports(l4: &[u8], protocol: u8) -> Option<(u16, u16)> {
    if protocol != PROTO_TCP && protocol != PROTO_UDP {
        return None;
    }
    let p = l4.get(..4)?;
    Some((u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])))
}

/// The flow `frame` (an Ethernet frame) belongs to; see the module doc for which fields count.
/// A frame shorter than an Ethernet header gets the all-zero key.
pub fn flow_key(frame: &[u8]) -> FlowKey {
    let Some((ethertype, off, vlan)) = ethernet::network_layer(frame) else {
        return FlowKey::default();
    };
    let l3 = frame.get(off..).unwrap_or_default();
    let mut key = FlowKey { vlan, ..FlowKey::default() };
    match ethertype {
        ETHERTYPE_IPV4 => {
            if let Ok(ip) = Ipv4Packet::new_checked(l3) {
                key.kind = FlowKind::Ipv4;
                key.protocol = ip.protocol();
                key.src[..4].copy_from_slice(&ip.src().octets());
                key.dst[..4].copy_from_slice(&ip.dst().octets());
                let fragment = ip.more_frags() || ip.frag_offset() != 0;
                if !fragment {
                    if let Some((s, d)) = ports(ip.payload(), key.protocol) {
                        (key.src_port, key.dst_port) = (s, d);
                    }
                }
                return key;
            }
        }
        ETHERTYPE_IPV6 => {
            if let Ok(ip) = Ipv6Packet::new_checked(l3) {
                key.kind = FlowKind::Ipv6;
                key.protocol = ip.next_header();
                key.src = ip.src_octets();
                key.dst = ip.dst_octets();
                if let Some((s, d)) = ports(ip.payload(), key.protocol) {
                    (key.src_port, key.dst_port) = (s, d);
                }
                return key;
            }
        }
        _ => {}
    }
    // Not IP, or IP we could not read: the MAC pair (the frame holds a whole Ethernet header).
    key.src[..6].copy_from_slice(&frame[6..12]);
    key.dst[..6].copy_from_slice(&frame[..6]);
    key.src_port = ethertype;
    key
}

/// The ECN field of an IPv4 or IPv6 packet in `frame`, `None` when there is none to read.
#[inline]
fn ecn(frame: &[u8]) -> Option<u8> {
    let (ethertype, off, _) = ethernet::network_layer(frame)?;
    let l3 = frame.get(off..)?;
    match ethertype {
        ETHERTYPE_IPV4 => Ipv4Packet::new_checked(l3).ok().map(|ip| ip.tos() & ECN_MASK),
        ETHERTYPE_IPV6 => Ipv6Packet::new_checked(l3).ok().map(|ip| ip.traffic_class() & ECN_MASK),
        _ => None,
    }
}

/// Whether `frame` carries an ECN-capable IP packet (ECT(0), ECT(1), or already CE): one that
/// CoDel may mark instead of dropping.
#[inline]
pub fn is_ect(frame: &[u8]) -> bool {
    ecn(frame).is_some_and(|e| e != 0)
}

/// What [`mark_ce`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnOutcome {
    /// The ECN field was ECT(0) or ECT(1) and is now CE.
    Marked,
    /// The packet is not ECN-capable (field 00): untouched; the caller should drop it instead.
    NotEct,
    /// The field already said CE: untouched (the sender will hear of congestion anyway).
    AlreadyCe,
    /// No IPv4 or IPv6 packet could be read in the frame: untouched.
    NotIp,
}

/// Sets "congestion experienced" in the IP packet of `frame`, through one 802.1Q tag. IPv4's
/// header checksum is updated incrementally (RFC 1624); IPv6 has none.
pub fn mark_ce(frame: &mut [u8]) -> EcnOutcome {
    let Some((ethertype, off, _)) = ethernet::network_layer(frame) else {
        return EcnOutcome::NotIp;
    };
    let Some(l3) = frame.get_mut(off..) else {
        return EcnOutcome::NotIp;
    };
    // The ECN field's outcome; `set` writes the field with CE where it is to be marked.
    let mark = |field: u8, set: &mut dyn FnMut(u8)| {
        let o = match field & ECN_MASK {
            0 => EcnOutcome::NotEct,
            ECN_CE => EcnOutcome::AlreadyCe,
            _ => EcnOutcome::Marked,
        };
        if o == EcnOutcome::Marked {
            set(field | ECN_CE);
        }
        o
    };
    match ethertype {
        ETHERTYPE_IPV4 => {
            Ipv4Packet::new_checked(l3).map_or(EcnOutcome::NotIp, |mut ip| mark(ip.tos(), &mut |b| ip.set_tos(b)))
        }
        ETHERTYPE_IPV6 => Ipv6Packet::new_checked(l3)
            .map_or(EcnOutcome::NotIp, |mut ip| mark(ip.traffic_class(), &mut |b| ip.set_traffic_class(b))),
        _ => EcnOutcome::NotIp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checksum;
    use etherparse::{IpNumber, PacketBuilder, VlanId};

    const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    fn v4_udp(vlan: Option<u16>, sport: u16, dport: u16) -> Vec<u8> {
        let mut v = Vec::new();
        let b = PacketBuilder::ethernet2(MAC_A, MAC_B);
        match vlan {
            Some(id) => b
                .single_vlan(VlanId::try_new(id).unwrap())
                .ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64)
                .udp(sport, dport)
                .write(&mut v, &[0xab; 30])
                .unwrap(),
            None => b.ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64).udp(sport, dport).write(&mut v, &[0xab; 30]).unwrap(),
        }
        v
    }

    fn v4_tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut v = Vec::new();
        PacketBuilder::ethernet2(MAC_A, MAC_B)
            .ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64)
            .tcp(sport, dport, 1, 1000)
            .write(&mut v, &[0xab; 30])
            .unwrap();
        v
    }

    fn v6(vlan: Option<u16>, tcp: bool, sport: u16, dport: u16) -> Vec<u8> {
        let mut v = Vec::new();
        let b = PacketBuilder::ethernet2(MAC_A, MAC_B);
        let ip = match vlan {
            Some(id) => b.single_vlan(VlanId::try_new(id).unwrap()).ipv6(V6_A, V6_B, 64),
            None => b.ipv6(V6_A, V6_B, 64),
        };
        if tcp {
            ip.tcp(sport, dport, 1, 1000).write(&mut v, &[0xab; 30]).unwrap();
        } else {
            ip.udp(sport, dport).write(&mut v, &[0xab; 30]).unwrap();
        }
        v
    }

    /// Sets byte `at` of the IPv4 header at `off` and recomputes the checksum in full.
    fn poke_v4(frame: &mut [u8], off: usize, at: usize, value: u8) {
        frame[off + at] = value;
        frame[off + 10..off + 12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&frame[off..off + 20]);
        frame[off + 10..off + 12].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn tcp_and_udp_over_ipv4_are_keyed_by_the_5_tuple() {
        let k = flow_key(&v4_udp(None, 1000, 53));
        assert_eq!((k.kind, k.vlan, k.protocol), (FlowKind::Ipv4, 0, PROTO_UDP));
        assert_eq!((&k.src[..4], &k.dst[..4]), (&[198, 18, 0, 1][..], &[198, 19, 0, 2][..]));
        assert_eq!((k.src_port, k.dst_port), (1000, 53));
        assert!(k.src[4..].iter().chain(&k.dst[4..]).all(|&b| b == 0));
        assert_ne!(k, flow_key(&v4_udp(None, 1001, 53)), "another source port is another flow");
        assert_eq!(k, flow_key(&v4_udp(None, 1000, 53)), "same 5-tuple, same flow");
        let t = flow_key(&v4_tcp(1000, 53));
        assert_eq!((t.protocol, t.src_port, t.dst_port), (PROTO_TCP, 1000, 53));
        assert_ne!(t, k, "TCP and UDP with the same ports differ");
    }

    #[test]
    fn tcp_and_udp_over_ipv6_are_keyed_by_the_5_tuple() {
        let k = flow_key(&v6(None, true, 443, 50000));
        assert_eq!((k.kind, k.protocol, k.src, k.dst), (FlowKind::Ipv6, PROTO_TCP, V6_A, V6_B));
        assert_eq!((k.src_port, k.dst_port), (443, 50000));
        let u = flow_key(&v6(None, false, 443, 50000));
        assert_eq!((u.protocol, u.src_port, u.dst_port), (PROTO_UDP, 443, 50000));
        assert_ne!(flow_key(&v6(None, false, 443, 50001)), u);
    }

    #[test]
    fn ipv4_fragments_are_keyed_by_the_3_tuple() {
        let whole = flow_key(&v4_udp(None, 1000, 53));
        // First fragment (more fragments), and a later one (offset 8 bytes) whose "ports" are data.
        let mut first = v4_udp(None, 1000, 53);
        poke_v4(&mut first, 14, 6, 0x20);
        let mut later = v4_udp(None, 7777, 9999);
        poke_v4(&mut later, 14, 7, 0x01);
        let (a, b) = (flow_key(&first), flow_key(&later));
        assert_eq!(a, b, "every fragment of a datagram in one queue");
        assert_eq!((a.kind, a.protocol, a.src_port, a.dst_port), (FlowKind::Ipv4, PROTO_UDP, 0, 0));
        assert_eq!((a.src, a.dst), (whole.src, whole.dst));
    }

    #[test]
    fn other_ip_protocols_are_keyed_by_the_3_tuple() {
        let mut v = Vec::new();
        PacketBuilder::ethernet2(MAC_A, MAC_B)
            .ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64)
            .write(&mut v, IpNumber(47), &[0xab; 30])
            .unwrap();
        let k = flow_key(&v);
        assert_eq!((k.kind, k.protocol, k.src_port, k.dst_port), (FlowKind::Ipv4, 47, 0, 0));
        let mut v = Vec::new();
        PacketBuilder::ethernet2(MAC_A, MAC_B).ipv6(V6_A, V6_B, 64).write(&mut v, IpNumber(58), &[0; 8]).unwrap();
        let k = flow_key(&v);
        assert_eq!((k.kind, k.protocol, k.src, k.src_port), (FlowKind::Ipv6, 58, V6_A, 0));
        // A UDP header cut short: the 3-tuple.
        let mut v = Vec::new();
        PacketBuilder::ethernet2(MAC_A, MAC_B)
            .ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64)
            .write(&mut v, IpNumber::UDP, &[0xab; 3])
            .unwrap();
        assert_eq!(flow_key(&v).src_port, 0);
    }

    #[test]
    fn frames_without_ip_are_keyed_by_the_mac_pair() {
        let mut arp = v4_udp(None, 1, 2);
        arp[12..14].copy_from_slice(&ethernet::ETHERTYPE_ARP.to_be_bytes());
        let k = flow_key(&arp);
        assert_eq!((k.kind, k.src_port), (FlowKind::Mac, ethernet::ETHERTYPE_ARP));
        assert_eq!((&k.src[..6], &k.dst[..6]), (&MAC_A[..], &MAC_B[..]));
        // IPv4 that cannot be read (version 5) falls back to the MACs too.
        let mut bad = v4_udp(None, 1, 2);
        bad[14] = 0x55;
        assert_eq!(flow_key(&bad).kind, FlowKind::Mac);
        assert_eq!(flow_key(&[0u8; 10]), FlowKey::default(), "a runt");
    }

    #[test]
    fn keys_are_read_through_one_vlan_tag() {
        let k = flow_key(&v4_udp(Some(42), 1000, 53));
        let untagged = flow_key(&v4_udp(None, 1000, 53));
        assert_eq!(k, FlowKey { vlan: 42, ..untagged });
        let k6 = flow_key(&v6(Some(7), false, 1, 2));
        assert_eq!(k6, FlowKey { vlan: 7, ..flow_key(&v6(None, false, 1, 2)) });
    }

    #[test]
    fn the_hash_depends_on_every_field_and_the_seed() {
        let k = flow_key(&v4_udp(None, 1000, 53));
        let h = k.hash(1);
        assert_eq!(h, k.hash(1));
        assert_ne!(h, k.hash(2));
        let variants = [
            FlowKey { vlan: 1, ..k },
            FlowKey { protocol: 6, ..k },
            FlowKey { src_port: 1001, ..k },
            FlowKey { dst_port: 54, ..k },
            FlowKey { kind: FlowKind::Ipv6, ..k },
            FlowKey { src: [1; 16], ..k },
            FlowKey { dst: [1; 16], ..k },
        ];
        for v in variants {
            assert_ne!(v.hash(1), h, "{v:?}");
        }
        // Sequential ports spread over 1024 buckets about evenly.
        let mut buckets = [0u32; 1024];
        for p in 0..16_384u16 {
            buckets[(FlowKey { src_port: p, ..k }.hash(7) % 1024) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| (2..=40).contains(&n)), "{:?}", buckets.iter().max());
    }

    /// The ECN field, as etherparse reads it.
    fn ecn_of(frame: &[u8]) -> u8 {
        let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
        match p.net.unwrap() {
            etherparse::NetSlice::Ipv4(ip) => ip.header().ecn().value(),
            etherparse::NetSlice::Ipv6(ip) => ip.header().traffic_class() & 3,
            _ => panic!("not IP"),
        }
    }

    #[test]
    fn ecn_capable_ipv4_is_marked_with_a_valid_checksum() {
        for (vlan, off) in [(None, 14), (Some(3), 18)] {
            for (field, want) in [
                (0b00, EcnOutcome::NotEct),
                (0b01, EcnOutcome::Marked),
                (0b10, EcnOutcome::Marked),
                (0b11, EcnOutcome::AlreadyCe),
            ] {
                let mut f = v4_udp(vlan, 1, 2);
                poke_v4(&mut f, off, 1, 0xb8 | field);
                assert_eq!(is_ect(&f), field != 0);
                let before = f.clone();
                assert_eq!(mark_ce(&mut f), want, "field {field:02b}");
                if want == EcnOutcome::Marked {
                    assert_eq!(ecn_of(&f), 3);
                    assert_eq!(f[off + 1], 0xb8 | 3, "DSCP kept");
                    let ip = Ipv4Packet::new_checked(&f[off..]).unwrap();
                    assert!(ip.checksum_ok());
                    let mut full = f.clone();
                    poke_v4(&mut full, off, 1, 0xb8 | 3);
                    assert_eq!(f, full, "incremental checksum equals the recomputed one");
                } else {
                    assert_eq!(f, before, "untouched");
                }
            }
        }
    }

    #[test]
    fn ipv4_checksum_update_across_the_zero_edge() {
        // One's complement has two zeros. Find the identifications for which the recomputed
        // checksum is 0x0000 after marking, and for which it was 0x0000 before.
        let mut after_zero = 0;
        let mut before_zero = 0;
        let base = v4_udp(None, 1, 2);
        for ident in 0..=u16::MAX {
            let mut f = base.clone();
            f[14 + 4..14 + 6].copy_from_slice(&ident.to_be_bytes());
            poke_v4(&mut f, 14, 1, 0x02);
            let old = u16::from_be_bytes([f[24], f[25]]);
            let mut full = f.clone();
            poke_v4(&mut full, 14, 1, 0x03);
            let new = u16::from_be_bytes([full[24], full[25]]);
            if new != 0 && old != 0 {
                continue;
            }
            // Also the equivalent 0xffff spelling of a zero checksum, which a header may carry.
            let spellings: &[u16] = if old == 0 { &[0x0000, 0xffff] } else { &[old] };
            for &spelled in spellings {
                let mut g = f.clone();
                g[24..26].copy_from_slice(&spelled.to_be_bytes());
                assert!(Ipv4Packet::new_checked(&g[14..]).unwrap().checksum_ok());
                assert_eq!(mark_ce(&mut g), EcnOutcome::Marked);
                assert!(Ipv4Packet::new_checked(&g[14..]).unwrap().checksum_ok(), "ident {ident:#x}");
                let got = u16::from_be_bytes([g[24], g[25]]);
                assert!(got == new || (got, new) == (0xffff, 0) || (got, new) == (0, 0xffff), "{got:#x} {new:#x}");
            }
            if new == 0 {
                after_zero += 1;
                // RFC 1624 eqn. 3 yields 0x0000 here, exactly what a full computation writes.
                let mut g = f.clone();
                mark_ce(&mut g);
                assert_eq!(g, full);
            }
            if old == 0 {
                before_zero += 1;
            }
        }
        assert!(after_zero > 0 && before_zero > 0, "edges not reached: {after_zero} {before_zero}");
    }

    #[test]
    fn ecn_capable_ipv6_is_marked_in_the_traffic_class() {
        for (vlan, off) in [(None, 14), (Some(3), 18)] {
            for (field, want) in [
                (0b00, EcnOutcome::NotEct),
                (0b01, EcnOutcome::Marked),
                (0b10, EcnOutcome::Marked),
                (0b11, EcnOutcome::AlreadyCe),
            ] {
                let mut f = v6(vlan, true, 1, 2);
                Ipv6Packet::new_checked(&mut f[off..]).unwrap().set_traffic_class(0xb8 | field);
                assert_eq!(is_ect(&f), field != 0);
                let before = f.clone();
                assert_eq!(mark_ce(&mut f), want);
                if want == EcnOutcome::Marked {
                    assert_eq!(ecn_of(&f), 3);
                    assert_eq!(Ipv6Packet::new_checked(&f[off..]).unwrap().traffic_class(), 0xbb);
                    let diff = f.iter().zip(&before).filter(|(a, b)| a != b).count();
                    assert_eq!(diff, 1, "only the traffic-class nibble's byte changed");
                } else {
                    assert_eq!(f, before);
                }
            }
        }
    }

    #[test]
    fn frames_without_ip_are_not_marked() {
        let mut arp = v4_udp(None, 1, 2);
        poke_v4(&mut arp, 14, 1, 0x02);
        arp[12..14].copy_from_slice(&ethernet::ETHERTYPE_ARP.to_be_bytes());
        let before = arp.clone();
        assert!(!is_ect(&arp));
        assert_eq!(mark_ce(&mut arp), EcnOutcome::NotIp);
        assert_eq!(arp, before);
        assert_eq!(mark_ce(&mut [0u8; 10]), EcnOutcome::NotIp);
        let mut truncated = v4_udp(None, 1, 2);
        poke_v4(&mut truncated, 14, 1, 0x02);
        truncated.truncate(30);
        assert_eq!(mark_ce(&mut truncated), EcnOutcome::NotIp, "IPv4 cut short is not read");
        // Two tags: not looked through.
        let mut qinq = v4_udp(Some(5), 1, 2);
        poke_v4(&mut qinq, 18, 1, 0x02);
        qinq[16..18].copy_from_slice(&ethernet::ETHERTYPE_VLAN.to_be_bytes());
        assert_eq!(mark_ce(&mut qinq), EcnOutcome::NotIp);
    }
}
