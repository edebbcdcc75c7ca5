//! Neighbour discovery (RFC 4861), as the IPv6 family of the neighbour resolver
//! ([`super::engine`]): it answers solicitations for the box's IPv6 addresses and resolves
//! IPv6 next hops, on the same thread and with the same timers as ARP.
//!
//! Behaviour, as Linux does it for a router:
//! - a solicitation for one of the box's addresses on the port it belongs to is answered with
//!   an advertisement with the Router, Solicited and Override flags and the port's MAC, and
//!   its sender learnt (when it gave its MAC and is on link: a link-local address, or on a
//!   prefix of that port); a solicitation from the unspecified address (duplicate address
//!   detection by another node) is answered to all nodes, unsolicited, and nobody is learnt;
//!   solicitations for other addresses are not answered (link-local ones are the kernel's,
//!   which owns them and answers);
//! - an advertisement updates an existing entry, or creates one we asked for; one without the
//!   Override flag does not change a known MAC; only a solicited one confirms reachability (an
//!   answer to a unicast probe may carry no link-layer address: Linux's does not, and it
//!   confirms the entry); one for the box's own address is a conflict;
//! - a next hop is resolved with solicitations to its solicited-node group from the box's
//!   address Linux would choose ([`RouterTables::source6`]) with the port's MAC; stale entries
//!   are probed with unicast solicitations; the packets that waited for a neighbour that never
//!   answered are answered with Destination Unreachable, address unreachable (code 3);
//! - the box does not run duplicate address detection for its own addresses: they are
//!   configured on xfwd, not on the kernel, and a conflict is counted (`conflicts`) when another
//!   node claims one. Router advertisements are not sent (a routing daemon's, or radvd's, job).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::engine::{Family, Resolver};
use crate::action::{Action, SCRATCH_LEN};
use crate::l3::family::{ErrorEnv, RouterState};
use crate::l3::neighbors::{Key6, NeighborTable, NeighborTable6};
use crate::l3::router::{icmp_error, IcmpError};
use crate::l3::router6::{icmp6_error, Icmp6Error};
use crate::l3::tables::{connected_to6, is_link_local6, scope6, unscope6, NhKind6, RouterTables};
use crate::wire::ethernet::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::wire::icmpv6::{self, Ndp};
use crate::wire::{ipv6, EthernetFrame, Icmpv6Packet, Ipv6Packet, MacAddr};
use crate::PortId;

/// The all-nodes group, where an answer to duplicate address detection goes.
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// IPv6's family: neighbour solicitations and ICMPv6 Address Unreachable.
#[derive(Debug)]
pub struct Nd;

/// The neighbour discovery engine: the resolver for IPv6.
pub type NdpEngine = Resolver<Nd>;

/// Writes a whole neighbour discovery frame (Ethernet, IPv6 with hop limit 255, the message
/// from `write`) into `out`.
fn nd_frame(
    out: &mut Vec<u8>,
    eth_dst: MacAddr,
    me: MacAddr,
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
    write: impl FnOnce(&mut [u8]) -> Result<usize, crate::wire::Error>,
) {
    const LEN: usize = icmpv6::NDP_LEN + icmpv6::LLADDR_OPTION_LEN;
    let mut frame = [0u8; ethernet::HEADER_LEN + ipv6::HEADER_LEN + LEN];
    let Ok(mut eth) = EthernetFrame::new_checked(&mut frame[..]) else { return };
    eth.set_dst(eth_dst);
    eth.set_src(me);
    eth.set_ethertype(ETHERTYPE_IPV6);
    let Ok(mut ip) =
        Ipv6Packet::emit(eth.payload_mut(), LEN as u16, ipv6::NEXT_HEADER_ICMPV6, icmpv6::NDP_HOP_LIMIT, src, dst)
    else {
        return;
    };
    if write(ip.payload_mut()).is_ok() {
        out.extend_from_slice(&frame);
    }
}

impl Family for Nd {
    type Addr = Key6;
    type Peer = Ipv4Addr;

    fn from_ip(a: IpAddr) -> Option<Key6> {
        match a {
            IpAddr::V6(a) => Some(Key6 { addr: a, port: None }),
            IpAddr::V4(_) => None,
        }
    }

    fn request(tables: &RouterTables, port: PortId, me: MacAddr, target: Key6, to: Option<MacAddr>, out: &mut Vec<u8>) {
        // On the wire the address without its port; never from the unspecified address (that
        // would be duplicate address detection).
        let target = unscope6(target);
        let Some(src) = tables.source6(target, port) else { return };
        let group = icmpv6::solicited_node(&target);
        let (dst, eth_dst) = match to {
            Some(mac) => (target, mac),
            None => (group, icmpv6::multicast_mac(&group)),
        };
        nd_frame(out, eth_dst, me, &src, &dst, |b| icmpv6::write_ns(b, &target, me, &src, &dst));
    }

    fn unreachable(
        frame: &[u8],
        ingress: PortId,
        tables: &RouterTables,
        (neighbors6, neighbors): (&NeighborTable6, &NeighborTable),
        state: &mut RouterState,
        now: u64,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let mut env = ErrorEnv { ingress, tables, neighbors, neighbors6, state, now_ms: now, scratch };
        // An IPv4 packet that waited for an IPv6 gateway (RFC 5549): ICMP Host Unreachable,
        // as for an IPv4 next hop.
        if EthernetFrame::new_checked(frame).is_ok_and(|e| e.ethertype() == ETHERTYPE_IPV4) {
            return icmp_error(frame, &mut env, IcmpError::HOST_UNREACHABLE);
        }
        icmp6_error(frame, &mut env, Icmp6Error::ADDRESS_UNREACHABLE)
    }

    fn connected_port(tables: &RouterTables, a: Key6) -> Option<PortId> {
        connected_to6(&tables.ports, a.addr)
    }

    fn key(a: Key6, port: PortId) -> Key6 {
        scope6(a.addr, port)
    }
}

impl Resolver<Nd> {
    /// Announces the box's IPv6 addresses on `port` (its link-local one too) with its current
    /// MAC: an unsolicited Neighbor Advertisement with the override flag to all nodes per
    /// address (RFC 4861 section 7.2.6), after the port's MAC changed.
    pub fn announce(&mut self, port: PortId) {
        let tables = self.tables.load_full();
        let Some(spec) = tables.ports.get(port.index()) else { return };
        let me = spec.mac;
        let flags = icmpv6::NA_ROUTER | icmpv6::NA_OVERRIDE;
        let eth_dst = icmpv6::multicast_mac(&ALL_NODES);
        for a in spec.addrs6.iter().map(|&(a, _)| a).chain(spec.link_local) {
            let mut out = Vec::new();
            nd_frame(&mut out, eth_dst, me, &a, &ALL_NODES, |b| icmpv6::write_na(b, &a, flags, me, &a, &ALL_NODES));
            self.send(port, &out);
            self.counters.announcements_sent.inc();
        }
    }

    /// Whether `a` is on the link of `port`: link-local, or reached straight out of `port`.
    fn on_link(tables: &RouterTables, port: PortId, a: &Ipv6Addr) -> bool {
        is_link_local6(a) || tables.route6(*a).is_some_and(|nh| nh.kind == NhKind6::Connected && nh.port == port)
    }

    /// An IPv6 frame that arrived on `port` at `now` (ms); neighbour solicitations and
    /// advertisements are acted on, anything else (or anything invalid) is ignored.
    pub fn on_ndp(&mut self, port: PortId, frame: &[u8], now: u64) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else { return };
        if eth.ethertype() != ETHERTYPE_IPV6 {
            return;
        }
        let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else { return };
        let (src, dst) = (ip.src(), ip.dst());
        if ip.next_header() != ipv6::NEXT_HEADER_ICMPV6
            || !Icmpv6Packet::new_checked(ip.payload()).is_ok_and(|m| m.checksum_ok(&src, &dst))
        {
            return;
        }
        let Some(msg) = Ndp::parse(ip.payload(), &src, &dst, ip.hop_limit()) else { return };
        let tables = self.tables.load_full();
        let Some(spec) = tables.ports.get(port.index()) else { return };
        let me = self.mac(port);
        match msg {
            Ndp::Solicitation { target, source_mac } => {
                self.counters.requests_received.inc();
                if !spec.addrs6.iter().any(|&(a, _)| a == target) {
                    return;
                }
                // Another node using one of the box's addresses as its source.
                if tables.is_local6(src) {
                    self.counters.conflicts.inc();
                    return;
                }
                let flags = icmpv6::NA_ROUTER | icmpv6::NA_OVERRIDE;
                let mut out = Vec::new();
                if src.is_unspecified() {
                    let eth_dst = icmpv6::multicast_mac(&ALL_NODES);
                    nd_frame(&mut out, eth_dst, me, &target, &ALL_NODES, |b| {
                        icmpv6::write_na(b, &target, flags, me, &target, &ALL_NODES)
                    });
                } else {
                    let eth_dst = source_mac.unwrap_or(eth.src());
                    let flags = flags | icmpv6::NA_SOLICITED;
                    nd_frame(&mut out, eth_dst, me, &target, &src, |b| {
                        icmpv6::write_na(b, &target, flags, me, &target, &src)
                    });
                }
                if !out.is_empty() {
                    self.send(port, &out);
                    self.counters.replies_sent.inc();
                }
                if let Some(mac) = source_mac.filter(|m| !m.is_multicast() && !m.is_zero()) {
                    if !src.is_unspecified() && Self::on_link(&tables, port, &src) {
                        self.learn(scope6(src, port), mac, port, now);
                    }
                }
            }
            Ndp::Advertisement { target, target_mac, flags } => {
                self.counters.replies_received.inc();
                if tables.is_local6(target) {
                    self.counters.conflicts.inc();
                    return;
                }
                if !Self::on_link(&tables, port, &target) {
                    return;
                }
                let solicited = flags & icmpv6::NA_SOLICITED != 0;
                let target = scope6(target, port);
                let known = self.neighbors.lookup(target, port);
                let mac = target_mac.filter(|m| !m.is_multicast() && !m.is_zero());
                match (mac, known) {
                    // The answer to a unicast probe: Linux leaves the link-layer address out
                    // (RFC 4861 7.2.4 lets it), and a solicited one confirms what we have.
                    (None, Some(_)) if solicited => self.confirm((target, port), now),
                    (None, _) => {}
                    // Without Override, a known link-layer address is kept (RFC 4861 7.2.5).
                    (Some(mac), Some(n)) if n.mac != mac && flags & icmpv6::NA_OVERRIDE == 0 => {}
                    // Only a solicited advertisement confirms reachability; an unsolicited one
                    // changes the address (with Override) and leaves the entry to its probes.
                    (Some(mac), Some(n)) if !solicited => {
                        if n.mac != mac {
                            self.relearn(target, mac, port);
                        }
                    }
                    (Some(mac), known) => {
                        let asked = self.pending.contains_key(&(target, port));
                        if asked || known.is_some() {
                            self.learn(target, mac, port, now);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::engine::{ArpConfig, ArpCounters, Glean, REACHABLE_MS, RETRANS_MS};
    use super::*;
    use crate::l3::fib::no_advice;
    use crate::l3::tables::{PortSpec, RouteTarget6};
    use crate::l3::testing::port;
    use arc_swap::ArcSwap;
    use etherparse::{Icmpv6Header, Icmpv6Type, Ipv6Header, PacketBuilder};
    use std::sync::Arc;

    const A5: MacAddr = MacAddr([2, 0, 0, 0, 5, 5]);
    const A4: MacAddr = MacAddr([2, 0, 0, 0, 4, 4]);
    const H1: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const H2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const P5: PortId = PortId(0);
    const P4: PortId = PortId(1);

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn engine(glean_queue: usize) -> (NdpEngine, Arc<NeighborTable6>, Arc<ArpCounters>) {
        let ports = vec![
            PortSpec { link_local: Some(ip("fe80::5")), ..port("eth5", A5, &["198.18.10.2/24", "2001:2:0:10::2/64"]) },
            PortSpec { link_local: Some(ip("fe80::4")), ..port("eth4", A4, &["2001:2:0:30::1/64"]) },
        ];
        let statics = [("2001:2:200::/48".parse().unwrap(), RouteTarget6::Via { gw: ip("fe80::99"), dev: Some(P4) })];
        let t = RouterTables::build_dual(ports, &[], &statics, no_advice).unwrap();
        let neighbors = Arc::new(NeighborTable6::new6(64));
        let counters = Arc::new(ArpCounters::default());
        let cfg = ArpConfig { glean_queue, max_pending: 64, icmp_rate: 0, icmp_burst: 10 };
        let tables = Arc::new(ArcSwap::from_pointee(t));
        let peer = Arc::new(NeighborTable::new(8));
        let e = NdpEngine::new(tables, (Arc::clone(&neighbors), peer), cfg, Arc::clone(&counters));
        (e, neighbors, counters)
    }

    /// A neighbour discovery frame from `mac`/`src` to `dst` (to `eth_dst`).
    fn nd(eth_dst: MacAddr, mac: MacAddr, src: &str, dst: &str, write: impl FnOnce(&mut [u8]) -> usize) -> Vec<u8> {
        let mut msg = [0u8; 32];
        let n = write(&mut msg);
        let mut v = Vec::new();
        let h = Ipv6Header {
            payload_length: n as u16,
            next_header: etherparse::IpNumber::IPV6_ICMP,
            hop_limit: 255,
            source: ip(src).octets(),
            destination: ip(dst).octets(),
            ..Default::default()
        };
        v.extend_from_slice(&eth_dst.0);
        v.extend_from_slice(&mac.0);
        v.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        v.extend_from_slice(&h.to_bytes());
        v.extend_from_slice(&msg[..n]);
        v
    }

    fn ns(mac: MacAddr, src: &str, dst: &str, target: &str) -> Vec<u8> {
        let eth_dst = if ip(dst).is_multicast() { icmpv6::multicast_mac(&ip(dst)) } else { A4 };
        nd(eth_dst, mac, src, dst, |b| {
            let n = icmpv6::write_ns(b, &ip(target), mac, &ip(src), &ip(dst)).unwrap();
            if ip(src).is_unspecified() {
                // Duplicate address detection carries no source link-layer address option.
                b[24..32].fill(0);
                Icmpv6Packet::new_checked(&mut b[..24]).unwrap().fill_checksum(&ip(src), &ip(dst));
                return 24;
            }
            n
        })
    }

    fn na(mac: MacAddr, target: &str, flags: u32) -> Vec<u8> {
        nd(A4, mac, target, "2001:2:0:30::1", |b| {
            icmpv6::write_na(b, &ip(target), flags, mac, &ip(target), &ip("2001:2:0:30::1")).unwrap()
        })
    }

    /// (port, eth dst, ip src, ip dst, type, flags word, target, link-layer option) of a
    /// neighbour discovery frame in the output, its checksum checked by etherparse.
    #[allow(clippy::type_complexity, reason = "a test's whole view of one frame")]
    fn parse(out: &(PortId, Vec<u8>)) -> (PortId, MacAddr, Ipv6Addr, Ipv6Addr, u8, u32, Ipv6Addr, MacAddr) {
        let f = &out.1;
        let (h, rest) = Ipv6Header::from_slice(&f[14..]).unwrap();
        assert_eq!(h.hop_limit, 255);
        let (m, body) = Icmpv6Header::from_slice(rest).unwrap();
        assert_eq!(m.checksum, m.icmp_type.calc_checksum(h.source, h.destination, body).unwrap());
        let b = m.to_bytes();
        (
            out.0,
            MacAddr(f[0..6].try_into().unwrap()),
            h.source.into(),
            h.destination.into(),
            b[0],
            u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            Ipv6Addr::from(<[u8; 16]>::try_from(&body[..16]).unwrap()),
            MacAddr(body[18..24].try_into().unwrap()),
        )
    }

    fn udp_from_h1(dst: &str) -> Vec<u8> {
        let mut v = Vec::new();
        PacketBuilder::ethernet2(H1.0, A5.0)
            .ipv6(ip("2001:2:0:10::1").octets(), ip(dst).octets(), 63)
            .udp(1000, 9)
            .write(&mut v, b"payload!")
            .unwrap();
        v
    }

    fn glean(e: &mut NdpEngine, hop: &str, dst: &str, now: u64) {
        let frame = udp_from_h1(dst);
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V6(ip(hop)), frame: &frame }, now);
    }

    #[test]
    fn a_gateway_claimed_on_another_port_stays_on_its_own_with_its_waiting_frames() {
        // Kernel mode, the NDP form of the attack: a host on eth5 makes the kernel hold a
        // second entry for eth4's gateway (global and link-local) on eth5. The gateway's
        // frames (routed out of eth4) wait for eth4's entry and leave by eth4 to it.
        let (mut e, n, _) = engine(4);
        e.resolve_by_kernel();
        let spoofer = H1;
        for (hop, dst) in [("2001:2:0:30::7", "2001:2:100::1"), ("fe80::99", "2001:2:200::1")] {
            let (on4, on5) = (scope6(ip(hop), P4), scope6(ip(hop), P5));
            glean(&mut e, hop, dst, 0);
            assert_eq!(e.take_asks(), vec![(P4, on4)]);
            e.kernel_entry(on5, P5, Some(spoofer), false, 10);
            assert!(e.take_output().is_empty(), "{hop}: the frames waiting on eth4 stay");
            assert_eq!((n.lookup(on4, P4), n.lookup(on5, P5).map(|x| x.mac)), (None, Some(spoofer)), "{hop}");
            e.kernel_entry(on4, P4, Some(H2), false, 20);
            let out = e.take_output();
            assert_eq!(out.iter().map(|(p, f)| (*p, &f[0..6])).collect::<Vec<_>>(), [(P4, &H2.0[..])], "{hop}");
            e.kernel_entry(on5, P5, None, true, 30);
            assert_eq!(n.lookup(on4, P4).map(|x| x.mac), Some(H2), "{hop}: eth5's removal leaves eth4's");
        }
    }

    #[test]
    fn a_solicitation_for_our_address_is_answered_as_a_router_and_the_solicitor_learnt() {
        let (mut e, n, c) = engine(4);
        e.on_ndp(P4, &ns(H2, "2001:2:0:30::2", "ff02::1:ff00:1", "2001:2:0:30::1"), 0);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        let flags = icmpv6::NA_ROUTER | icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE;
        assert_eq!(
            parse(&out[0]),
            (
                P4,
                H2,
                ip("2001:2:0:30::1"),
                ip("2001:2:0:30::2"),
                icmpv6::NEIGHBOR_ADVERTISEMENT,
                flags,
                ip("2001:2:0:30::1"),
                A4
            )
        );
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::2")), P4).map(|x| (x.mac, x.port)), Some((H2, P4)));
        assert_eq!((c.requests_received.get(), c.replies_sent.get(), c.learnt.get()), (1, 1, 1));
        // For an address of the other port, or a link-local one (the kernel's): no answer.
        e.on_ndp(P4, &ns(H2, "2001:2:0:30::2", "ff02::1:ff00:2", "2001:2:0:10::2"), 1);
        e.on_ndp(P4, &ns(H2, "fe80::2", "ff02::1:ff00:4", "fe80::4"), 1);
        assert!(e.take_output().is_empty());
        // A bad checksum, or a hop limit other than 255, is ignored.
        let mut bad = ns(H2, "2001:2:0:30::3", "ff02::1:ff00:1", "2001:2:0:30::1");
        let last = bad.len() - 1;
        bad[last] ^= 1;
        e.on_ndp(P4, &bad, 2);
        let mut far = ns(H2, "2001:2:0:30::3", "ff02::1:ff00:1", "2001:2:0:30::1");
        far[14 + 7] = 254;
        e.on_ndp(P4, &far, 2);
        assert!(e.take_output().is_empty());
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::3")), P4), None);
    }

    #[test]
    fn a_port_whose_mac_changed_announces_every_address_with_the_new_one() {
        let (mut e, _, c) = engine(4);
        const NEW: MacAddr = MacAddr([2, 0, 0, 0, 0x44, 0x45]);
        let old = e.tables.load();
        let mut ports = old.ports.clone();
        ports[P4.index()].mac = NEW;
        let statics: Vec<_> = Vec::new();
        e.tables.store(Arc::new(RouterTables::build_dual(ports, &[], &statics, no_advice).unwrap()));
        e.announce(P4);
        let out = e.take_output();
        let got: Vec<_> = out.iter().map(parse).map(|p| (p.0, p.1, p.3, p.4, p.5, p.6, p.7)).collect();
        let na = |a: &str| {
            (
                P4,
                MacAddr([0x33, 0x33, 0, 0, 0, 1]),
                ip("ff02::1"),
                136,
                icmpv6::NA_ROUTER | icmpv6::NA_OVERRIDE,
                ip(a),
                NEW,
            )
        };
        assert_eq!(got, [na("2001:2:0:30::1"), na("fe80::4")]);
        assert_eq!(c.announcements_sent.get(), 2);
    }

    #[test]
    fn duplicate_address_detection_is_answered_to_all_nodes_unsolicited_and_teaches_nothing() {
        let (mut e, n, _) = engine(4);
        e.on_ndp(P4, &ns(H2, "::", "ff02::1:ff00:1", "2001:2:0:30::1"), 0);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        let p = parse(&out[0]);
        assert_eq!(
            (p.1, p.3, p.5),
            (MacAddr([0x33, 0x33, 0, 0, 0, 1]), ip("ff02::1"), icmpv6::NA_ROUTER | icmpv6::NA_OVERRIDE)
        );
        assert!(n.is_empty());
    }

    #[test]
    fn a_gleaned_frame_waits_for_the_advertisement_then_leaves_rewritten() {
        let (mut e, n, c) = engine(4);
        glean(&mut e, "2001:2:0:30::2", "2001:2:0:30::2", 0);
        let out = e.take_output();
        assert_eq!(out.len(), 1, "one solicitation");
        assert_eq!(
            parse(&out[0]),
            (
                P4,
                MacAddr([0x33, 0x33, 0xff, 0, 0, 2]),
                ip("2001:2:0:30::1"),
                ip("ff02::1:ff00:2"),
                icmpv6::NEIGHBOR_SOLICITATION,
                0,
                ip("2001:2:0:30::2"),
                A4
            )
        );
        e.on_ndp(P4, &na(H2, "2001:2:0:30::2", icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE), 5);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, &out[0].1[0..6], &out[0].1[6..12]), (P4, &H2.0[..], &A4.0[..]));
        assert_eq!(&out[0].1[12..], &udp_from_h1("2001:2:0:30::2")[12..], "only the MACs change");
        assert!(n.lookup(Key6::global(ip("2001:2:0:30::2")), P4).is_some());
        assert_eq!((c.glean_queued.get(), c.glean_sent.get()), (1, 1));
        // A link-local gateway is asked from the port's link-local address.
        glean(&mut e, "fe80::99", "2001:2:200::1", 10);
        let p = parse(&e.take_output()[0]);
        assert_eq!((p.2, p.3, p.6), (ip("fe80::4"), ip("ff02::1:ff00:99"), ip("fe80::99")));
    }

    #[test]
    fn the_same_link_local_address_on_two_ports_is_two_neighbours() {
        let (mut e, n, _) = engine(4);
        let ll = ip("fe80::99");
        for (port, mac) in [(P4, H2), (P5, H1)] {
            let frame = udp_from_h1("2001:2:200::1");
            e.on_glean(Glean { ingress: P5, port, next_hop: IpAddr::V6(ll), frame: &frame }, 0);
            e.take_output();
            let na = nd(MacAddr([2, 0, 0, 0, 5 - port.0, 5 - port.0]), mac, "fe80::99", "fe80::4", |b| {
                icmpv6::write_na(b, &ll, icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE, mac, &ll, &ip("fe80::4")).unwrap()
            });
            e.on_ndp(port, &na, 1);
            assert_eq!(e.take_output().len(), 1, "the waiting frame leaves by {port:?}");
        }
        assert_eq!(n.lookup(scope6(ll, P4), P4).map(|x| (x.mac, x.port)), Some((H2, P4)));
        assert_eq!(n.lookup(scope6(ll, P5), P5).map(|x| (x.mac, x.port)), Some((H1, P5)));
    }

    #[test]
    fn a_link_local_gateway_with_bits_16_to_31_set_is_asked_and_kept_under_its_own_address() {
        let (mut e, n, _) = engine(4);
        // fe80:3::23 and fe80::23 on one port: Linux takes both as gateways, and they are two.
        let (odd, plain) = (ip("fe80:3::23"), ip("fe80::23"));
        let frame = udp_from_h1("2001:2:200::1");
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V6(odd), frame: &frame }, 0);
        let p = parse(&e.take_output()[0]);
        assert_eq!((p.3, p.6), (icmpv6::solicited_node(&odd), odd), "the solicitation asks for fe80:3::23 itself");
        let na = nd(A4, H2, "fe80:3::23", "fe80::4", |b| {
            icmpv6::write_na(b, &odd, icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE, H2, &odd, &ip("fe80::4")).unwrap()
        });
        e.on_ndp(P4, &na, 1);
        assert_eq!(e.take_output().len(), 1, "the waiting frame leaves");
        assert_eq!(n.lookup(scope6(odd, P4), P4).map(|x| (x.mac, x.ip.addr)), Some((H2, odd)));
        assert_eq!(n.lookup(scope6(plain, P4), P4), None, "fe80::23 is another neighbour, still unknown");
    }

    /// An IPv4 UDP packet from H1 (198.18.10.1) to `dst`, TTL already decremented.
    fn udp4_from_h1(dst: [u8; 4]) -> Vec<u8> {
        let mut v = Vec::new();
        PacketBuilder::ethernet2(H1.0, A5.0)
            .ipv4([198, 18, 10, 1], dst, 63)
            .udp(1000, 9)
            .write(&mut v, b"ipv4!")
            .unwrap();
        v
    }

    #[test]
    fn an_ipv4_frame_through_an_ipv6_gateway_is_resolved_by_neighbour_discovery() {
        // RFC 5549: an IPv4 route via fe80::99 on eth4. The frame waits for the gateway like an
        // IPv6 one and leaves with its MAC, the IPv4 packet untouched.
        let (mut e, n, c) = engine(4);
        let frame = udp4_from_h1([198, 19, 5, 5]);
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V6(ip("fe80::99")), frame: &frame }, 0);
        let p = parse(&e.take_output()[0]);
        assert_eq!((p.0, p.2, p.4, p.6), (P4, ip("fe80::4"), icmpv6::NEIGHBOR_SOLICITATION, ip("fe80::99")));
        let ll = ip("fe80::99");
        let na = nd(A4, H2, "fe80::99", "fe80::4", |b| {
            icmpv6::write_na(
                b,
                &ll,
                icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE | icmpv6::NA_ROUTER,
                H2,
                &ll,
                &ip("fe80::4"),
            )
            .unwrap()
        });
        e.on_ndp(P4, &na, 5);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, &out[0].1[0..6], &out[0].1[6..12]), (P4, &H2.0[..], &A4.0[..]));
        assert_eq!(&out[0].1[12..], &frame[12..], "only the MACs change");
        assert_eq!(n.lookup(scope6(ll, P4), P4).map(|x| x.mac), Some(H2));
        assert_eq!((c.glean_queued.get(), c.glean_sent.get()), (1, 1));
        // An IPv4 frame shorter than its headers is refused, as an IPv6 one is.
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V6(ll), frame: &frame[..33] }, 6);
        assert_eq!(c.glean_dropped.get(), 1);
    }

    #[test]
    fn an_ipv4_frame_whose_ipv6_gateway_never_answers_gets_icmp_host_unreachable() {
        let (mut e, _, c) = engine(4);
        let frame = udp4_from_h1([198, 19, 5, 5]);
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V6(ip("fe80::98")), frame: &frame }, 0);
        let mut out = e.take_output();
        for t in [1000, 2000, 3000] {
            e.timers(t);
            out.extend(e.take_output());
        }
        let errors: Vec<_> = out.iter().filter(|o| o.1[12..14] == [0x08, 0x00]).collect();
        assert_eq!(errors.len(), 1, "{out:?}");
        let (port, f) = errors[0];
        assert_eq!((*port, &f[0..6]), (P5, &H1.0[..]), "back where the packet came from");
        let (h, rest) = etherparse::Ipv4Header::from_slice(&f[14..]).unwrap();
        assert_eq!((h.source, h.destination), ([198, 18, 10, 2], [198, 18, 10, 1]));
        let (m, quoted) = etherparse::Icmpv4Header::from_slice(rest).unwrap();
        assert_eq!(
            m.icmp_type,
            etherparse::Icmpv4Type::DestinationUnreachable(etherparse::icmpv4::DestUnreachableHeader::Host)
        );
        assert_eq!(&quoted[..20], &frame[14..34], "the IPv4 header quoted");
        assert_eq!((c.unresolved.get(), c.host_unreachable_sent.get()), (1, 1));
    }

    #[test]
    fn an_unresolved_neighbour_gets_three_solicitations_then_address_unreachable() {
        let (mut e, n, c) = engine(4);
        glean(&mut e, "2001:2:0:30::99", "2001:2:0:30::99", 0);
        let mut out = e.take_output();
        for t in [500, 1000, 1500, 2000, 2500, 3000] {
            e.timers(t);
            out.extend(e.take_output());
        }
        let sols = out.iter().filter(|o| o.1[14 + 40] == icmpv6::NEIGHBOR_SOLICITATION).count();
        assert_eq!(sols, 3, "retried once a second, three times");
        let errors: Vec<_> = out.iter().filter(|o| o.1[14 + 40] == icmpv6::DEST_UNREACHABLE).collect();
        assert_eq!(errors.len(), 1);
        let (port, f) = errors[0];
        assert_eq!((*port, &f[0..6]), (P5, &H1.0[..]), "back where the packet came from");
        let (h, rest) = Ipv6Header::from_slice(&f[14..]).unwrap();
        assert_eq!(
            (Ipv6Addr::from(h.source), Ipv6Addr::from(h.destination)),
            (ip("2001:2:0:10::2"), ip("2001:2:0:10::1"))
        );
        let (m, _) = Icmpv6Header::from_slice(rest).unwrap();
        assert_eq!(m.icmp_type, Icmpv6Type::DestinationUnreachable(etherparse::icmpv6::DestUnreachableCode::Address));
        assert_eq!((c.unresolved.get(), c.host_unreachable_sent.get()), (1, 1));
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::99")), P4), None);
    }

    #[test]
    fn resolved_neighbours_are_probed_by_unicast_solicitations_when_stale() {
        let (mut e, n, _) = engine(4);
        glean(&mut e, "2001:2:0:30::2", "2001:2:0:30::2", 0);
        e.on_ndp(P4, &na(H2, "2001:2:0:30::2", icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE), 5);
        e.take_output();
        e.timers(REACHABLE_MS + 10);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        let p = parse(&out[0]);
        assert_eq!((p.1, p.3, p.6), (H2, ip("2001:2:0:30::2"), ip("2001:2:0:30::2")), "unicast to the known MAC");
        for k in 1..=4 {
            e.timers(REACHABLE_MS + 10 + k * RETRANS_MS);
        }
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::2")), P4), None, "three unanswered probes remove it");
    }

    #[test]
    fn a_probe_answered_as_linux_answers_it_keeps_the_entry() {
        let (mut e, n, _) = engine(4);
        glean(&mut e, "2001:2:0:30::2", "2001:2:0:30::2", 0);
        e.on_ndp(P4, &na(H2, "2001:2:0:30::2", icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE), 5);
        e.take_output();
        // Every probe answered with S=1, O=0 and no target link-layer address option.
        let bare = || {
            nd(A4, H2, "2001:2:0:30::2", "2001:2:0:30::1", |b| {
                icmpv6::write_na(
                    b,
                    &ip("2001:2:0:30::2"),
                    icmpv6::NA_SOLICITED,
                    H2,
                    &ip("2001:2:0:30::2"),
                    &ip("2001:2:0:30::1"),
                )
                .unwrap();
                b[24..32].fill(0);
                Icmpv6Packet::new_checked(&mut b[..24])
                    .unwrap()
                    .fill_checksum(&ip("2001:2:0:30::2"), &ip("2001:2:0:30::1"));
                24
            })
        };
        let mut now = REACHABLE_MS + 10;
        for _ in 0..6 {
            e.timers(now);
            if !e.take_output().is_empty() {
                e.on_ndp(P4, &bare(), now + 1);
            }
            now += RETRANS_MS;
        }
        assert!(n.lookup(Key6::global(ip("2001:2:0:30::2")), P4).is_some(), "answered probes keep the entry");
        // An unsolicited advertisement confirms nothing: unanswered probes still remove it.
        let mut now = now + REACHABLE_MS;
        for _ in 0..6 {
            e.timers(now);
            e.take_output();
            e.on_ndp(P4, &na(H2, "2001:2:0:30::2", icmpv6::NA_OVERRIDE), now + 1);
            now += RETRANS_MS;
        }
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::2")), P4), None);
    }

    #[test]
    fn advertisements_update_what_is_known_or_asked_for_and_override_decides_a_new_mac() {
        let (mut e, n, c) = engine(4);
        e.on_ndp(P4, &na(H2, "2001:2:0:30::7", icmpv6::NA_OVERRIDE), 0);
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::7")), P4), None, "unasked, unknown: not created");
        glean(&mut e, "2001:2:0:30::7", "2001:2:0:30::7", 0);
        e.on_ndp(P4, &na(H2, "2001:2:0:30::7", icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE), 1);
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::7")), P4).unwrap().mac, H2);
        e.on_ndp(P4, &na(H1, "2001:2:0:30::7", 0), 2);
        assert_eq!(
            n.lookup(Key6::global(ip("2001:2:0:30::7")), P4).unwrap().mac,
            H2,
            "no Override: the known MAC stays"
        );
        e.on_ndp(P4, &na(H1, "2001:2:0:30::7", icmpv6::NA_OVERRIDE), 3);
        assert_eq!(
            n.lookup(Key6::global(ip("2001:2:0:30::7")), P4).unwrap().mac,
            H1,
            "unsolicited with Override: the new MAC"
        );
        e.on_ndp(P4, &na(H2, "2001:2:0:30::7", icmpv6::NA_SOLICITED | icmpv6::NA_OVERRIDE), 3);
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::7")), P4).unwrap().mac, H2);
        // Claiming the box's own address is a conflict; off-link targets are ignored.
        e.on_ndp(P4, &na(H1, "2001:2:0:30::1", icmpv6::NA_OVERRIDE), 4);
        assert_eq!(c.conflicts.get(), 1);
        assert_eq!(n.lookup(Key6::global(ip("2001:2:0:30::1")), P4), None);
    }
}
