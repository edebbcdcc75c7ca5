//! The IPv6 router decision: from one frame, its ingress port, the tables and the time, to an
//! [`Action`].
//!
//! The steps both families share are in [`super::family`]; this file holds IPv6's own. Pure,
//! like the IPv4 decision ([`super::router`]), and in Linux's order (`ip6_rcv_core`, the
//! route lookup, `ip6_forward`), so that the differential test against the kernel sees the
//! same answer to the same packet:
//!
//! 1. The destination MAC must be the ingress port's own ([`Reason::NotOurMac`]); the header
//!    must be whole ([`Reason::Ipv6Malformed`]). There is no header checksum.
//! 2. Sources that no node sends from are dropped ([`Reason::MartianSource`]): multicast,
//!    unspecified, loopback, IPv4-mapped. Destinations never forwarded are dropped
//!    ([`Reason::MartianDestination`]: multicast, unspecified, loopback;
//!    [`Reason::LinkLocalDestination`]: fe80::/10, whose packets to the box are the kernel's).
//! 3. The destination is looked up (longest prefix). No route: Destination Unreachable, no
//!    route (code 0). One of the box's addresses: an echo request is answered here; the rest
//!    is the kernel's, which the XDP program already gave it.
//! 4. Hop limit ≤ 1: Time Exceeded. A link-local source leaving by another port than it came
//!    in on: Destination Unreachable, beyond scope (code 2). Larger than the egress MTU:
//!    Packet Too Big carrying the MTU (routers never fragment IPv6).
//! 5. The hop limit is decremented (no checksum to update), the MACs rewritten; an unresolved
//!    next hop is [`Action::Glean`]ed to the neighbour discovery engine.
//!
//! Hop-by-hop options are forwarded without being examined, as RFC 8200 section 4.3 allows
//! (the kernel, with its forwarding off, would drop them: passing them to it would black-hole
//! them). Redirects are not sent: Linux sends one when a packet leaves by the port it came in
//! on; xfwd forwards it without one (the differential test does not hairpin).
//!
//! ICMPv6 errors (RFC 4443 section 2.4) are never sent about an ICMPv6 error (found behind the
//! extension headers Linux's `is_ineligible` walks; a later fragment is answered); they quote as much of the packet as
//! fits in IPv6's minimum MTU; they come from the address Linux would choose
//! ([`RouterTables::source6`]) and leave by the route back (for a link-local source, the port
//! it came in on); they pass the ICMP token bucket except Packet Too Big, which Linux's default
//! `net.ipv6.icmp.ratemask` exempts. Their flow label is zero (Linux's is a hash of the flow).

use core::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use super::family::{route, send, ErrorEnv, Header, IpFamily, V6};
use super::fib::NhIndex;
use super::fib6::{Fib6, Prefix6};
use super::neighbors::NeighborTable6;
use super::tables::{is_link_local6, scope6, NextHop6, NhKind6, RouterTables, Tables6};
use crate::action::Action;
use crate::reason::Reason;
use crate::wire::ethernet::{self, ETHERTYPE_IPV6};
use crate::wire::{icmpv6, ipv6, EthernetFrame, Icmpv6Packet, Ipv6Packet, MacAddr};
use crate::PortId;

/// The hop limit of the packets the router originates (echo replies, ICMPv6 errors), as
/// Linux's default `net.ipv6.conf.*.hop_limit`.
pub const DEFAULT_HOP_LIMIT: u8 = 64;

/// An ICMPv6 error to send about a frame: why the frame is not forwarded, and the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmp6Error {
    /// Why the original is not forwarded (counted like a drop).
    pub cause: Reason,
    /// ICMPv6 type.
    pub msg_type: u8,
    /// ICMPv6 code.
    pub code: u8,
    /// The word after the checksum (the MTU of Packet Too Big, else 0).
    pub rest: u32,
}

impl Icmp6Error {
    /// Destination Unreachable, no route to destination.
    pub const NO_ROUTE: Icmp6Error =
        Icmp6Error { cause: Reason::NoRoute, msg_type: icmpv6::DEST_UNREACHABLE, code: icmpv6::CODE_NO_ROUTE, rest: 0 };
    /// Destination Unreachable, address unreachable (neighbour discovery gave up).
    pub const ADDRESS_UNREACHABLE: Icmp6Error = Icmp6Error {
        cause: Reason::NoRoute,
        msg_type: icmpv6::DEST_UNREACHABLE,
        code: icmpv6::CODE_ADDRESS_UNREACHABLE,
        rest: 0,
    };
    /// Destination Unreachable, beyond scope of source address.
    pub const BEYOND_SCOPE: Icmp6Error = Icmp6Error {
        cause: Reason::BeyondScope,
        msg_type: icmpv6::DEST_UNREACHABLE,
        code: icmpv6::CODE_BEYOND_SCOPE,
        rest: 0,
    };
    /// Destination Unreachable, no route, for a route of the `unreachable` type (as Linux's
    /// `ip6_pkt_discard`).
    pub const UNREACHABLE_ROUTE: Icmp6Error = Icmp6Error {
        cause: Reason::UnreachableRoute,
        msg_type: icmpv6::DEST_UNREACHABLE,
        code: icmpv6::CODE_NO_ROUTE,
        rest: 0,
    };
    /// Destination Unreachable, administratively prohibited (a `prohibit` route).
    pub const PROHIBITED: Icmp6Error = Icmp6Error {
        cause: Reason::Prohibited,
        msg_type: icmpv6::DEST_UNREACHABLE,
        code: icmpv6::CODE_PROHIBITED,
        rest: 0,
    };
    /// Destination Unreachable, no route, for a route out of an interface xfwd does not own.
    pub const FOREIGN_EGRESS: Icmp6Error = Icmp6Error {
        cause: Reason::ForeignEgress,
        msg_type: icmpv6::DEST_UNREACHABLE,
        code: icmpv6::CODE_NO_ROUTE,
        rest: 0,
    };
    /// Destination Unreachable, no route, for a route xfwd cannot forward.
    pub const UNSUPPORTED: Icmp6Error = Icmp6Error {
        cause: Reason::UnsupportedRoute,
        msg_type: icmpv6::DEST_UNREACHABLE,
        code: icmpv6::CODE_NO_ROUTE,
        rest: 0,
    };
    /// Time Exceeded, hop limit exceeded in transit.
    pub const HOP_LIMIT: Icmp6Error = Icmp6Error {
        cause: Reason::HopLimitExceeded,
        msg_type: icmpv6::TIME_EXCEEDED,
        code: icmpv6::CODE_HOP_LIMIT,
        rest: 0,
    };

    /// Packet Too Big, with the egress MTU.
    pub const fn too_big(mtu: u32) -> Icmp6Error {
        Icmp6Error { cause: Reason::PacketTooBig, msg_type: icmpv6::PACKET_TOO_BIG, code: 0, rest: mtu }
    }
}

/// Sources no node sends from: multicast, unspecified, loopback, IPv4-mapped (::ffff:0:0/96,
/// which Linux drops on input, RFC 4291 section 2.5.5.2).
#[inline]
fn martian_source(a: &Ipv6Addr) -> bool {
    a.is_multicast() || a.is_unspecified() || a.is_loopback() || a.to_ipv4_mapped().is_some()
}

/// The batch's table stage: prefetches the FIB's direct entry for the frame's IPv6
/// destination, read where an untagged IPv6 header has it, without any check.
#[inline]
pub fn prefetch6(frame: &[u8], t: &RouterTables) {
    if let Some(dst) = frame.get(ethernet::HEADER_LEN..).and_then(ipv6::peek_dst) {
        t.v6.fib.prefetch(dst);
    }
}

impl IpFamily for V6 {
    const ETHERTYPE: u16 = ETHERTYPE_IPV6;
    const NO_ROUTE: Icmp6Error = Icmp6Error::NO_ROUTE;
    const TTL_EXCEEDED: Icmp6Error = Icmp6Error::HOP_LIMIT;
    const UNREACHABLE_ROUTE: Icmp6Error = Icmp6Error::UNREACHABLE_ROUTE;
    const PROHIBITED: Icmp6Error = Icmp6Error::PROHIBITED;
    const FOREIGN_EGRESS: Icmp6Error = Icmp6Error::FOREIGN_EGRESS;
    const UNSUPPORTED: Icmp6Error = Icmp6Error::UNSUPPORTED;
    type Addr = Ipv6Addr;
    type NextHop = NextHop6;
    type Fib = Arc<Fib6>;
    type Prefix = Prefix6;
    type Error = Icmp6Error;

    /// IPv6's header: no checksum, no jumbogram; then the martians and the link-local
    /// destinations.
    #[inline(always)]
    fn decide(frame: &mut [u8], env: &mut ErrorEnv<'_>) -> Action {
        let (src, dst, hop_limit, payload_len) = match Ipv6Packet::new_checked(&frame[ethernet::HEADER_LEN..]) {
            // A jumbogram (payload length 0 behind a hop-by-hop header) cannot fit a frame.
            Ok(ip) if ip.payload_len() == 0 && ip.next_header() == ipv6::NEXT_HEADER_HOP_BY_HOP => {
                return Action::Drop(Reason::Ipv6Malformed)
            }
            Ok(ip) => (ip.src(), ip.dst(), ip.hop_limit(), ip.payload_len()),
            Err(_) => return Action::Drop(Reason::Ipv6Malformed),
        };
        if martian_source(&src) {
            return Action::Drop(Reason::MartianSource);
        }
        if dst.is_multicast() || dst.is_unspecified() || dst.is_loopback() {
            return Action::Drop(Reason::MartianDestination);
        }
        if is_link_local6(&dst) {
            return Action::Drop(Reason::LinkLocalDestination);
        }
        // Routers never fragment IPv6: whatever the packet, too big is Packet Too Big.
        let h = Header { src, dst, ttl: hop_limit, ip_len: ipv6::HEADER_LEN + payload_len, dont_frag: true };
        route::<V6>(frame, env, h)
    }

    #[inline(always)]
    fn neighbor(nh: &NextHop6, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        match nh.kind {
            NhKind6::Connected => Some(dst),
            NhKind6::Gateway(gw) => Some(gw),
            _ => None,
        }
    }

    /// An echo request to the box is answered; routes that are not forwarded as the kernel
    /// answers them ([`crate::l3::tables::Special::answer`]).
    fn not_forwarded(frame: &mut [u8], env: &mut ErrorEnv<'_>, nh: &NextHop6) -> Action {
        match nh.kind {
            NhKind6::Local => local6(frame, env.ingress, env.tables, env.neighbors6),
            NhKind6::Special(s) => s.answer::<V6>(frame, env),
            // Groups hold plain next hops only.
            _ => Action::Drop(Reason::NoEgress),
        }
    }

    /// The IPv6 half of the tables (its FIB shared by tables whose IPv6 routes did not change).
    #[inline(always)]
    fn tables(t: &RouterTables) -> &Tables6 {
        &t.v6
    }

    #[inline(always)]
    fn lookup(fib: &Arc<Fib6>, dst: Ipv6Addr) -> Option<NhIndex> {
        fib.lookup(dst)
    }

    /// A link-local source leaving by another port than it came in on.
    #[inline(always)]
    fn beyond_scope(src: Ipv6Addr, egress: PortId, ingress: PortId) -> Option<Icmp6Error> {
        (is_link_local6(&src) && egress != ingress).then_some(Icmp6Error::BEYOND_SCOPE)
    }

    /// Packet Too Big, whatever the packet says: routers never fragment IPv6.
    #[inline(always)]
    fn too_big(mtu: u32, _dont_frag: bool) -> Result<Icmp6Error, Reason> {
        Ok(Icmp6Error::too_big(mtu.max(ipv6::MIN_MTU as u32)))
    }

    /// Gateways through the worker's cache (most packets go through a handful of them); an
    /// on-link destination straight from the table. A link-local neighbour is keyed with its
    /// port.
    #[inline(always)]
    fn resolve(env: &mut ErrorEnv<'_>, idx: usize, nh: &NextHop6, next_hop: Ipv6Addr) -> Option<(MacAddr, PortId)> {
        let neighbors = env.neighbors6;
        let lookup = || neighbors.lookup(scope6(next_hop, nh.port), nh.port).map(|n| (n.mac, n.port));
        if matches!(nh.kind, NhKind6::Gateway(_)) {
            env.state.nh_cache6.get(idx, (env.tables.id, neighbors.generation()), lookup)
        } else {
            lookup()
        }
    }

    /// The hop limit (no checksum to update).
    #[inline(always)]
    fn decrement(frame: &mut [u8]) {
        if let Ok(mut ip) = Ipv6Packet::new_checked(&mut frame[ethernet::HEADER_LEN..]) {
            ip.decrement_hop_limit();
        }
    }

    #[inline(always)]
    fn glean(_nh: &NextHop6, next_hop: Ipv6Addr) -> IpAddr {
        IpAddr::V6(next_hop)
    }

    #[inline(always)]
    fn error(frame: &[u8], env: &mut ErrorEnv<'_>, e: Icmp6Error) -> Action {
        icmp6_error(frame, env, e)
    }
}

/// A packet for one of the box's IPv6 addresses that reached a worker: answer an echo request.
fn local6(frame: &mut [u8], ingress: PortId, t: &RouterTables, neighbors: &NeighborTable6) -> Action {
    let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) else {
        return Action::Drop(Reason::Runt);
    };
    let (src, is_echo) = match Ipv6Packet::new_checked(eth.payload()) {
        Ok(ip) => {
            let (s, d) = (ip.src(), ip.dst());
            let echo = ip.next_header() == ipv6::NEXT_HEADER_ICMPV6
                && Icmpv6Packet::new_checked(ip.payload())
                    .is_ok_and(|m| m.msg_type() == icmpv6::ECHO_REQUEST && m.code() == 0 && m.checksum_ok(&s, &d));
            (s, echo)
        }
        Err(_) => return Action::Drop(Reason::Ipv6Malformed),
    };
    if !is_echo {
        return Action::Drop(Reason::LocalDelivery);
    }
    let Some((port, l2_dst)) = way_back(eth.src(), ingress, src, t, neighbors) else {
        return Action::Drop(Reason::NoRoute);
    };
    let egress = &t.ports[port.index()];
    let total = {
        let Ok(mut ip) = Ipv6Packet::new_checked(eth.payload_mut()) else {
            return Action::Drop(Reason::Ipv6Malformed);
        };
        if ipv6::HEADER_LEN + ip.payload_len() > egress.mtu as usize {
            return Action::Drop(Reason::PacketTooBig);
        }
        ip.swap_addresses();
        ip.set_hop_limit(DEFAULT_HOP_LIMIT);
        if let Ok(mut m) = Icmpv6Packet::new_checked(ip.payload_mut()) {
            m.echo_request_to_reply();
        }
        ipv6::HEADER_LEN + ip.payload_len()
    };
    send(frame, port, egress.mac, l2_dst, total)
}

/// The port and MAC to send a packet to `src` by: the route back to it (a link-local source:
/// the port it came in on), and the neighbour's MAC, or, when that port is the ingress and the
/// neighbour is not resolved, `sender`, the frame's Ethernet source (the previous hop).
fn way_back(
    sender: MacAddr,
    ingress: PortId,
    src: Ipv6Addr,
    t: &RouterTables,
    neighbors: &NeighborTable6,
) -> Option<(PortId, MacAddr)> {
    let (port, hop) = if is_link_local6(&src) {
        (ingress, src)
    } else {
        let back = t.route6(src)?;
        match back.kind {
            NhKind6::Connected => (back.port, src),
            NhKind6::Gateway(gw) => (back.port, gw),
            NhKind6::Local | NhKind6::Broadcast | NhKind6::Special(_) | NhKind6::Group { .. } => return None,
        }
    };
    match neighbors.lookup(scope6(hop, port), port) {
        Some(n) => Some((port, n.mac)),
        _ if port == ingress => Some((port, sender)),
        _ => None,
    }
}

/// What a packet carries, past the extension headers Linux's `ipv6_skip_exthdr` walks
/// (hop-by-hop, routing, fragment, destination options, authentication), and where: `None`
/// when a header is cut short. Like Linux, it stops at the fragment header of a later fragment
/// (what it carries is not in it) and answers the fragment header itself.
fn upper_layer(packet: &[u8], first: u8) -> Option<(u8, usize)> {
    const ROUTING: u8 = 43;
    const AUTH: u8 = 51;
    const DEST_OPTS: u8 = 60;
    let (mut next, mut at) = (first, ipv6::HEADER_LEN);
    // Each header is at least 8 bytes: the walk ends within the packet's length.
    loop {
        match next {
            ipv6::NEXT_HEADER_HOP_BY_HOP | ROUTING | DEST_OPTS => {
                let h = packet.get(at..at + 2)?;
                next = h[0];
                at += (usize::from(h[1]) + 1) * 8;
            }
            AUTH => {
                let h = packet.get(at..at + 2)?;
                next = h[0];
                at += (usize::from(h[1]) + 2) * 4;
            }
            ipv6::NEXT_HEADER_FRAGMENT => {
                let h = packet.get(at..at + 8)?;
                if u16::from_be_bytes([h[2], h[3]]) & 0xfff8 != 0 {
                    return Some((ipv6::NEXT_HEADER_FRAGMENT, at));
                }
                next = h[0];
                at += 8;
            }
            _ => return Some((next, at)),
        }
    }
}

/// Whether RFC 4443 section 2.4 (e) forbids answering `packet` (an IPv6 packet) with an error:
/// it carries an ICMPv6 error, or an ICMPv6 message whose type cannot be read, as Linux's
/// `is_ineligible` decides (a later fragment shows no ICMPv6 header: it is answered).
fn carries_icmpv6_error(packet: &[u8], first: u8) -> bool {
    let Some((proto, at)) = upper_layer(packet, first) else {
        return false;
    };
    if proto != ipv6::NEXT_HEADER_ICMPV6 {
        return false;
    }
    packet.get(at).is_none_or(|&t| icmpv6::is_error(t))
}

/// Answers the frame (received on `env.ingress`, its Ethernet source still the sender's) with
/// the ICMPv6 error `e`, built in the scratch buffer; or drops it for `e.cause` when the rules
/// say no error. Also used by the neighbour discovery engine for Address Unreachable.
pub fn icmp6_error(frame: &[u8], env: &mut ErrorEnv<'_>, e: Icmp6Error) -> Action {
    let Icmp6Error { cause, msg_type, code, rest } = e;
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Action::Drop(cause);
    };
    let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
        return Action::Drop(cause);
    };
    let (src, dst) = (ip.src(), ip.dst());
    let packet = &eth.payload()[..ipv6::HEADER_LEN + ip.payload_len()];
    if martian_source(&src) || carries_icmpv6_error(packet, ip.next_header()) {
        return Action::Drop(cause);
    }
    if dst.is_multicast() && msg_type != icmpv6::PACKET_TOO_BIG {
        return Action::Drop(cause);
    }
    let Some((port, l2_dst)) = way_back(eth.src(), env.ingress, src, env.tables, env.neighbors6) else {
        return Action::Drop(cause);
    };
    let Some(from) = env.tables.source6(src, port) else {
        return Action::Drop(cause);
    };
    if msg_type != icmpv6::PACKET_TOO_BIG && !env.state.icmp_limit.take(env.now_ms) {
        env.state.icmp_rate_limited += 1;
        return Action::Drop(cause);
    }
    let quote = &packet[..packet.len().min(ipv6::MIN_MTU - ipv6::HEADER_LEN - icmpv6::HEADER_LEN)];
    let msg_len = icmpv6::HEADER_LEN + quote.len();
    let len = ethernet::HEADER_LEN + ipv6::HEADER_LEN + msg_len;
    let Ok(mut out) = EthernetFrame::new_checked(&mut env.scratch[..len]) else {
        return Action::Drop(cause);
    };
    out.set_dst(l2_dst);
    out.set_src(env.tables.ports[port.index()].mac);
    out.set_ethertype(ETHERTYPE_IPV6);
    let Ok(mut ip6) =
        Ipv6Packet::emit(out.payload_mut(), msg_len as u16, ipv6::NEXT_HEADER_ICMPV6, DEFAULT_HOP_LIMIT, &from, &src)
    else {
        return Action::Drop(cause);
    };
    if let Ok(mut m) = Icmpv6Packet::new_checked(ip6.payload_mut()) {
        m.payload_mut().copy_from_slice(quote);
        m.set_header(msg_type, code, rest);
        m.fill_checksum(&from, &src);
    }
    Action::Reply { port, len: len as u16, cause }
}

#[cfg(test)]
mod tests {
    use super::super::tables::{PortSpec, RouteTarget6};
    use super::*;
    use crate::action::SCRATCH_LEN;
    use crate::l3::fib::no_advice;
    use crate::l3::testing::port;
    use crate::l3::Key6;
    use crate::l3::{decide, NeighborTable, RouterState};
    use etherparse::{Icmpv6Header, Icmpv6Type, IpNumber, Ipv6Header, PacketBuilder};

    const H1: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);
    const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x22]);
    const ETH5: MacAddr = MacAddr([2, 0, 0, 0, 5, 5]);
    const ETH4: MacAddr = MacAddr([2, 0, 0, 0, 4, 4]);
    const P5: PortId = PortId(0);
    const P4: PortId = PortId(1);

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    type World = (RouterTables, NeighborTable6, RouterState);

    /// The rig in IPv6: eth5 = 2001:2:0:10::2/64 towards h1 (2001:2:0:10::1), eth4 =
    /// 2001:2:0:30::1/64 (MTU 1400) towards h2 (2001:2:0:30::2), which routes 2001:2:100::/48.
    fn world() -> World {
        let ports = vec![
            PortSpec { link_local: Some(ip("fe80::5")), ..port("eth5", ETH5, &["2001:2:0:10::2/64"]) },
            PortSpec { mtu: 1400, link_local: Some(ip("fe80::4")), ..port("eth4", ETH4, &["2001:2:0:30::1/64"]) },
        ];
        let statics = [("2001:2:100::/48".parse().unwrap(), RouteTarget6::Via { gw: ip("2001:2:0:30::2"), dev: None })];
        let t = RouterTables::build_dual(ports, &[], &statics, no_advice).unwrap();
        let n = NeighborTable6::new6(64);
        n.insert(Key6::global(ip("2001:2:0:30::2")), GW, P4, false).unwrap();
        n.insert(Key6::global(ip("2001:2:0:10::1")), H1, P5, false).unwrap();
        let mut st = RouterState::new(0, 10);
        st.fit(&t);
        (t, n, st)
    }

    fn udp(src: &str, dst: &str, hops: u8, payload: usize) -> Vec<u8> {
        let b = PacketBuilder::ethernet2(H1.0, ETH5.0).ipv6(ip(src).octets(), ip(dst).octets(), hops).udp(4000, 5000);
        let mut v = Vec::new();
        b.write(&mut v, &vec![0x5a; payload]).unwrap();
        v
    }

    fn run(f: &mut [u8], w: &mut World, s: &mut [u8; SCRATCH_LEN]) -> Action {
        decide::<V6>(f, P5, &w.0, &NeighborTable::new(8), &w.1, &mut w.2, 1_000, s)
    }

    /// An ICMPv6 error answer: (ip src, ip dst, hop limit, type, code, rest word, quote), its
    /// checksum checked by etherparse.
    fn parse_error(out: &[u8]) -> (Ipv6Addr, Ipv6Addr, u8, u8, u8, u32, Vec<u8>) {
        assert_eq!(u16::from_be_bytes([out[12], out[13]]), ETHERTYPE_IPV6);
        let (h, rest) = Ipv6Header::from_slice(&out[14..]).unwrap();
        assert_eq!(h.next_header, IpNumber::IPV6_ICMP);
        assert_eq!(usize::from(h.payload_length), rest.len());
        let (m, quote) = Icmpv6Header::from_slice(rest).unwrap();
        assert_eq!(m.checksum, m.icmp_type.calc_checksum(h.source, h.destination, quote).unwrap(), "checksum");
        let b = m.to_bytes();
        (
            h.source.into(),
            h.destination.into(),
            h.hop_limit,
            b[0],
            b[1],
            u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            quote.to_vec(),
        )
    }

    #[test]
    fn forwards_with_hop_limit_and_mac_rewrite() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 18);
        let before = f.clone();
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
        assert_eq!((&f[0..6], &f[6..12]), (&GW.0[..], &ETH4.0[..]), "next hop's MAC, egress port's MAC");
        let (h, _) = Ipv6Header::from_slice(&f[14..]).unwrap();
        assert_eq!(h.hop_limit, 63);
        assert_eq!(&f[14 + 8..], &before[14 + 8..], "addresses and payload untouched");
        // On-link destination: the destination itself is the neighbour.
        let mut f = udp("2001:2:100::7", "2001:2:0:10::1", 9, 0);
        f[0..6].copy_from_slice(&ETH4.0);
        assert_eq!(
            decide::<V6>(&mut f, P4, &w.0, &NeighborTable::new(8), &w.1, &mut w.2, 0, &mut s),
            Action::Forward(P5)
        );
        assert_eq!(&f[0..6], &H1.0);
        // Ethernet padding beyond the packet is not forwarded.
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 100);
        f.extend_from_slice(&[0; 30]);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::ForwardTrimmed { port: P4, len: 14 + 40 + 8 + 100 });
    }

    #[test]
    fn the_gateway_cache_follows_the_neighbour_table_and_an_unfitted_state_still_forwards() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
        assert_eq!(&f[0..6], &GW.0);
        // The gateway moves to another MAC: the next packet goes there.
        let moved = MacAddr([2, 0, 0, 0, 0, 0x33]);
        w.1.insert(Key6::global(ip("2001:2:0:30::2")), moved, P4, false).unwrap();
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
        assert_eq!(&f[0..6], &moved.0);
        // A state not yet fitted to these tables (a reload not taken in yet): same answer.
        w.2 = RouterState::new(0, 10);
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
        assert_eq!(&f[0..6], &moved.0);
    }

    #[test]
    fn an_unresolved_next_hop_is_gleaned_with_the_hop_limit_decremented() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("2001:2:0:10::1", "2001:2:0:30::77", 64, 0);
        assert_eq!(
            run(&mut f, &mut w, &mut s),
            Action::Glean { port: P4, next_hop: IpAddr::V6(ip("2001:2:0:30::77")) }
        );
        assert_eq!(f[14 + 7], 63);
        assert_eq!(&f[6..12], &H1.0, "the sender's MAC is kept for a possible error");
    }

    #[test]
    fn what_is_never_forwarded_is_dropped_with_its_reason() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let cases = [
            ("ff02::1", "2001:2:100::7", Reason::MartianSource),
            ("::", "2001:2:100::7", Reason::MartianSource),
            ("::1", "2001:2:100::7", Reason::MartianSource),
            ("::ffff:198.18.0.1", "2001:2:100::7", Reason::MartianSource),
            ("2001:2:0:10::1", "ff0e::1", Reason::MartianDestination),
            ("2001:2:0:10::1", "::", Reason::MartianDestination),
            ("2001:2:0:10::1", "::1", Reason::MartianDestination),
            ("2001:2:0:10::1", "fe80::1", Reason::LinkLocalDestination),
        ];
        for (src, dst, reason) in cases {
            let mut f = udp(src, dst, 64, 0);
            assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(reason), "{src} -> {dst}");
        }
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 0);
        f[0] = 0x33;
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::NotOurMac));
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 8);
        assert_eq!(run(&mut f[..14 + 40 + 7], &mut w, &mut s), Action::Drop(Reason::Ipv6Malformed), "cut short");
        // A jumbogram's payload length of 0 behind a hop-by-hop header.
        f[14 + 4..14 + 7].copy_from_slice(&[0, 0, ipv6::NEXT_HEADER_HOP_BY_HOP]);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::Ipv6Malformed));
        // Hop-by-hop options are forwarded unexamined.
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 8);
        let mut hbh = f[..14 + 40].to_vec();
        hbh[14 + 6] = ipv6::NEXT_HEADER_HOP_BY_HOP;
        hbh[14 + 5] += 8;
        hbh.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        hbh.extend_from_slice(&f[14 + 40..]);
        f = hbh;
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
    }

    #[test]
    fn no_route_is_destination_unreachable_before_the_hop_limit_is_looked_at() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("2001:2:0:10::1", "2001:9::1", 1, 30);
        let orig = f.clone();
        let Action::Reply { port, len, cause } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!((port, cause), (P5, Reason::NoRoute));
        let out = &s[..usize::from(len)];
        assert_eq!((&out[0..6], &out[6..12]), (&H1.0[..], &ETH5.0[..]));
        let (from, to, hops, t, c, rest, quote) = parse_error(out);
        assert_eq!((from, to, hops), (ip("2001:2:0:10::2"), ip("2001:2:0:10::1"), 64));
        assert_eq!((t, c, rest), (icmpv6::DEST_UNREACHABLE, icmpv6::CODE_NO_ROUTE, 0));
        assert_eq!(quote, &orig[14..], "the whole packet quoted");
    }

    #[test]
    fn hop_limit_one_is_time_exceeded() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 1, 30);
        let Action::Reply { port, len, cause } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!((port, cause), (P5, Reason::HopLimitExceeded));
        let (from, to, _, t, c, _, _) = parse_error(&s[..usize::from(len)]);
        assert_eq!((from, to, t, c), (ip("2001:2:0:10::2"), ip("2001:2:0:10::1"), icmpv6::TIME_EXCEEDED, 0));
        // Hop limit 2 passes with 1 left.
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 2, 30);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
        assert_eq!(f[14 + 7], 1);
    }

    #[test]
    fn too_big_for_the_egress_is_packet_too_big_with_its_mtu_quoting_1280_bytes_at_most() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        // 1,500 bytes of IPv6 towards eth4's MTU of 1,400.
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 1500 - 48);
        let orig = f.clone();
        let Action::Reply { port, len, cause } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!((port, cause), (P5, Reason::PacketTooBig));
        assert_eq!(usize::from(len), 14 + 1280, "as long as IPv6's minimum MTU allows");
        let (_, _, _, t, c, rest, quote) = parse_error(&s[..usize::from(len)]);
        assert_eq!((t, c, rest), (icmpv6::PACKET_TOO_BIG, 0, 1400));
        assert_eq!(quote, &orig[14..14 + 1280 - 48]);
        // Exactly the MTU passes.
        let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 1400 - 48);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P4));
    }

    #[test]
    fn a_link_local_source_cannot_leave_its_link() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("fe80::1", "2001:2:100::7", 64, 0);
        let Action::Reply { port, len, cause } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!((port, cause), (P5, Reason::BeyondScope));
        let (from, to, _, t, c, _, _) = parse_error(&s[..usize::from(len)]);
        assert_eq!((t, c), (icmpv6::DEST_UNREACHABLE, icmpv6::CODE_BEYOND_SCOPE));
        assert_eq!((from, to), (ip("fe80::5"), ip("fe80::1")), "link-local to link-local, back where it came from");
        // Back out of the port it came in on, it stays on its link: forwarded.
        let mut f = udp("fe80::1", "2001:2:0:10::1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P5));
    }

    #[test]
    fn errors_are_never_sent_about_icmpv6_errors_and_are_rate_limited_but_packet_too_big() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let icmp = |msg: Icmpv6Type, hops: u8, payload: usize| {
            let b = PacketBuilder::ethernet2(H1.0, ETH5.0)
                .ipv6(ip("2001:2:0:10::1").octets(), ip("2001:9::1").octets(), hops)
                .icmpv6(msg);
            let mut v = Vec::new();
            b.write(&mut v, &vec![0; payload]).unwrap();
            v
        };
        let mut f = icmp(Icmpv6Type::PacketTooBig { mtu: 1280 }, 64, 48);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::NoRoute), "about an error: none");
        let mut f = icmp(Icmpv6Type::EchoRequest(etherparse::IcmpEchoHeader { id: 1, seq: 1 }), 64, 8);
        assert!(matches!(run(&mut f, &mut w, &mut s), Action::Reply { .. }), "about a query: yes");
        // An error behind a destination options header is still an error.
        let mut f = icmp(Icmpv6Type::TimeExceeded(etherparse::icmpv6::TimeExceededCode::HopLimitExceeded), 64, 48);
        let mut opts = f[..14 + 40].to_vec();
        opts[14 + 6] = 60;
        opts[14 + 5] += 8;
        opts.extend_from_slice(&[58, 0, 1, 4, 0, 0, 0, 0]);
        opts.extend_from_slice(&f[14 + 40..]);
        f = opts;
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::NoRoute));
        // A later fragment of anything shows no ICMPv6 header: answered, whatever its data.
        let mut f = udp("2001:2:0:10::1", "2001:9::1", 64, 24);
        let mut frag = f[..14 + 40].to_vec();
        frag[14 + 6] = ipv6::NEXT_HEADER_FRAGMENT;
        frag[14 + 5] += 8;
        frag.extend_from_slice(&[58, 0, 0, 8, 0, 0, 0, 1]);
        frag.extend_from_slice(&[0; 32]);
        f = frag;
        assert!(matches!(run(&mut f, &mut w, &mut s), Action::Reply { .. }), "a later fragment with data 0x00");
        // The bucket: two errors a second, burst two; Packet Too Big is exempt.
        w.2 = RouterState::new(2, 2);
        let mut replies = 0;
        for _ in 0..5 {
            let mut f = udp("2001:2:0:10::1", "2001:9::1", 64, 0);
            replies += usize::from(matches!(run(&mut f, &mut w, &mut s), Action::Reply { .. }));
        }
        assert_eq!((replies, w.2.icmp_rate_limited), (2, 3));
        for _ in 0..5 {
            let mut f = udp("2001:2:0:10::1", "2001:2:100::7", 64, 1500 - 48);
            assert!(matches!(run(&mut f, &mut w, &mut s), Action::Reply { cause: Reason::PacketTooBig, .. }));
        }
    }

    #[test]
    fn echo_requests_to_the_box_are_answered_and_the_rest_is_the_kernels() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let b = || {
            PacketBuilder::ethernet2(H1.0, ETH5.0)
                .ipv6(ip("2001:2:0:10::1").octets(), ip("2001:2:0:30::1").octets(), 60)
                .icmpv6_echo_request(0x1234, 7)
        };
        let mut f = Vec::new();
        b().write(&mut f, b"ping6 data").unwrap();
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P5));
        assert_eq!((&f[0..6], &f[6..12]), (&H1.0[..], &ETH5.0[..]));
        let (h, rest) = Ipv6Header::from_slice(&f[14..]).unwrap();
        assert_eq!(
            (Ipv6Addr::from(h.source), Ipv6Addr::from(h.destination)),
            (ip("2001:2:0:30::1"), ip("2001:2:0:10::1"))
        );
        assert_eq!(h.hop_limit, 64);
        let (m, data) = Icmpv6Header::from_slice(rest).unwrap();
        assert_eq!(m.icmp_type, Icmpv6Type::EchoReply(etherparse::IcmpEchoHeader { id: 0x1234, seq: 7 }));
        assert_eq!(m.checksum, m.icmp_type.calc_checksum(h.source, h.destination, data).unwrap());
        assert_eq!(data, b"ping6 data");
        // A bad checksum, or anything else to the box: the kernel's.
        let mut g = Vec::new();
        b().write(&mut g, b"ping6 data").unwrap();
        let last = g.len() - 1;
        g[last] ^= 1;
        assert_eq!(run(&mut g, &mut w, &mut s), Action::Drop(Reason::LocalDelivery));
        let mut f = udp("2001:2:0:10::1", "2001:2:0:30::1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::LocalDelivery));
    }
}
