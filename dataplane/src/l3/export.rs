//! The XDP path's tables, taken from the workers' own: which next hops the XDP program
//! forwards through and what it needs of each, and the routes and neighbours it looks up, for
//! IPv4 and IPv6 alike. `io::program::xdp` writes them into the program's maps; this module does no I/O.
//!
//! The program forwards only the common case and hands everything else to the workers
//! (bpf/xfwd.bpf.c, `fast4` and `fast6`), so what it may forward through is narrow on purpose:
//! a plain next hop out of a port, through a gateway of the route's own family or on link; the
//! next MAC (the gateway's or the destination's) comes from the neighbours it is given, on that
//! port, looked up for each frame, so a route's entry depends on the tables alone and a
//! neighbour change is one write. IPv4 equal-cost groups are the program's too: it picks the
//! member by the workers' flow hash ([`FastNext::Group`]), so one flow takes one path on both.
//! The box's own addresses, broadcasts, routes that are not forwarded, IPv6 equal-cost groups
//! and IPv4 routes through IPv6 gateways (RFC 5549) are the workers', and so is any
//! destination whose next MAC is not known: their answers (ICMP errors, echo replies,
//! gleaning) stay one implementation.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::BTreeMap;

use super::fib::NhIndex;
use super::neighbors::{Key6, NeighborTable, NeighborTable6};
use super::prefix::IpPrefix;
use super::tables::{NextHop, NhKind, RouteOrigin, RouterTables};
use crate::wire::MacAddr;
use crate::PortId;

/// Whose MAC the XDP program sends a frame to, found among the neighbours ([`neighbors4`],
/// [`neighbors6`]), for gateways of type `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via<A = Ipv4Addr> {
    /// This gateway's.
    Gateway(A),
    /// The destination's: it is on the link.
    OnLink,
}

/// A next hop the XDP program forwards through, for gateways of type `A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FastHop<A = Ipv4Addr> {
    /// Egress port.
    pub port: PortId,
    /// The longest IP packet it forwards there: the route's MTU where it sets one below the
    /// port's, else the port's (longer ones are the workers': Fragmentation Needed, Packet Too
    /// Big or a drop).
    pub mtu: u32,
    /// How the next MAC is found.
    pub via: Via<A>,
}

/// What the XDP program does with next hop `nh` of `t`, whose gateways `gateway` takes as the
/// family's own or not (`None`): forwards through it, or `None`, the workers decide (see the
/// module documentation).
fn hop<G: Copy, S, A>(t: &RouterTables, nh: &NextHop<G, S>, gateway: impl Fn(G) -> Option<A>) -> Option<FastHop<A>> {
    let port = t.ports.get(nh.port.index())?;
    let mtu = if nh.mtu != 0 { nh.mtu.min(port.mtu) } else { port.mtu };
    let via = match nh.kind {
        NhKind::Connected => Via::OnLink,
        NhKind::Gateway(gw) => Via::Gateway(gateway(gw)?),
        _ => return None,
    };
    Some(FastHop { port: nh.port, mtu, via })
}

/// What the XDP program does with IPv4 next hop `nh` of `t` (an IPv6 gateway is the workers').
pub fn hop4(t: &RouterTables, nh: &super::tables::NextHop4) -> Option<FastHop> {
    hop(t, nh, |gw| match gw {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    })
}

/// What the XDP program does with IPv6 next hop `nh` of `t`.
pub fn hop6(t: &RouterTables, nh: &super::tables::NextHop6) -> Option<FastHop<Ipv6Addr>> {
    hop(t, nh, Some)
}

/// What the XDP program does with one IPv4 next hop of the tables ([`nexthops4`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FastNext {
    /// The workers decide.
    Workers,
    /// Forwarded through this hop.
    Hop(FastHop),
    /// An equal-cost group: the flow's hash picks one of members `first..first + len` of the
    /// tables' (`v4.groups`, plain next hops by index), as the workers pick it
    /// (`l3::family::ecmp_pick`); then as that member says.
    Group {
        /// The first member.
        first: u32,
        /// How many (weights repeat a path).
        len: u16,
    },
}

/// What the XDP program does with each IPv4 next hop of `t`, by the index the FIB's entries
/// name ([`hop4`]; index 0 among them, no route: the workers'). The program reads the workers'
/// own FIB's entries and group members (`io::program::dir4`), so this list is all it needs
/// beside them.
pub fn nexthops4(t: &RouterTables) -> Vec<FastNext> {
    t.v4.nexthops
        .iter()
        .map(|h| match h.kind {
            NhKind::Group { first, len } => FastNext::Group { first, len },
            _ => hop4(t, h).map_or(FastNext::Workers, FastNext::Hop),
        })
        .collect()
}

/// The XDP program's table of one family: every prefix of the tables once ([`routes`]), with
/// how the program forwards along it, or `None` (the workers decide: the entry is still there,
/// so that a shorter prefix does not take its traffic).
pub type FastRoutes<A = Ipv4Addr> = BTreeMap<IpPrefix<A>, Option<FastHop<A>>>;

/// The IPv6 table ([`FastRoutes`]).
pub type FastRoutes6 = FastRoutes<Ipv6Addr>;

/// `t`'s IPv6 routes as the XDP program looks them up.
pub fn fib6(t: &RouterTables) -> FastRoutes6 {
    routes(&t.v6.routes)
        .into_iter()
        .map(|(p, nh)| (p, t.v6.nexthops.get(usize::from(nh.0)).and_then(|h| hop6(t, h))))
        .collect()
}

/// The writes that turn table `old` into `new`: entries to set (new or changed), then
/// prefixes to remove. Each is one map write that leaves a usable table: a route is replaced
/// in place, and a prefix goes only after what replaces it is in.
pub fn diff<P: Ord + Copy, H: PartialEq + Copy>(old: &BTreeMap<P, H>, new: &BTreeMap<P, H>) -> (Vec<(P, H)>, Vec<P>) {
    let set = new.iter().filter(|(p, h)| old.get(p) != Some(h)).map(|(p, h)| (*p, *h)).collect();
    let gone = old.keys().filter(|p| !new.contains_key(p)).copied().collect();
    (set, gone)
}

/// Every route of one family once (`routes`: as the tables list them), with the next hop index
/// the FIB gives its prefix: where the tables list a prefix twice, the one the FIB keeps (the
/// box's addresses over broadcasts over the rest, else the later), as the program's
/// longest-prefix match keeps one entry a prefix.
pub fn routes<P: Ord + Copy>(routes: &[(P, NhIndex, RouteOrigin)]) -> Vec<(P, NhIndex)> {
    let rank = |o: &RouteOrigin| match o {
        RouteOrigin::Local => 2,
        RouteOrigin::Broadcast => 1,
        _ => 0,
    };
    let mut ordered: Vec<&(P, NhIndex, RouteOrigin)> = routes.iter().collect();
    ordered.sort_by_key(|r| rank(&r.2));
    let mut one: BTreeMap<P, NhIndex> = BTreeMap::new();
    for &(p, nh, _) in ordered {
        one.insert(p, nh);
    }
    one.into_iter().collect()
}

/// The IPv4 neighbours the XDP program finds next MACs among.
pub fn neighbors4(neighbors: &NeighborTable) -> Vec<(Ipv4Addr, PortId, MacAddr)> {
    neighbors.entries().into_iter().map(|n| (n.ip, n.port, n.mac)).collect()
}

/// The IPv6 neighbours the XDP program finds next MACs among, each keyed as the workers key it
/// (a link-local address with its port).
pub fn neighbors6(neighbors: &NeighborTable6) -> Vec<(Key6, PortId, MacAddr)> {
    neighbors.entries().into_iter().map(|n| (n.ip, n.port, n.mac)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l3::tables::{Mirrored4, Path, RouteKind};
    use crate::l3::testing::reference_ports;
    use crate::l3::Prefix;
    use crate::l3::RouteTarget;
    use core::net::IpAddr;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_plain_next_hop_is_forwarded_through_and_the_rest_is_the_workers() {
        let ports = reference_ports();
        let gw = ip("198.18.30.2");
        let statics = [
            ("198.19.0.0/16".parse().unwrap(), RouteTarget::via(gw)),
            (
                "198.21.0.0/16".parse().unwrap(),
                RouteTarget::Via { gw: IpAddr::V6("fe80::1".parse().unwrap()), dev: Some(PortId(1)) },
            ),
        ];
        let t = RouterTables::build(ports, &statics).unwrap();
        let mtu = t.ports[1].mtu;
        let nh = *t.route(ip("198.19.1.1")).unwrap();
        assert_eq!(hop4(&t, &nh), Some(FastHop { port: PortId(1), mtu, via: Via::Gateway(gw) }));
        let on_link = *t.route(ip("198.18.30.7")).unwrap();
        assert_eq!(hop4(&t, &on_link), Some(FastHop { port: PortId(1), mtu, via: Via::OnLink }));
        let local = *t.route(ip("198.18.30.1")).unwrap();
        assert_eq!(hop4(&t, &local), None, "the box's own address");
        let v6 = *t.route(ip("198.21.0.1")).unwrap();
        assert_eq!(hop4(&t, &v6), None, "an IPv6 gateway (RFC 5549)");
    }

    #[test]
    fn each_next_hop_index_says_what_the_program_does_with_it() {
        let statics = [("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2")))];
        let t = RouterTables::build(reference_ports(), &statics).unwrap();
        let hops = nexthops4(&t);
        assert_eq!(hops.len(), t.v4.nexthops.len());
        for a in ["198.19.1.1", "198.18.30.7", "198.18.30.1", "198.18.10.255"].map(ip) {
            let nh = t.v4.fib.lookup(a).unwrap();
            let hop = hop4(&t, &t.v4.nexthops[usize::from(nh.0)]);
            assert_eq!(hops[usize::from(nh.0)], hop.map_or(FastNext::Workers, FastNext::Hop), "{a}");
        }
        assert_eq!(hops[0], FastNext::Workers, "index 0 (no route) is the workers'");
        let via = hops[usize::from(t.v4.fib.lookup(ip("198.19.1.1")).unwrap().0)];
        assert!(matches!(via, FastNext::Hop(FastHop { via: Via::Gateway(_), .. })));
        let local = hops[usize::from(t.v4.fib.lookup(ip("198.18.30.1")).unwrap().0)];
        assert_eq!(local, FastNext::Workers, "the box's address");
        // An equal-cost group names its members, plain next hops of the same list.
        let path = |gw: &str| Path { gw: Some(IpAddr::V4(ip(gw))), port: Some(PortId(1)), weight: 1 };
        let ecmp = Mirrored4 {
            prefix: "198.19.0.0/16".parse().unwrap(),
            kind: RouteKind::Unicast,
            paths: vec![path("198.18.30.2"), path("198.18.30.3")],
            mtu: 0,
            protocol: 4,
            local_table: false,
        };
        let t = RouterTables::build_mirrored(reference_ports(), &[ecmp], &[], crate::l3::fib::no_advice).unwrap();
        let hops = nexthops4(&t);
        let nh = t.v4.fib.lookup(ip("198.19.1.1")).unwrap();
        let FastNext::Group { first, len } = hops[usize::from(nh.0)] else { panic!("{:?}", hops[usize::from(nh.0)]) };
        assert_eq!(len, 2);
        for m in &t.v4.groups[first as usize..first as usize + 2] {
            assert!(matches!(hops[usize::from(m.0)], FastNext::Hop(FastHop { via: Via::Gateway(_), .. })));
        }
    }

    #[test]
    fn a_diff_sets_what_is_new_or_changed_and_then_removes_what_is_gone() {
        let hop = |port| Some(FastHop { port: PortId(port), mtu: 1500, via: Via::OnLink });
        let p = |s: &str| -> Prefix { s.parse().unwrap() };
        let old: FastRoutes =
            [(p("10.0.0.0/8"), hop(0)), (p("10.1.0.0/16"), hop(1)), (p("10.2.0.0/16"), hop(1))].into();
        let new: FastRoutes = [(p("10.0.0.0/8"), hop(0)), (p("10.1.0.0/16"), hop(0)), (p("10.3.0.0/16"), None)].into();
        let (set, gone) = diff(&old, &new);
        assert_eq!(set, vec![(p("10.1.0.0/16"), hop(0)), (p("10.3.0.0/16"), None)]);
        assert_eq!(gone, vec![p("10.2.0.0/16")]);
        assert_eq!(diff(&new, &new), (vec![], vec![]));
    }

    #[test]
    fn each_prefix_is_listed_once_with_the_next_hop_the_fib_gives_it() {
        let t = RouterTables::build(reference_ports(), &[]).unwrap();
        let routes = routes(&t.v4.routes);
        let mut prefixes: Vec<Prefix> = routes.iter().map(|r| r.0).collect();
        prefixes.dedup();
        assert_eq!(prefixes.len(), routes.len());
        for (p, nh) in routes {
            assert_eq!(t.v4.fib.lookup(p.addr()), Some(nh), "{p}");
        }
    }

    #[test]
    fn ipv6_next_hops_are_forwarded_through_as_ipv4_ones_and_link_local_gateways_are_kept_with_their_port() {
        use crate::l3::fib::no_advice;
        use crate::l3::tables::scope6;
        use crate::l3::testing::{port, ETH4, ETH5};
        use crate::l3::Prefix6;
        let ports = vec![
            port("eth5", ETH5, &["198.18.10.2/24", "2001:2:0:10::2/64"]),
            port("eth4", ETH4, &["198.18.30.1/24", "2001:2:0:30::1/64"]),
        ];
        let p6 = |s: &str| -> Prefix6 { s.parse().unwrap() };
        let ip6 = |s: &str| -> Ipv6Addr { s.parse().unwrap() };
        let ll = ip6("fe80::2");
        let statics6 = [
            (p6("2001:2:100::/48"), RouteTarget::via(ip6("2001:2:0:30::2"))),
            (p6("2001:2:200::/48"), RouteTarget::Via { gw: ll, dev: Some(PortId(1)) }),
        ];
        let t = RouterTables::build_dual(ports, &[], &statics6, no_advice).unwrap();
        let fast = fib6(&t);
        let hop = |p: &str| fast.get(&p6(p)).copied().flatten();
        assert_eq!(
            hop("2001:2:100::/48"),
            Some(FastHop { port: PortId(1), mtu: 1500, via: Via::Gateway(ip6("2001:2:0:30::2")) })
        );
        assert_eq!(hop("2001:2:200::/48"), Some(FastHop { port: PortId(1), mtu: 1500, via: Via::Gateway(ll) }));
        assert_eq!(hop("2001:2:0:30::/64"), Some(FastHop { port: PortId(1), mtu: 1500, via: Via::OnLink }));
        assert_eq!(fast.get(&p6("2001:2:0:30::1/128")), Some(&None), "the box's address is the workers'");
        let n6 = NeighborTable6::new6(8);
        n6.insert(scope6(ll, PortId(1)), GW6, PortId(1), false).unwrap();
        assert_eq!(
            neighbors6(&n6),
            [(Key6 { addr: ll, port: Some(PortId(1)) }, PortId(1), GW6)],
            "keyed with its port"
        );
    }

    const GW6: MacAddr = MacAddr([2, 0, 0, 0, 0x30, 2]);
}
