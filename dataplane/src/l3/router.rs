//! The IPv4 router decision: from one frame, its ingress port, the tables and the time, to an
//! [`Action`]. The steps both families share are in [`super::family`]; this file holds IPv4's
//! own: its header, its martians, its next hop kinds, its ICMP, and the state a worker keeps
//! for both families ([`super::RouterState`]).
//!
//! Pure: no I/O, no clock (time in milliseconds is passed in), no allocation; per-worker mutable
//! state (the ICMP token bucket, the IP identification counter) is passed in too. RFC 1812 where
//! it speaks; what Linux does on the same packet where it does not. In order:
//!
//! 1. The destination MAC must be the ingress port's own ([`Reason::NotOurMac`]); the frame
//!    must be IPv4 ([`Reason::NotIp`]; IPv6 is [`super::router6`]'s) with a valid header ([`Reason::Ipv4Malformed`],
//!    [`Reason::Ipv4Checksum`]).
//! 2. Martian sources are dropped: 0/8, 127/8, 224/4, 255.255.255.255 (and 240/4 with
//!    `limits.rfc1812_martians`, which the kernel forwards).
//!    Destinations that are never forwarded are dropped: 0/8, 127/8, 224/4, 255.255.255.255
//!    (limited broadcast), with `limits.rfc1812_martians` also 240/4 and link-local
//!    169.254/16, and the broadcast address of a connected subnet (directed broadcast).
//! 3. The destination is looked up (longest prefix). No route: ICMP Destination Unreachable,
//!    network unreachable. One of the box's addresses: an ICMP echo request is answered here;
//!    anything else is the kernel's, which the XDP program already gave it.
//! 4. TTL ≤ 1: ICMP Time Exceeded. Then the egress MTU: too big with DF set, ICMP Fragmentation
//!    Needed carrying the egress MTU; too big without DF, dropped ([`Reason::TooBigToForward`]):
//!    xfwd does not fragment (the kernel would; fragmenting would mean several frames from one).
//! 5. TTL is decremented with an incremental checksum update (RFC 1624), the source MAC becomes
//!    the egress port's, the destination MAC the next hop's; a frame whose next hop is
//!    unresolved is [`Action::Glean`]ed to the ARP thread with its MACs untouched. The next hop
//!    of an IPv4 route may be an IPv6 gateway (RFC 5549, what BGP unnumbered installs): its MAC
//!    comes from the IPv6 neighbour table, and it is resolved by neighbour discovery.
//!
//! ICMP errors (RFC 1812 4.3.2.7) are never sent about an ICMP error, a non-first fragment, or
//! a packet from a martian source; they are rate-limited by a token bucket; they quote the
//! offending IP header and the first 8 bytes of its payload; their source is the box's address
//! on the subnet of the route back to the offending source (the address Linux picks); they leave
//! by that route.

use core::net::{IpAddr, Ipv4Addr};

use super::family::{route, send, ErrorEnv, Header, IpFamily, V4};
use super::fib::{Fib, NhIndex, Prefix};
use super::neighbors::{NeighborTable, NeighborTable6};
use super::tables::{scope6, NextHop4, NhKind, NhKind4, RouterTables, Tables4};
use crate::action::Action;
use crate::reason::Reason;
use crate::wire::ethernet::{self, ETHERTYPE_IPV4};
use crate::wire::{icmp, ipv4, EthernetFrame, IcmpPacket, Ipv4Packet, MacAddr};
use crate::PortId;

/// The TTL of the packets the router originates (echo replies, ICMP errors), as Linux's
/// `ip_default_ttl`.
const DEFAULT_TTL: u8 = 64;

/// An ICMP error to send about a frame: why the frame is not forwarded, and the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpError {
    /// Why the original is not forwarded (counted like a drop).
    pub cause: Reason,
    /// ICMP type.
    pub msg_type: u8,
    /// ICMP code.
    pub code: u8,
    /// The word after the checksum (the next-hop MTU for Fragmentation Needed, else 0).
    pub rest: u32,
}

impl IcmpError {
    /// Destination Unreachable, network unreachable.
    pub const NET_UNREACHABLE: IcmpError = IcmpError {
        cause: Reason::NoRoute,
        msg_type: icmp::DEST_UNREACHABLE,
        code: icmp::CODE_NET_UNREACHABLE,
        rest: 0,
    };
    /// Destination Unreachable, host unreachable (the next hop did not resolve).
    pub const HOST_UNREACHABLE: IcmpError = IcmpError {
        cause: Reason::NoRoute,
        msg_type: icmp::DEST_UNREACHABLE,
        code: icmp::CODE_HOST_UNREACHABLE,
        rest: 0,
    };
    /// Destination Unreachable, host unreachable, for a route of the `unreachable` type.
    pub const UNREACHABLE_ROUTE: IcmpError = IcmpError {
        cause: Reason::UnreachableRoute,
        msg_type: icmp::DEST_UNREACHABLE,
        code: icmp::CODE_HOST_UNREACHABLE,
        rest: 0,
    };
    /// Destination Unreachable, communication administratively prohibited (a `prohibit` route).
    pub const PROHIBITED: IcmpError = IcmpError {
        cause: Reason::Prohibited,
        msg_type: icmp::DEST_UNREACHABLE,
        code: icmp::CODE_ADMIN_PROHIBITED,
        rest: 0,
    };
    /// Destination Unreachable, network unreachable, for a route out of an interface xfwd does
    /// not own.
    pub const FOREIGN_EGRESS: IcmpError = IcmpError {
        cause: Reason::ForeignEgress,
        msg_type: icmp::DEST_UNREACHABLE,
        code: icmp::CODE_NET_UNREACHABLE,
        rest: 0,
    };
    /// Destination Unreachable, network unreachable, for a route xfwd cannot forward.
    pub const UNSUPPORTED: IcmpError = IcmpError {
        cause: Reason::UnsupportedRoute,
        msg_type: icmp::DEST_UNREACHABLE,
        code: icmp::CODE_NET_UNREACHABLE,
        rest: 0,
    };
    /// Time Exceeded in transit.
    pub const TTL_EXCEEDED: IcmpError =
        IcmpError { cause: Reason::TtlExceeded, msg_type: icmp::TIME_EXCEEDED, code: icmp::CODE_TTL_EXCEEDED, rest: 0 };

    /// Parameter Problem pointing at octet `at` of the IP header (a malformed option).
    pub const fn bad_option(at: u8) -> IcmpError {
        IcmpError { cause: Reason::Ipv4BadOption, msg_type: icmp::PARAMETER_PROBLEM, code: 0, rest: (at as u32) << 24 }
    }

    /// Fragmentation Needed, with the next-hop MTU.
    pub const fn frag_needed(mtu: u32) -> IcmpError {
        IcmpError {
            cause: Reason::FragmentationNeeded,
            msg_type: icmp::DEST_UNREACHABLE,
            code: icmp::CODE_FRAG_NEEDED,
            rest: mtu,
        }
    }
}

#[inline]
/// 0/8, 127/8, 224/4 (multicast) and 255.255.255.255: never a source of forwarded traffic,
/// never forwarded to, by the kernel either; with `strict` (RFC 1812 section 5.3.7) class E,
/// 240/4, too, which the kernel forwards.
fn never_routed(a: Ipv4Addr, strict: bool) -> bool {
    let o = a.octets()[0];
    o == 0 || o == 127 || (224..240).contains(&o) || a.is_broadcast() || (strict && o >= 240)
}

#[inline]
fn link_local(a: Ipv4Addr) -> bool {
    let o = a.octets();
    o[0] == 169 && o[1] == 254
}

/// What is wrong with a packet's IPv4 options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptionFault {
    /// A loose or strict source route (dropped, as the kernel does by default).
    SourceRoute,
    /// An option that runs past the header or has a length below 2, at this offset into the
    /// options (its type octet, where the kernel's Parameter Problem points).
    Malformed(usize),
}

/// LSRR and SSRR (RFC 791).
const OPT_LSRR: u8 = 131;
const OPT_SSRR: u8 = 137;

/// Walks IPv4 options (the bytes after the 20-byte header): each is End of List, No
/// Operation, or type, length (at least 2, within the header) and value. Record Route,
/// Timestamp and the others are left as they are: forwarded untouched (the kernel fills in
/// Record Route and Timestamp; xfwd does not).
fn check_options(options: &[u8]) -> Result<(), OptionFault> {
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            0 => return Ok(()),
            1 => i += 1,
            kind => {
                let Some(&len) = options.get(i + 1) else { return Err(OptionFault::Malformed(i)) };
                let len = usize::from(len);
                if len < 2 || i + len > options.len() {
                    return Err(OptionFault::Malformed(i));
                }
                if kind == OPT_LSRR || kind == OPT_SSRR {
                    return Err(OptionFault::SourceRoute);
                }
                i += len;
            }
        }
    }
    Ok(())
}

/// The batch's table stage: prefetches the FIB entry for the frame's IPv4 destination, read
/// where an untagged IPv4 header has it, without any check (a hint: no effect on results).
#[inline]
pub fn prefetch(frame: &[u8], t: &RouterTables) {
    if let Some(dst) = frame.get(ethernet::HEADER_LEN..).and_then(ipv4::peek_dst) {
        t.v4.fib.prefetch(dst);
    }
}

impl IpFamily for V4 {
    type Addr = Ipv4Addr;
    type NextHop = NextHop4;
    type Fib = Fib;
    type Prefix = Prefix;
    type Error = IcmpError;
    const ETHERTYPE: u16 = ETHERTYPE_IPV4;
    // No route is network unreachable (host unreachable is for a neighbour that never answers).
    const NO_ROUTE: IcmpError = IcmpError::NET_UNREACHABLE;
    const TTL_EXCEEDED: IcmpError = IcmpError::TTL_EXCEEDED;
    const UNREACHABLE_ROUTE: IcmpError = IcmpError::UNREACHABLE_ROUTE;
    const PROHIBITED: IcmpError = IcmpError::PROHIBITED;
    const FOREIGN_EGRESS: IcmpError = IcmpError::FOREIGN_EGRESS;
    const UNSUPPORTED: IcmpError = IcmpError::UNSUPPORTED;

    /// IPv4's header: the checksum, the options, then the martians (sources and destinations
    /// never routed, the box's own addresses as sources, link-local destinations under
    /// `rfc1812_martians`).
    #[inline(always)]
    fn decide(frame: &mut [u8], env: &mut ErrorEnv<'_>) -> Action {
        let (src, dst, ttl, total_len, dont_frag, header_len) =
            match Ipv4Packet::new_checked(&frame[ethernet::HEADER_LEN..]) {
                Ok(ip) if !ip.checksum_ok() => return Action::Drop(Reason::Ipv4Checksum),
                Ok(ip) => (ip.src(), ip.dst(), ip.ttl(), ip.total_len(), ip.dont_frag(), ip.header_len()),
                Err(_) => return Action::Drop(Reason::Ipv4Malformed),
            };
        if header_len > ipv4::MIN_HEADER_LEN {
            let options = &frame[ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN..ethernet::HEADER_LEN + header_len];
            match check_options(options) {
                Ok(()) => {}
                Err(OptionFault::SourceRoute) => return Action::Drop(Reason::SourceRouted),
                Err(OptionFault::Malformed(at)) => {
                    return icmp_error(frame, env, IcmpError::bad_option((ipv4::MIN_HEADER_LEN + at) as u8))
                }
            }
        }
        let t = env.tables;
        let strict = t.rfc1812_martians;
        if never_routed(src, strict) {
            return Action::Drop(Reason::MartianSource);
        }
        if never_routed(dst, strict) {
            return Action::Drop(Reason::MartianDestination);
        }
        // From one of the box's own addresses: never a forwarded packet (the kernel drops it as
        // a martian source). A few compares in cache, no table read.
        if t.ports.iter().any(|p| p.addrs.iter().any(|&(a, _)| a == src)) {
            return Action::Drop(Reason::LocalSource);
        }
        if strict && link_local(dst) {
            return Action::Drop(Reason::LinkLocalDestination);
        }
        route::<V4>(frame, env, Header { src, dst, ttl, ip_len: total_len, dont_frag })
    }

    /// The IPv4 half of the tables.
    #[inline(always)]
    fn tables(t: &RouterTables) -> &Tables4 {
        &t.v4
    }

    #[inline(always)]
    fn lookup(fib: &Fib, dst: Ipv4Addr) -> Option<NhIndex> {
        fib.lookup(dst)
    }

    /// A route through an IPv6 gateway (RFC 5549) goes to that gateway, which
    /// [`V4::resolve`] and [`V4::glean`] name: the IPv4 address returned is not used.
    #[inline(always)]
    fn neighbor(nh: &NextHop4, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        match nh.kind {
            NhKind::Connected => Some(dst),
            NhKind::Gateway(gw) => Some(match gw {
                IpAddr::V4(gw) => gw,
                IpAddr::V6(_) => dst,
            }),
            _ => None,
        }
    }

    /// Broadcast routes are not forwarded; an echo request to the box is answered.
    fn not_forwarded(frame: &mut [u8], env: &mut ErrorEnv<'_>, nh: &NextHop4) -> Action {
        match nh.kind {
            NhKind::Broadcast => Action::Drop(Reason::DirectedBroadcast),
            NhKind::Local => local(frame, env.ingress, env.tables, env.neighbors, env.neighbors6),
            NhKind::Special(s) => s.answer::<V4>(frame, env),
            // Groups hold plain next hops only.
            _ => Action::Drop(Reason::NoEgress),
        }
    }

    /// IPv4 has no scope the router enforces (link-local destinations are screened above).
    #[inline(always)]
    fn beyond_scope(_src: Ipv4Addr, _egress: PortId, _ingress: PortId) -> Option<IcmpError> {
        None
    }

    /// With DF, Fragmentation Needed; without, dropped: xfwd does not fragment.
    #[inline(always)]
    fn too_big(mtu: u32, dont_frag: bool) -> Result<IcmpError, Reason> {
        if dont_frag {
            Ok(IcmpError::frag_needed(mtu.min(0xffff)))
        } else {
            Err(Reason::TooBigToForward)
        }
    }

    /// The TTL, with the incremental checksum update (RFC 1624).
    #[inline(always)]
    fn decrement(frame: &mut [u8]) {
        if let Ok(mut ip) = Ipv4Packet::new_checked(&mut frame[ethernet::HEADER_LEN..]) {
            ip.decrement_ttl();
        }
    }

    /// Gateways (IPv4 or IPv6) through the worker's cache, keyed by both neighbour tables'
    /// generations; an on-link destination straight from the table.
    #[inline(always)]
    fn resolve(env: &mut ErrorEnv<'_>, idx: usize, nh: &NextHop4, next_hop: Ipv4Addr) -> Option<(MacAddr, PortId)> {
        let (neighbors, neighbors6) = (env.neighbors, env.neighbors6);
        let key = || (env.tables.id, neighbors.generation(), neighbors6.generation());
        match nh.kind {
            // The gateway by reference: read only when the cache misses (a copy of the
            // address, taken for every frame, cost 4 instructions a frame).
            NhKind::Gateway(ref gw) => {
                let key = key();
                env.state.nh_cache.get(idx, key, || gateway_mac(gw, nh.port, (neighbors, neighbors6)))
            }
            _ => neighbors.lookup(next_hop, nh.port).map(|n| (n.mac, n.port)),
        }
    }

    #[inline(always)]
    fn glean(nh: &NextHop4, next_hop: Ipv4Addr) -> IpAddr {
        match nh.kind {
            NhKind::Gateway(IpAddr::V6(gw)) => IpAddr::V6(gw),
            _ => IpAddr::V4(next_hop),
        }
    }

    #[inline(always)]
    fn error(frame: &[u8], env: &mut ErrorEnv<'_>, e: IcmpError) -> Action {
        icmp_error(frame, env, e)
    }
}

/// A packet for one of the box's addresses that reached a worker: answer an echo request.
fn local(
    frame: &mut [u8],
    ingress: PortId,
    t: &RouterTables,
    neighbors: &NeighborTable,
    neighbors6: &NeighborTable6,
) -> Action {
    let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) else {
        return Action::Drop(Reason::Runt);
    };
    let (src, is_echo) = match Ipv4Packet::new_checked(eth.payload()) {
        Ok(ip) => {
            let unfragmented = !ip.more_frags() && ip.frag_offset() == 0;
            let echo = ip.protocol() == ipv4::PROTO_ICMP
                && unfragmented
                && IcmpPacket::new_checked(ip.payload())
                    .is_ok_and(|m| m.msg_type() == icmp::ECHO_REQUEST && m.checksum_ok());
            (ip.src(), echo)
        }
        Err(_) => return Action::Drop(Reason::Ipv4Malformed),
    };
    if !is_echo {
        return Action::Drop(Reason::LocalDelivery);
    }
    // The reply leaves by the route back to the pinger.
    let Some(back) = t.route(src).copied() else {
        return Action::Drop(Reason::NoRoute);
    };
    let Some(l2_dst) = back_mac(eth.src(), ingress, back.port, back.kind, src, (neighbors, neighbors6)) else {
        return Action::Drop(Reason::NoRoute);
    };
    let egress = &t.ports[back.port.index()];
    let total = {
        let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) else {
            return Action::Drop(Reason::Ipv4Malformed);
        };
        if ip.total_len() > egress.mtu as usize {
            // The reply would exceed the MTU of the way back; xfwd does not fragment.
            return Action::Drop(Reason::TooBigToForward);
        }
        ip.swap_addresses();
        ip.set_ttl(DEFAULT_TTL);
        if let Ok(mut m) = IcmpPacket::new_checked(ip.payload_mut()) {
            m.echo_request_to_reply();
        }
        ip.total_len()
    };
    send(frame, back.port, egress.mac, l2_dst, total)
}

/// The MAC and port the neighbour tables have for gateway `gw` of a route out of `port`: an
/// IPv4 gateway's from the ARP table, an IPv6 one's (RFC 5549) from the NDP table, where a
/// link-local one is known by its port.
#[inline]
fn gateway_mac(
    gw: &IpAddr,
    port: PortId,
    (neighbors, neighbors6): (&NeighborTable, &NeighborTable6),
) -> Option<(MacAddr, PortId)> {
    match *gw {
        IpAddr::V4(gw) => neighbors.lookup(gw, port).map(|n| (n.mac, n.port)),
        IpAddr::V6(gw) => neighbors6.lookup(scope6(gw, port), port).map(|n| (n.mac, n.port)),
    }
}

/// The MAC to send to for a packet going back to `src` through a next hop of `kind` on `port`:
/// the neighbour's, or, when it leaves by the port the frame came in on and the neighbour is
/// not resolved, `sender`, the frame's Ethernet source (the previous hop).
fn back_mac(
    sender: MacAddr,
    ingress: PortId,
    port: PortId,
    kind: NhKind4,
    src: Ipv4Addr,
    (neighbors, neighbors6): (&NeighborTable, &NeighborTable6),
) -> Option<MacAddr> {
    let found = match kind {
        NhKind::Gateway(ref gw) => gateway_mac(gw, port, (neighbors, neighbors6)),
        NhKind::Connected => neighbors.lookup(src, port).map(|n| (n.mac, n.port)),
        NhKind::Local | NhKind::Broadcast | NhKind::Special(_) | NhKind::Group { .. } => return None,
    };
    match found {
        Some((mac, p)) if p == port => Some(mac),
        _ if port == ingress => Some(sender),
        _ => None,
    }
}

/// Answers the frame (received on `ingress`, its Ethernet source still the sender's) with an
/// ICMP error of `msg_type`/`code` (`rest`: the word after the checksum, e.g. the next-hop MTU),
/// built in `scratch`; or drops it for `cause` when the rules say no error. Also used by the ARP
/// thread for Host Unreachable when a next hop does not resolve.
pub fn icmp_error(frame: &[u8], env: &mut ErrorEnv<'_>, e: IcmpError) -> Action {
    let IcmpError { cause, msg_type, code, rest } = e;
    let (ingress, t, neighbors) = (env.ingress, env.tables, (env.neighbors, env.neighbors6));
    // Callers other than the decision (the ARP thread) may hand any bytes: check, don't slice.
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Action::Drop(cause);
    };
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
        return Action::Drop(cause);
    };
    let src = ip.src();
    if ip.frag_offset() != 0 || src.is_unspecified() {
        return Action::Drop(cause);
    }
    if ip.protocol() == ipv4::PROTO_ICMP && IcmpPacket::new_checked(ip.payload()).map_or(true, |m| m.is_error()) {
        return Action::Drop(cause);
    }
    let Some(back) = t.route(src).copied() else {
        return Action::Drop(cause);
    };
    let Some(l2_dst) = back_mac(eth.src(), ingress, back.port, back.kind, src, neighbors) else {
        return Action::Drop(cause);
    };
    if !env.state.icmp_limit.take(env.now_ms) {
        env.state.icmp_rate_limited += 1;
        return Action::Drop(cause);
    }
    // The offending header and the first bytes of its payload.
    let quote = &eth.payload()[..ip.header_len() + ip.payload().len().min(icmp::QUOTED_PAYLOAD_LEN)];
    let ip_len = ipv4::MIN_HEADER_LEN + icmp::HEADER_LEN + quote.len();
    let len = ethernet::HEADER_LEN + ip_len;
    let Ok(mut out) = EthernetFrame::new_checked(&mut env.scratch[..len]) else {
        return Action::Drop(cause);
    };
    out.set_dst(l2_dst);
    out.set_src(t.ports[back.port.index()].mac);
    out.set_ethertype(ETHERTYPE_IPV4);
    if let Ok(mut m) = IcmpPacket::new_checked(&mut out.payload_mut()[ipv4::MIN_HEADER_LEN..]) {
        m.payload_mut().copy_from_slice(quote);
        m.write_error(msg_type, code, rest);
    }
    env.state.ident = env.state.ident.wrapping_add(1);
    let header = Ipv4Packet::emit(
        out.payload_mut(),
        ip_len as u16,
        env.state.ident,
        DEFAULT_TTL,
        ipv4::PROTO_ICMP,
        back.src,
        src,
    );
    if let Ok(mut h) = header {
        // Precedence "internetwork control" with the offending packet's TOS bits, as Linux
        // marks its ICMP errors; the checksum is updated for it.
        h.set_tos((ip.tos() & ipv4::TOS_BITS) | ipv4::PRECEDENCE_INTERNETWORK_CONTROL);
    }
    Action::Reply { port: back.port, len: len as u16, cause }
}

#[cfg(test)]
mod tests {
    use super::super::tables::{PortSpec, RouteTarget, RouterTables};
    use super::*;
    use crate::action::SCRATCH_LEN;
    use crate::l3::decide;
    use crate::l3::family::{icmp_share, RouterState};
    use crate::l3::testing::port;
    use etherparse::{Icmpv4Header, Icmpv4Type, IpNumber, Ipv4Header, PacketBuilder, SlicedPacket, TransportSlice};

    const H1: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);
    const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x22]);
    const ETH5: MacAddr = MacAddr([2, 0, 0, 0, 5, 5]);
    const ETH4: MacAddr = MacAddr([2, 0, 0, 0, 4, 4]);
    const P_ETH5: PortId = PortId(0);
    const P_ETH4: PortId = PortId(1);

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// Reference shape on the rig's addresses: eth5 = 198.18.10.2/24 + 198.18.11.2/24 towards
    /// the sender side, eth4 = 198.18.30.1/24 + 198.18.31.1/24; 198.19.0.0/16 via 198.18.30.2.
    /// Tables, IPv4 neighbours, state, IPv6 neighbours.
    type World = (RouterTables, NeighborTable, RouterState, NeighborTable6);

    /// A world of tables `t` and the neighbour tables, with a state fitted to `t`.
    fn fitted(t: RouterTables, n: NeighborTable, n6: NeighborTable6) -> World {
        let mut st = RouterState::new(0, 10);
        st.fit(&t);
        (t, n, st, n6)
    }

    fn world() -> World {
        let ports = vec![
            port("eth5", ETH5, &["198.18.10.2/24", "198.18.11.2/24"]),
            PortSpec { mtu: 1400, ..port("eth4", ETH4, &["198.18.30.1/24", "198.18.31.1/24"]) },
        ];
        let t = RouterTables::build(ports, &[("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2")))])
            .unwrap();
        let n = NeighborTable::new(64);
        n.insert(ip("198.18.30.2"), GW, P_ETH4, false).unwrap();
        n.insert(ip("198.18.10.1"), H1, P_ETH5, false).unwrap();
        fitted(t, n, NeighborTable6::new6(64))
    }

    fn udp(src: &str, dst: &str, ttl: u8, payload: usize) -> Vec<u8> {
        let b = PacketBuilder::ethernet2(H1.0, ETH5.0).ipv4(ip(src).octets(), ip(dst).octets(), ttl).udp(4000, 5000);
        let mut v = Vec::new();
        b.write(&mut v, &vec![0x5a; payload]).unwrap();
        v
    }

    fn run(frame: &mut [u8], w: &mut World, scratch: &mut [u8; SCRATCH_LEN]) -> Action {
        decide::<V4>(frame, P_ETH5, &w.0, &w.1, &w.3, &mut w.2, 1_000, scratch)
    }

    /// Parses an ICMP error answer: (ip src, ip dst, type, code, rest word, quoted bytes).
    fn parse_error(out: &[u8]) -> (Ipv4Addr, Ipv4Addr, u8, u8, u32, Vec<u8>) {
        let (h, rest) = Ipv4Header::from_slice(&out[14..]).unwrap();
        assert_eq!(h.header_checksum, h.calc_header_checksum(), "ICMP error's IP checksum");
        assert_eq!(h.protocol, IpNumber::ICMP);
        assert_eq!(h.time_to_live, 64);
        let (icmp_h, quoted) = Icmpv4Header::from_slice(rest).unwrap();
        assert_eq!(icmp_h.checksum, icmp_h.icmp_type.calc_checksum(quoted), "ICMP checksum");
        let b = icmp_h.to_bytes();
        (
            Ipv4Addr::from(h.source),
            Ipv4Addr::from(h.destination),
            b[0],
            b[1],
            u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            quoted.to_vec(),
        )
    }

    /// The same ports with their routes as the kernel would hold them: connected and local
    /// routes, an equal-cost pair of gateways, and the route types that are not forwarded.
    fn mirrored_world() -> World {
        use crate::l3::tables::{Mirrored4, Path, RouteKind, Special};
        let (t, n, _, n6) = world();
        let via = |gw: &str| Path { gw: Some(IpAddr::V4(ip(gw))), port: Some(P_ETH4), weight: 1 };
        let route = |p: &str, kind: RouteKind, paths: Vec<Path<IpAddr>>, mtu: u32, local_table: bool| Mirrored4 {
            prefix: p.parse().unwrap(),
            kind,
            paths,
            mtu,
            protocol: 4,
            local_table,
        };
        let dev = |port| vec![Path { gw: None, port: Some(port), weight: 1 }];
        let routes = vec![
            route("198.18.10.0/24", RouteKind::Unicast, dev(P_ETH5), 0, false),
            route("198.18.30.0/24", RouteKind::Unicast, dev(P_ETH4), 0, false),
            route("198.19.0.0/16", RouteKind::Unicast, vec![via("198.18.30.2"), via("198.18.30.3")], 0, false),
            route("198.19.1.0/24", RouteKind::Special(Special::Blackhole), vec![], 0, false),
            route("198.19.2.0/24", RouteKind::Special(Special::Unreachable), vec![], 0, false),
            route("198.19.3.0/24", RouteKind::Special(Special::Prohibit), vec![], 0, false),
            route("198.19.4.0/24", RouteKind::Unicast, vec![Path { gw: None, port: None, weight: 1 }], 0, false),
            route("198.19.5.0/24", RouteKind::Unicast, vec![via("198.18.30.2")], 1300, false),
            route("198.18.10.2/32", RouteKind::Local, dev(P_ETH5), 0, true),
            route("198.18.30.1/32", RouteKind::Local, dev(P_ETH4), 0, true),
            route("198.18.10.255/32", RouteKind::Broadcast, dev(P_ETH5), 0, true),
        ];
        let t = RouterTables::build_mirrored(t.ports.clone(), &routes, &[], crate::l3::fib::no_advice).unwrap();
        n.insert(ip("198.18.30.3"), H1, P_ETH4, false).unwrap();
        fitted(t, n, n6)
    }

    #[test]
    fn kernel_route_types_are_answered_as_the_kernel_answers_them() {
        let mut w = mirrored_world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 8);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::Blackhole), "blackhole: silent");
        for (dst, cause, code) in [
            ("198.19.2.1", Reason::UnreachableRoute, icmp::CODE_HOST_UNREACHABLE),
            ("198.19.3.1", Reason::Prohibited, icmp::CODE_ADMIN_PROHIBITED),
            ("198.19.4.1", Reason::ForeignEgress, icmp::CODE_NET_UNREACHABLE),
            ("198.18.200.1", Reason::NoRoute, icmp::CODE_NET_UNREACHABLE),
        ] {
            let mut f = udp("198.18.10.1", dst, 64, 8);
            let a = run(&mut f, &mut w, &mut s);
            let Action::Reply { len, cause: got, .. } = a else { panic!("{dst}: {a:?}") };
            assert_eq!(got, cause, "{dst}");
            let (src, to, ty, c, _, _) = parse_error(&s[..len as usize]);
            assert_eq!((src, to, ty, c), (ip("198.18.10.2"), ip("198.18.10.1"), icmp::DEST_UNREACHABLE, code), "{dst}");
        }
        // Even with TTL 1: the route type answers first, as in the kernel's input routing.
        let mut f = udp("198.18.10.1", "198.19.3.1", 1, 8);
        assert!(matches!(run(&mut f, &mut w, &mut s), Action::Reply { cause: Reason::Prohibited, .. }));
        // The local table's addresses and broadcasts stay the box's.
        let mut f = udp("198.18.10.1", "198.18.30.1", 64, 8);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::LocalDelivery));
        let mut f = udp("198.18.10.1", "198.18.10.255", 64, 8);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::DirectedBroadcast));
        // A route's MTU below the port's is the one Fragmentation Needed names.
        let mut f = udp("198.18.10.1", "198.19.5.1", 64, 1300);
        f[14 + 6] |= 0x40;
        let h = Ipv4Header::from_slice(&f[14..]).unwrap().0;
        let c = h.calc_header_checksum().to_be_bytes();
        f[14 + 10..14 + 12].copy_from_slice(&c);
        let Action::Reply { len, cause, .. } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!(cause, Reason::FragmentationNeeded);
        assert_eq!(parse_error(&s[..len as usize]).4 & 0xffff, 1300);
    }

    #[test]
    fn equal_cost_paths_spread_flows_and_keep_each_on_one_path() {
        let mut w = mirrored_world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut seen = std::collections::HashMap::new();
        for sport in 0..64u16 {
            for _ in 0..2 {
                let b = PacketBuilder::ethernet2(H1.0, ETH5.0)
                    .ipv4(ip("198.18.10.1").octets(), ip("198.19.9.9").octets(), 64)
                    .udp(10_000 + sport, 5201);
                let mut f = Vec::new();
                b.write(&mut f, &[0; 8]).unwrap();
                assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
                let mac = MacAddr(f[0..6].try_into().unwrap());
                let first = *seen.entry(sport).or_insert(mac);
                assert_eq!(first, mac, "flow {sport} changed path");
            }
        }
        let gw2 = seen.values().filter(|&&m| m == GW).count();
        assert!(gw2 > 8 && gw2 < 56, "64 flows over two paths: {gw2} on the first");
    }

    #[test]
    fn forwards_with_ttl_checksum_and_mac_rewrite() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 18);
        let before = f.clone();
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        assert_eq!(&f[0..6], &GW.0, "destination MAC = next hop");
        assert_eq!(&f[6..12], &ETH4.0, "source MAC = egress port");
        let Some(etherparse::NetSlice::Ipv4(ip4)) = p.net else { panic!() };
        let h = ip4.header().to_header();
        assert_eq!(h.time_to_live, 63);
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!(&f[14 + 20..], &before[14 + 20..], "payload untouched");
        // Connected destination: the destination itself is the neighbour.
        let mut f = udp("198.19.7.7", "198.18.10.1", 9, 0);
        f[0..6].copy_from_slice(&ETH4.0);
        assert_eq!(decide::<V4>(&mut f, P_ETH4, &w.0, &w.1, &w.3, &mut w.2, 0, &mut s), Action::Forward(P_ETH5));
        assert_eq!(&f[0..6], &H1.0);
    }

    /// The world with IPv4 routes through an IPv6 gateway, fe80::9 on eth4 (RFC 5549): to
    /// 198.19.0.0/16, and back to 203.0.113.0/24.
    fn world_via6() -> World {
        let (t, n, _, n6) = world();
        let gw = RouteTarget::Via { gw: IpAddr::V6("fe80::9".parse().unwrap()), dev: Some(P_ETH4) };
        let statics = [("198.19.0.0/16".parse().unwrap(), gw), ("203.0.113.0/24".parse().unwrap(), gw)];
        let t = RouterTables::build(t.ports.clone(), &statics).unwrap();
        fitted(t, n, n6)
    }

    #[test]
    fn an_ipv4_route_through_an_ipv6_gateway_leaves_with_the_mac_neighbour_discovery_found() {
        use super::super::neighbors::Key6;
        let mut w = world_via6();
        let mut s = [0u8; SCRATCH_LEN];
        let ll: core::net::Ipv6Addr = "fe80::9".parse().unwrap();
        // Unresolved: gleaned for neighbour discovery, under the IPv6 gateway.
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 8);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Glean { port: P_ETH4, next_hop: IpAddr::V6(ll) });
        assert_eq!(f[14 + 8], 63, "TTL already decremented");
        // The same link-local address on another port is another neighbour.
        w.3.insert(scope6(ll, P_ETH5), GW, P_ETH5, false).unwrap();
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 8);
        assert!(matches!(run(&mut f, &mut w, &mut s), Action::Glean { .. }));
        // Resolved on eth4: forwarded with its MAC, TTL and checksum as for an IPv4 gateway.
        w.3.insert(scope6(ll, P_ETH4), GW, P_ETH4, false).unwrap();
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 8);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        assert_eq!((&f[0..6], &f[6..12]), (&GW.0[..], &ETH4.0[..]));
        let (h, _) = Ipv4Header::from_slice(&f[14..]).unwrap();
        assert_eq!((h.time_to_live, h.header_checksum), (63, h.calc_header_checksum()));
        // The gateway's MAC changes: the next frame follows (the gateway cache is keyed by
        // the IPv6 table's generation too).
        const NEW: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x33]);
        w.3.insert(Key6 { addr: ll, port: Some(P_ETH4) }, NEW, P_ETH4, false).unwrap();
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 8);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        assert_eq!(&f[0..6], &NEW.0);
        // An ICMP error whose way back is through the IPv6 gateway goes to its MAC, from the
        // egress port's address.
        let mut f = udp("203.0.113.7", "198.18.31.5", 1, 8);
        let a = run(&mut f, &mut w, &mut s);
        let Action::Reply { port, len, cause } = a else { panic!("{a:?}") };
        assert_eq!((port, cause), (P_ETH4, Reason::TtlExceeded));
        let out = &s[..usize::from(len)];
        assert_eq!(&out[0..6], &NEW.0);
        let (src, dst, ty, ..) = parse_error(out);
        assert_eq!((src, dst, ty), (ip("198.18.30.1"), ip("203.0.113.7"), icmp::TIME_EXCEEDED));
    }

    #[test]
    fn unresolved_next_hop_is_gleaned() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.18.31.77", 64, 0);
        assert_eq!(
            run(&mut f, &mut w, &mut s),
            Action::Glean { port: P_ETH4, next_hop: IpAddr::V4(ip("198.18.31.77")) }
        );
        assert_eq!(f[14 + 8], 63, "TTL already decremented");
        assert_eq!(&f[6..12], &H1.0, "the sender's MAC is kept for a possible ICMP error");
    }

    #[test]
    fn ttl_one_gets_time_exceeded_from_the_ingress_subnet_address() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 1, 30);
        let a = run(&mut f, &mut w, &mut s);
        let Action::Reply { port, len, cause } = a else { panic!("{a:?}") };
        assert_eq!((port, cause), (P_ETH5, Reason::TtlExceeded));
        let out = &s[..len as usize];
        assert_eq!(&out[0..6], &H1.0);
        assert_eq!(&out[6..12], &ETH5.0);
        let (src, dst, ty, code, _, quoted) = parse_error(out);
        assert_eq!((src, dst, ty, code), (ip("198.18.10.2"), ip("198.18.10.1"), icmp::TIME_EXCEEDED, 0));
        assert_eq!(quoted, f[14..14 + 28].to_vec(), "quotes the header and 8 bytes");
        // From the second subnet on the same port, the source follows the subnet.
        let mut f = udp("198.18.11.9", "198.19.1.1", 1, 30);
        let Action::Reply { len, .. } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!(parse_error(&s[..len as usize]).0, ip("198.18.11.2"));
    }

    /// `f` (an IPv4 frame of `udp`) with `options` after its 20-byte header.
    fn with_options(f: &[u8], options: &[u8]) -> Vec<u8> {
        assert_eq!(options.len() % 4, 0);
        let mut v = [&f[..34], options, &f[34..]].concat();
        v[14] = 0x40 | ((20 + options.len()) / 4) as u8;
        let total = (u16::from_be_bytes([v[16], v[17]]) as usize + options.len()) as u16;
        v[16..18].copy_from_slice(&total.to_be_bytes());
        v[24..26].copy_from_slice(&[0, 0]);
        let sum = crate::wire::checksum::checksum(&v[14..14 + 20 + options.len()]);
        v[24..26].copy_from_slice(&sum.to_be_bytes());
        v
    }

    #[test]
    fn ipv4_options_are_checked_source_routes_dropped_and_others_forwarded_untouched() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let f = udp("198.18.10.1", "198.19.1.1", 64, 8);
        // Record Route (7 bytes, room for one address) then End of List: forwarded, the
        // option as it came (xfwd does not record; the kernel would).
        let rr = [7, 7, 4, 0, 0, 0, 0, 0];
        let mut g = with_options(&f, &rr);
        assert_eq!(run(&mut g, &mut w, &mut s), Action::Forward(P_ETH4));
        assert_eq!(&g[34..42], &rr);
        // No Operation padding around a Timestamp option: forwarded.
        let mut g = with_options(&f, &[1, 68, 4, 5, 0, 0, 0, 0]);
        assert_eq!(run(&mut g, &mut w, &mut s), Action::Forward(P_ETH4));
        // Loose and strict source routes: dropped, as the kernel does by default.
        for kind in [131u8, 137] {
            let mut g = with_options(&f, &[1, kind, 7, 4, 198, 18, 30, 2]);
            assert_eq!(run(&mut g, &mut w, &mut s), Action::Drop(Reason::SourceRouted), "option {kind}");
        }
        // An option running past the header, of length 1, or cut before its length: Parameter
        // Problem pointing at its type octet, as the kernel's does (header offset 20, and 20 + 1
        // behind a NOP; measured against the kernel in tests/router.rs).
        for (opts, at) in [([7u8, 40, 4, 0], 20u32), ([1, 7, 1, 0], 21), ([1, 1, 1, 68], 23)] {
            let mut g = with_options(&f, &opts);
            let a = run(&mut g, &mut w, &mut s);
            let Action::Reply { cause, len, .. } = a else { panic!("{opts:?}: {a:?}") };
            assert_eq!(cause, Reason::Ipv4BadOption);
            let (_, dst, ty, code, rest, _) = parse_error(&s[..len as usize]);
            assert_eq!((dst, ty, code, rest >> 24), (ip("198.18.10.1"), icmp::PARAMETER_PROBLEM, 0, at), "{opts:?}");
        }
    }

    #[test]
    fn a_source_that_is_one_of_the_boxs_addresses_is_dropped() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        for own in ["198.18.10.2", "198.18.31.1"] {
            let mut f = udp(own, "198.19.1.1", 64, 0);
            assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::LocalSource), "{own}");
        }
        let mut f = udp("198.18.10.3", "198.19.1.1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
    }

    #[test]
    fn no_route_is_net_unreachable() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "203.0.113.9", 64, 8);
        let Action::Reply { len, cause, .. } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!(cause, Reason::NoRoute);
        let (src, _, ty, code, _, _) = parse_error(&s[..len as usize]);
        assert_eq!((src, ty, code), (ip("198.18.10.2"), icmp::DEST_UNREACHABLE, icmp::CODE_NET_UNREACHABLE));
    }

    #[test]
    fn df_over_the_egress_mtu_is_frag_needed_with_the_mtu() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 1400);
        assert_eq!(f[14 + 6] & 0x40, 0x40, "etherparse sets DF");
        let Action::Reply { len, cause, .. } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!(cause, Reason::FragmentationNeeded);
        let (_, _, ty, code, rest, _) = parse_error(&s[..len as usize]);
        assert_eq!((ty, code, rest), (icmp::DEST_UNREACHABLE, icmp::CODE_FRAG_NEEDED, 1400));
        // Without DF: dropped, not fragmented.
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 1400);
        f[14 + 6] = 0;
        let c = crate::wire::checksum::checksum(&{
            let mut h = f[14..34].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        f[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::TooBigToForward));
        // Exactly the MTU fits.
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 1400 - 28);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
    }

    #[test]
    fn never_forwarded_destinations_and_martian_sources() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let kernel = [
            ("0.1.2.3", "198.19.1.1", Reason::MartianSource),
            ("127.0.0.1", "198.19.1.1", Reason::MartianSource),
            ("224.0.0.5", "198.19.1.1", Reason::MartianSource),
            ("255.255.255.255", "198.19.1.1", Reason::MartianSource),
            ("198.18.10.1", "255.255.255.255", Reason::MartianDestination),
            ("198.18.10.1", "239.1.1.1", Reason::MartianDestination),
            ("198.18.10.1", "127.0.0.1", Reason::MartianDestination),
            ("198.18.10.1", "0.0.0.7", Reason::MartianDestination),
            ("198.18.10.1", "198.18.31.255", Reason::DirectedBroadcast),
        ];
        for (src, dst, why) in kernel {
            let mut f = udp(src, dst, 64, 0);
            assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(why), "{src} -> {dst}");
        }
        // As the kernel does, class E sources are forwarded, and class E and 169.254/16
        // destinations are routed (here: no route, so Net Unreachable).
        let mut f = udp("240.0.0.1", "198.19.1.1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        for dst in ["240.1.1.1", "169.254.1.1", "255.255.255.254"] {
            let mut f = udp("198.18.10.1", dst, 64, 0);
            assert!(matches!(run(&mut f, &mut w, &mut s), Action::Reply { .. }), "{dst}: Net Unreachable");
        }
        // RFC 1812's stricter rule, where asked for: those are dropped too.
        w.0.rfc1812_martians = true;
        let strict = [
            ("240.0.0.1", "198.19.1.1", Reason::MartianSource),
            ("198.18.10.1", "240.1.1.1", Reason::MartianDestination),
            ("198.18.10.1", "169.254.1.1", Reason::LinkLocalDestination),
        ];
        for (src, dst, why) in kernel.into_iter().chain(strict) {
            let mut f = udp(src, dst, 64, 0);
            assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(why), "strict: {src} -> {dst}");
        }
    }

    #[test]
    fn frames_not_for_us_or_broken_are_dropped_with_reasons() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        f[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::NotOurMac));
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::NotIp));
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        f[14 + 8] = 9; // TTL changed, checksum not
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::Ipv4Checksum));
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        f[14] = 0x44;
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::Ipv4Malformed));
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        f.truncate(30);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::Ipv4Malformed));
        assert_eq!(run(&mut [0u8; 10], &mut w, &mut s), Action::Drop(Reason::Runt));
    }

    #[test]
    fn no_icmp_error_about_an_icmp_error_or_a_later_fragment() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        // A Time Exceeded message, itself with TTL 1.
        let b = PacketBuilder::ethernet2(H1.0, ETH5.0)
            .ipv4(ip("198.18.10.1").octets(), ip("198.19.1.1").octets(), 1)
            .icmpv4(Icmpv4Type::TimeExceeded(etherparse::icmpv4::TimeExceededCode::TtlExceededInTransit));
        let mut f = Vec::new();
        b.write(&mut f, &[0u8; 28]).unwrap();
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::TtlExceeded));
        // An echo request with TTL 1 does get one.
        let b = PacketBuilder::ethernet2(H1.0, ETH5.0)
            .ipv4(ip("198.18.10.1").octets(), ip("198.19.1.1").octets(), 1)
            .icmpv4_echo_request(1, 1);
        let mut f = Vec::new();
        b.write(&mut f, &[0u8; 8]).unwrap();
        assert!(matches!(run(&mut f, &mut w, &mut s), Action::Reply { cause: Reason::TtlExceeded, .. }));
        // A non-first fragment with TTL 1: silently dropped.
        let mut f = udp("198.18.10.1", "198.19.1.1", 1, 16);
        let mut h = Ipv4Header::from_slice(&f[14..]).unwrap().0;
        h.fragment_offset = etherparse::IpFragOffset::try_new(2).unwrap();
        h.dont_fragment = false;
        h.header_checksum = h.calc_header_checksum();
        f[14..34].copy_from_slice(&h.to_bytes());
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::TtlExceeded));
    }

    #[test]
    fn icmp_errors_are_rate_limited() {
        let mut w = world();
        w.2 = RouterState::new(10, 3);
        let mut s = [0u8; SCRATCH_LEN];
        let mut sent = 0;
        for i in 0..20 {
            let mut f = udp("198.18.10.1", "203.0.113.9", 64, 0);
            // 20 packets over 114 ms: the burst of 3, and one more token (10/s × 0.114 s).
            if matches!(
                decide::<V4>(&mut f, P_ETH5, &w.0, &w.1, &w.3, &mut w.2, 1000 + i * 6, &mut s),
                Action::Reply { .. }
            ) {
                sent += 1;
            }
        }
        assert_eq!(sent, 4);
        assert_eq!(w.2.icmp_rate_limited, 16);
        let mut f = udp("198.18.10.1", "203.0.113.9", 64, 0);
        assert!(
            matches!(decide::<V4>(&mut f, P_ETH5, &w.0, &w.1, &w.3, &mut w.2, 5000, &mut s), Action::Reply { .. }),
            "refilled"
        );
    }

    #[test]
    fn an_icmp_limit_is_shared_out_and_never_rounds_to_unlimited() {
        // Three workers and the ARP thread.
        assert_eq!(icmp_share(1000, 50, 4), (250, 12));
        // 0 is "no limit" and stays so; a positive limit never becomes 0 (which would lift it).
        assert_eq!(icmp_share(0, 50, 4), (0, 12));
        assert_eq!(icmp_share(3, 2, 4), (1, 1));
        // No parts is one part.
        assert_eq!(icmp_share(10, 5, 0), (10, 5));
    }

    #[test]
    fn echo_to_the_box_is_answered_and_other_local_traffic_is_not_ours() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let b = PacketBuilder::ethernet2(H1.0, ETH5.0)
            .ipv4(ip("198.18.10.1").octets(), ip("198.18.30.1").octets(), 7)
            .icmpv4_echo_request(0x1234, 5);
        let mut f = Vec::new();
        b.write(&mut f, b"abcdefgh").unwrap();
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH5));
        assert_eq!(&f[0..6], &H1.0);
        assert_eq!(&f[6..12], &ETH5.0);
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip4)) = &p.net else { panic!() };
        let h = ip4.header().to_header();
        assert_eq!((Ipv4Addr::from(h.source), Ipv4Addr::from(h.destination)), (ip("198.18.30.1"), ip("198.18.10.1")));
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        let Some(TransportSlice::Icmpv4(m)) = &p.transport else { panic!() };
        assert!(matches!(m.icmp_type(), Icmpv4Type::EchoReply(e) if e.id == 0x1234 && e.seq == 5));
        assert_eq!(m.header().checksum, m.icmp_type().calc_checksum(m.payload()));
        // UDP to the box: the kernel's (the XDP program passes it; a worker counts it).
        let mut f = udp("198.18.10.1", "198.18.10.2", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Drop(Reason::LocalDelivery));
    }

    #[test]
    fn bytes_after_the_ip_packet_are_not_forwarded() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        // A 100-byte IP packet followed by 900 bytes of junk in one frame.
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 72);
        f.resize(14 + 100 + 900, 0xee);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::ForwardTrimmed { port: P_ETH4, len: 114 });
        // Ethernet padding of a short packet stays as it is.
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        f.resize(60, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
    }

    #[test]
    fn icmp_errors_keep_the_tos_bits_under_internetwork_control() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 1, 8);
        f[15] = 0x10 | 0x02; // low delay, plus an ECN bit
        let c = crate::wire::checksum::checksum(&{
            let mut h = f[14..34].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let Action::Reply { len, .. } = run(&mut f, &mut w, &mut s) else { panic!() };
        assert_eq!(s[15], 0xc0 | 0x10 | 0x02 & 0x1e);
        parse_error(&s[..usize::from(len)]);
    }

    #[test]
    fn an_echo_reply_over_the_mtu_of_the_way_back_is_dropped() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        // From behind eth4 (MTU 1400), a 1450-byte echo to the box's eth5 address.
        let b = PacketBuilder::ethernet2(GW.0, ETH4.0)
            .ipv4(ip("198.18.30.2").octets(), ip("198.18.10.2").octets(), 64)
            .icmpv4_echo_request(1, 1);
        let mut f = Vec::new();
        b.write(&mut f, &[0u8; 1450 - 28]).unwrap();
        assert_eq!(
            decide::<V4>(&mut f, P_ETH4, &w.0, &w.1, &w.3, &mut w.2, 0, &mut s),
            Action::Drop(Reason::TooBigToForward)
        );
    }

    #[test]
    fn a_gateways_address_learnt_on_another_port_does_not_take_its_frames() {
        // The same address on eth5 (a host there claiming it) is another neighbour: the route
        // through eth4 keeps its gateway's MAC, cached or not.
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let spoofer = MacAddr([2, 0, 0, 0, 0x66, 0x66]);
        w.1.insert(ip("198.18.30.2"), spoofer, P_ETH5, false).unwrap();
        for _ in 0..2 {
            let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
            assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
            assert_eq!(&f[0..6], &GW.0);
        }
        w.1.remove(ip("198.18.30.2"), P_ETH4);
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        assert_eq!(
            run(&mut f, &mut w, &mut s),
            Action::Glean { port: P_ETH4, next_hop: IpAddr::V4(ip("198.18.30.2")) },
            "eth5's entry does not stand in for eth4's"
        );
    }

    #[test]
    fn a_cached_gateway_follows_neighbour_changes_and_new_tables() {
        let mut w = world();
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        assert_eq!(&f[0..6], &GW.0);
        // The gateway moves to another MAC: the very next packet uses it.
        let moved = MacAddr([2, 0, 0, 0, 0, 0x33]);
        w.1.insert(ip("198.18.30.2"), moved, P_ETH4, false).unwrap();
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        run(&mut f, &mut w, &mut s);
        assert_eq!(&f[0..6], &moved.0);
        // It disappears: the packet waits for ARP instead of using the cached MAC.
        w.1.remove(ip("198.18.30.2"), P_ETH4);
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        assert_eq!(
            run(&mut f, &mut w, &mut s),
            Action::Glean { port: P_ETH4, next_hop: IpAddr::V4(ip("198.18.30.2")) }
        );
        // New tables (a reload) where the same prefix goes through another gateway.
        w.1.insert(ip("198.18.30.2"), GW, P_ETH4, false).unwrap();
        w.1.insert(ip("198.18.31.9"), moved, P_ETH4, false).unwrap();
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        run(&mut f, &mut w, &mut s);
        assert_eq!(&f[0..6], &GW.0);
        w.0 = RouterTables::build(
            w.0.ports.clone(),
            &[("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.31.9")))],
        )
        .unwrap();
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        run(&mut f, &mut w, &mut s);
        assert_eq!(&f[0..6], &moved.0, "the new tables' gateway, not the cached one");
    }

    #[test]
    fn a_gateway_beyond_the_fitted_cache_is_looked_up_and_the_cache_never_grows_in_a_decision() {
        let mut w = world();
        // The state as a worker has it right after a reload, before its round fits the cache.
        w.2 = RouterState::new(0, 10);
        let mut s = [0u8; SCRATCH_LEN];
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        assert_eq!(&f[0..6], &GW.0);
        assert!(w.2.nh_cache.is_empty(), "the decision sized the cache");
        // Fitted (as the worker's next round does), the same gateway is cached.
        w.2.fit(&w.0);
        assert_eq!(w.2.nh_cache.len(), w.0.v4.nexthops.len());
        let mut f = udp("198.18.10.1", "198.19.1.1", 64, 0);
        assert_eq!(run(&mut f, &mut w, &mut s), Action::Forward(P_ETH4));
        assert_eq!(&f[0..6], &GW.0);
        assert_eq!(w.2.nh_cache.iter().flatten().count(), 1, "one gateway cached");
    }
}
