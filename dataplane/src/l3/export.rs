//! The XDP path's tables, taken from the workers' own: which IPv4 next hops the XDP program
//! forwards through and what it needs of each, and the routes and neighbours it looks up.
//! `io::xdp` writes them into the program's maps; this module does no I/O.
//!
//! The program forwards only the common case and hands everything else to the workers
//! (bpf/xfwd.bpf.c, `fast4`), so what it may forward through is narrow on purpose: a plain
//! next hop out of a port, through an IPv4 gateway whose MAC the neighbour table holds on that
//! port, or on link (the destination's MAC then comes from the neighbours it is given). The
//! box's own addresses, broadcasts, routes that are not forwarded, equal-cost groups, IPv6
//! gateways (RFC 5549) and unresolved gateways are the workers': their answers (ICMP errors,
//! echo replies, gleaning) stay one implementation.

use core::net::Ipv4Addr;
use std::collections::BTreeMap;

use super::fib::{NhIndex, Prefix};
use super::neighbors::NeighborTable;
use super::tables::{NextHop4, NhKind, RouteOrigin, RouterTables};
use crate::wire::MacAddr;
use crate::PortId;

/// How the XDP program finds the next MAC of a next hop it forwards through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A gateway's, resolved: this one.
    Gateway(MacAddr),
    /// The destination is the neighbour: its MAC from the neighbours ([`neighbors4`]).
    OnLink,
}

/// A next hop the XDP program forwards through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastHop {
    /// Egress port.
    pub port: PortId,
    /// The longest IP packet it forwards there: the route's MTU where it sets one below the
    /// port's, else the port's (longer ones are the workers': Fragmentation Needed or a drop).
    pub mtu: u32,
    /// How the next MAC is found.
    pub via: Via,
}

/// What the XDP program does with IPv4 next hop `nh` of `t`: forwards through it, or `None`,
/// the workers decide (see the module documentation). A gateway's MAC is the one `neighbors`
/// holds for it on the next hop's port, so a neighbour change calls for the next hop again.
pub fn hop4(t: &RouterTables, nh: &NextHop4, neighbors: &NeighborTable) -> Option<FastHop> {
    let port = t.ports.get(nh.port.index())?;
    let mtu = if nh.mtu != 0 { nh.mtu.min(port.mtu) } else { port.mtu };
    let via = match nh.kind {
        NhKind::Connected => Via::OnLink,
        NhKind::Gateway(core::net::IpAddr::V4(gw)) => {
            let n = neighbors.lookup(gw).filter(|n| n.port == nh.port)?;
            Via::Gateway(n.mac)
        }
        _ => return None,
    };
    Some(FastHop { port: nh.port, mtu, via })
}

/// Every IPv4 route of `t` once, with the next hop index the FIB gives its prefix: where the
/// tables list a prefix twice, the one the FIB keeps (the box's addresses over broadcasts over
/// the rest, else the later), as the program's longest-prefix match keeps one entry a prefix.
pub fn routes4(t: &RouterTables) -> Vec<(Prefix, NhIndex)> {
    let rank = |o: &RouteOrigin| match o {
        RouteOrigin::Local => 2,
        RouteOrigin::Broadcast => 1,
        _ => 0,
    };
    let mut ordered: Vec<&(Prefix, NhIndex, RouteOrigin)> = t.v4.routes.iter().collect();
    ordered.sort_by_key(|r| rank(&r.2));
    let mut one: BTreeMap<Prefix, NhIndex> = BTreeMap::new();
    for &(p, nh, _) in ordered {
        one.insert(p, nh);
    }
    one.into_iter().collect()
}

/// The IPv4 neighbours the XDP program finds on-link destinations' MACs among.
pub fn neighbors4(neighbors: &NeighborTable) -> Vec<(Ipv4Addr, PortId, MacAddr)> {
    neighbors.entries().into_iter().map(|n| (n.ip, n.port, n.mac)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l3::testing::reference_ports;
    use crate::l3::RouteTarget;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_gateway_is_forwarded_through_once_resolved_on_its_port_and_the_rest_is_the_workers() {
        let ports = reference_ports();
        let gw_port = PortId(1);
        let gw = ip("198.18.30.2");
        let t = RouterTables::build(ports, &[("198.19.0.0/16".parse().unwrap(), RouteTarget::via(gw))]).unwrap();
        let n = NeighborTable::new(64);
        let nh = *t.route(ip("198.19.1.1")).unwrap();
        assert_eq!(hop4(&t, &nh, &n), None, "unresolved: the workers glean");
        let mac = MacAddr([2, 0, 0, 0, 0, 9]);
        n.insert(gw, mac, PortId(0), false).unwrap();
        assert_eq!(hop4(&t, &nh, &n), None, "resolved on another port than the route's");
        n.insert(gw, mac, gw_port, false).unwrap();
        let mtu = t.ports[1].mtu;
        assert_eq!(hop4(&t, &nh, &n), Some(FastHop { port: gw_port, mtu, via: Via::Gateway(mac) }));
        let on_link = *t.route(ip("198.18.30.7")).unwrap();
        assert_eq!(hop4(&t, &on_link, &n), Some(FastHop { port: gw_port, mtu, via: Via::OnLink }));
        let local = *t.route(ip("198.18.30.1")).unwrap();
        assert_eq!(hop4(&t, &local, &n), None, "the box's own address");
    }

    #[test]
    fn each_prefix_is_listed_once_with_the_next_hop_the_fib_gives_it() {
        let t = RouterTables::build(reference_ports(), &[]).unwrap();
        let routes = routes4(&t);
        let mut prefixes: Vec<Prefix> = routes.iter().map(|r| r.0).collect();
        prefixes.dedup();
        assert_eq!(prefixes.len(), routes.len());
        for (p, nh) in routes {
            assert_eq!(t.v4.fib.lookup(p.addr()), Some(nh), "{p}");
        }
    }
}
