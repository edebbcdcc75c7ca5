//! The router's tables as the workers read them: the FIB, its next hops, and each port's
//! addresses, MAC and MTU. Built from a validated specification; replaced whole on reload.

use core::net::Ipv4Addr;
use std::collections::HashMap;

use super::fib::{no_advice, Advice, Fib, FibError, NhIndex, Prefix};
use crate::wire::MacAddr;
use crate::PortId;

/// One routed interface as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// Interface name (for display).
    pub name: String,
    /// Its MAC address (source of forwarded frames).
    pub mac: MacAddr,
    /// Its MTU.
    pub mtu: u32,
    /// The box's addresses on it, with their prefix lengths.
    pub addrs: Vec<(Ipv4Addr, u8)>,
}

/// Where a static route points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteTarget {
    /// Through a gateway on a connected subnet.
    Via(Ipv4Addr),
    /// Straight out of a port (destinations are neighbours themselves).
    Dev(PortId),
}

/// What a next hop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NhKind {
    /// A connected subnet: the destination itself is the neighbour.
    Connected,
    /// Through this gateway.
    Gateway(Ipv4Addr),
    /// One of the box's own addresses.
    Local,
    /// The broadcast address of a connected subnet.
    Broadcast,
}

/// A next hop: kind, egress port, and the box address that ICMP errors about packets routed
/// back through it come from (the address on that port whose subnet holds the gateway or the
/// destination, as Linux picks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// What it is.
    pub kind: NhKind,
    /// Egress port.
    pub port: PortId,
    /// Source address for ICMP sent through it.
    pub src: Ipv4Addr,
}

/// Where a route came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteOrigin {
    /// From an interface address.
    Connected,
    /// The box's own address.
    Local,
    /// A subnet's broadcast address.
    Broadcast,
    /// Configured.
    Static,
}

/// Why tables could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TablesError {
    /// A gateway on no connected subnet.
    #[error("next hop {0} is not on any connected subnet")]
    GatewayUnreachable(Ipv4Addr),
    /// A route names a port that does not exist.
    #[error("route names port {0}, which is not configured")]
    NoSuchPort(u8),
    /// A dev route to a port with no address (no source for ICMP).
    #[error("port {0} has no address")]
    NoAddress(String),
    /// The FIB refused the table.
    #[error(transparent)]
    Fib(#[from] FibError),
}

/// The router's tables (see the module documentation).
#[derive(Debug)]
pub struct RouterTables {
    /// Longest-prefix match to a next-hop index.
    pub fib: Fib,
    /// Next hops by index (index 0 unused).
    pub nexthops: Vec<NextHop>,
    /// Ports by index.
    pub ports: Vec<PortSpec>,
    /// Every route the FIB holds, for display: prefix, next hop index, origin.
    pub routes: Vec<(Prefix, NhIndex, RouteOrigin)>,
    /// ICMP errors per second for the whole router (0: unlimited); set after building, travels
    /// with the tables so that a reload can change it.
    pub icmp_rate: u32,
    /// ICMP error burst.
    pub icmp_burst: u32,
    /// A number no other tables built by this process share: per-worker caches keyed by next
    /// hop index are valid for these tables only.
    pub id: u64,
}

static TABLES_BUILT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl RouterTables {
    /// Builds the tables: connected, local and broadcast routes from the ports' addresses, then
    /// the static routes (a static route for the same prefix as a connected one replaces it).
    pub fn build(ports: Vec<PortSpec>, statics: &[(Prefix, RouteTarget)]) -> Result<RouterTables, TablesError> {
        RouterTables::build_advised(ports, statics, no_advice)
    }

    /// [`RouterTables::build`], with `advise` given to [`Fib::build_advised`] for the FIB's memory.
    pub fn build_advised(
        ports: Vec<PortSpec>,
        statics: &[(Prefix, RouteTarget)],
        advise: Advice,
    ) -> Result<RouterTables, TablesError> {
        let mut nexthops = vec![NextHop { kind: NhKind::Local, port: PortId(0), src: Ipv4Addr::UNSPECIFIED }];
        let mut index: HashMap<NextHop, NhIndex> = HashMap::new();
        let mut intern = |nh: NextHop, nexthops: &mut Vec<NextHop>| -> NhIndex {
            *index.entry(nh).or_insert_with(|| {
                nexthops.push(nh);
                NhIndex((nexthops.len() - 1) as u16)
            })
        };
        let mut routes = Vec::new();
        for (p, spec) in ports.iter().enumerate() {
            let port = PortId(p as u8);
            for &(addr, len) in &spec.addrs {
                let subnet = Prefix::truncate(addr, len);
                let nh = intern(NextHop { kind: NhKind::Connected, port, src: addr }, &mut nexthops);
                routes.push((subnet, nh, RouteOrigin::Connected));
                if len < 31 {
                    let b = intern(NextHop { kind: NhKind::Broadcast, port, src: addr }, &mut nexthops);
                    routes.push((Prefix::truncate(subnet.broadcast(), 32), b, RouteOrigin::Broadcast));
                }
            }
        }
        // Local addresses last among the automatic ones, so a /32 address wins over its subnet.
        for (p, spec) in ports.iter().enumerate() {
            for &(addr, _) in &spec.addrs {
                let nh = intern(NextHop { kind: NhKind::Local, port: PortId(p as u8), src: addr }, &mut nexthops);
                routes.push((Prefix::truncate(addr, 32), nh, RouteOrigin::Local));
            }
        }
        for &(prefix, target) in statics {
            let nh = match target {
                RouteTarget::Via(gw) => {
                    let (port, src) = connected_to(&ports, gw).ok_or(TablesError::GatewayUnreachable(gw))?;
                    NextHop { kind: NhKind::Gateway(gw), port, src }
                }
                RouteTarget::Dev(port) => {
                    let spec = ports.get(port.index()).ok_or(TablesError::NoSuchPort(port.0))?;
                    let &(src, _) = spec.addrs.first().ok_or_else(|| TablesError::NoAddress(spec.name.clone()))?;
                    NextHop { kind: NhKind::Connected, port, src }
                }
            };
            let nh = intern(nh, &mut nexthops);
            routes.push((prefix, nh, RouteOrigin::Static));
        }
        // The FIB lets a later duplicate win; keep local and broadcast /32s above any static route.
        let mut fib_routes: Vec<(Prefix, NhIndex)> = Vec::with_capacity(routes.len());
        fib_routes.extend(
            routes.iter().filter(|r| !matches!(r.2, RouteOrigin::Local | RouteOrigin::Broadcast)).map(|r| (r.0, r.1)),
        );
        fib_routes.extend(routes.iter().filter(|r| matches!(r.2, RouteOrigin::Broadcast)).map(|r| (r.0, r.1)));
        fib_routes.extend(routes.iter().filter(|r| matches!(r.2, RouteOrigin::Local)).map(|r| (r.0, r.1)));
        let fib = Fib::build_advised(&fib_routes, advise)?;
        let id = TABLES_BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(RouterTables { fib, nexthops, ports, routes, icmp_rate: 0, icmp_burst: 1, id })
    }

    /// The next hop for `dst`, if routed.
    #[inline]
    pub fn route(&self, dst: Ipv4Addr) -> Option<&NextHop> {
        self.fib.lookup(dst).map(|i| &self.nexthops[usize::from(i.0)])
    }

    /// Whether `a` is one of the box's addresses.
    pub fn is_local(&self, a: Ipv4Addr) -> bool {
        self.route(a).is_some_and(|nh| nh.kind == NhKind::Local)
    }

    /// Every local address with its port.
    pub fn local_addresses(&self) -> Vec<(Ipv4Addr, PortId)> {
        self.ports
            .iter()
            .enumerate()
            .flat_map(|(p, s)| s.addrs.iter().map(move |&(a, _)| (a, PortId(p as u8))))
            .collect()
    }
}

/// The port and box address whose subnet holds `a`, if any (longest match first).
pub fn connected_to(ports: &[PortSpec], a: Ipv4Addr) -> Option<(PortId, Ipv4Addr)> {
    ports
        .iter()
        .enumerate()
        .flat_map(|(p, s)| s.addrs.iter().map(move |&(addr, len)| (p, addr, len)))
        .filter(|&(_, addr, len)| Prefix::truncate(addr, len).contains(a))
        .max_by_key(|&(_, _, len)| len)
        .map(|(p, addr, _)| (PortId(p as u8), addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// The reference board, on the rig's addresses: eth5 towards one side, eth4 towards the other.
    pub(crate) fn reference() -> RouterTables {
        let ports = vec![
            PortSpec {
                name: "eth5".into(),
                mac: MacAddr([2, 0, 0, 0, 5, 5]),
                mtu: 1500,
                addrs: vec![(ip("198.18.10.2"), 24), (ip("198.18.11.2"), 24)],
            },
            PortSpec {
                name: "eth4".into(),
                mac: MacAddr([2, 0, 0, 0, 4, 4]),
                mtu: 1500,
                addrs: vec![(ip("198.18.30.1"), 24), (ip("198.18.31.1"), 24)],
            },
        ];
        RouterTables::build(ports, &[("198.19.0.0/16".parse().unwrap(), RouteTarget::Via(ip("198.18.30.2")))]).unwrap()
    }

    #[test]
    fn connected_local_broadcast_and_static_routes() {
        let t = reference();
        let nh = t.route(ip("198.18.10.7")).unwrap();
        assert_eq!((nh.kind, nh.port, nh.src), (NhKind::Connected, PortId(0), ip("198.18.10.2")));
        let nh = t.route(ip("198.18.11.7")).unwrap();
        assert_eq!(nh.src, ip("198.18.11.2"), "ICMP source follows the subnet");
        assert_eq!(t.route(ip("198.18.30.1")).unwrap().kind, NhKind::Local);
        assert!(t.is_local(ip("198.18.11.2")));
        assert_eq!(t.route(ip("198.18.31.255")).unwrap().kind, NhKind::Broadcast);
        let nh = t.route(ip("198.19.4.4")).unwrap();
        assert_eq!((nh.kind, nh.port, nh.src), (NhKind::Gateway(ip("198.18.30.2")), PortId(1), ip("198.18.30.1")));
        assert!(t.route(ip("203.0.113.1")).is_none());
        assert_eq!(t.local_addresses().len(), 4);
    }

    #[test]
    fn unreachable_gateways_are_refused() {
        let ports = reference().ports;
        let e = RouterTables::build(ports, &[("10.0.0.0/8".parse().unwrap(), RouteTarget::Via(ip("192.0.2.1")))])
            .unwrap_err();
        assert_eq!(e, TablesError::GatewayUnreachable(ip("192.0.2.1")));
    }

    #[test]
    fn a_default_route_does_not_hide_local_addresses() {
        let ports = reference().ports;
        let t = RouterTables::build(
            ports,
            &[
                ("0.0.0.0/0".parse().unwrap(), RouteTarget::Via(ip("198.18.30.2"))),
                ("198.18.30.1/32".parse().unwrap(), RouteTarget::Dev(PortId(0))),
            ],
        )
        .unwrap();
        assert_eq!(t.route(ip("8.8.8.8")).unwrap().kind, NhKind::Gateway(ip("198.18.30.2")));
        assert_eq!(t.route(ip("198.18.30.1")).unwrap().kind, NhKind::Local);
    }
}
