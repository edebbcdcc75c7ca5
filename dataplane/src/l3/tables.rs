//! The router's tables as the workers read them: the FIBs (IPv4 and IPv6), their next hops,
//! and each port's addresses, MAC and MTU. Built from a validated specification; replaced whole
//! on reload.
//!
//! Why [`RouterTables`] has this shape: each family's FIB, next hops, equal-cost groups and
//! route list are one [`FamilyTables`], generic over the FIB, the next hop and the prefix, and
//! both families hold theirs the same way, as plain fields ([`RouterTables::v4`],
//! [`RouterTables::v6`]). The decision reaches them the same way too
//! ([`super::IpFamily::tables`]), so what reads next hops and groups is written once for both.
//! The FIBs differ in how they are held, for kernel mode: `routes::incremental` repaints the
//! IPv4 FIB in place, one prefix at a time, in tables no reader holds, so it is owned (a clone
//! copies it: 32 MiB and more); the IPv6 FIB is built whole and never changed, so it is behind
//! an `Arc`, and tables whose IPv6 routes did not change share it. Both families' tables
//! behind an `Arc` of their own (measured: `decision_cost` 417.6 → 421.5 instructions a frame
//! for IPv4, and its criterion rate lower) cost the IPv4 path one pointer more a frame, which
//! plain fields do not.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::HashMap;
use std::sync::Arc;

use super::fib::{no_advice, Advice, Fib, FibError, NhIndex, Prefix};
use super::fib6::{Fib6, Prefix6};
pub use super::neighbors::{is_link_local6, scope6, unscope6};
use crate::wire::MacAddr;
use crate::PortId;

/// The router's table sizes and rates (the router file's `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterLimits {
    /// Neighbour table capacity.
    pub neighbors: usize,
    /// Packets held per unresolved neighbour.
    pub glean_queue: usize,
    /// ICMP errors per second for the whole router, shared by all workers (0: unlimited).
    pub icmp_rate: u32,
    /// ICMP error burst.
    pub icmp_burst: u32,
    /// Drop class E and 169.254/16 as RFC 1812 says, where the kernel forwards them.
    pub rfc1812_martians: bool,
}

/// The defaults of the router file's `[limits]` (config/README.md).
impl Default for RouterLimits {
    fn default() -> Self {
        RouterLimits { neighbors: 4096, glean_queue: 16, icmp_rate: 1000, icmp_burst: 50, rfc1812_martians: false }
    }
}

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
    /// The box's IPv6 addresses on it (global or unique local), with their prefix lengths.
    pub addrs6: Vec<(Ipv6Addr, u8)>,
    /// The port's link-local address (the kernel's, or configured): the source of what xfwd
    /// sends to link-local addresses on the port.
    pub link_local: Option<Ipv6Addr>,
}

/// One family's part of the tables: its FIB, the next hops the FIB's indices name, the
/// members of its equal-cost groups, and the routes it holds (see the module documentation).
#[derive(Debug, Clone)]
pub struct FamilyTables<F, N, P> {
    /// Longest-prefix match to a next-hop index.
    pub fib: F,
    /// Next hops by index (index 0 unused).
    pub nexthops: Vec<N>,
    /// Every route the FIB holds, for display: prefix, next hop index, origin. (Kernel mode
    /// may refresh it less often than the FIB changes; see `routes::incremental`.)
    pub routes: Arc<Vec<(P, NhIndex, RouteOrigin)>>,
    /// Members of equal-cost groups (a `Group` next hop's), plain next hops.
    pub groups: Vec<NhIndex>,
}

/// The IPv4 part of the tables.
pub type Tables4 = FamilyTables<Fib, NextHop4, Prefix>;

/// The IPv6 part of the tables.
pub type Tables6 = FamilyTables<Arc<Fib6>, NextHop6, Prefix6>;

impl Tables4 {
    /// A copy whose FIB is allocated with `advise` (a plain `clone` would lose the advice).
    pub fn copy_advised(&self, advise: Advice) -> Tables4 {
        FamilyTables {
            fib: self.fib.copy_advised(advise),
            nexthops: self.nexthops.clone(),
            routes: Arc::clone(&self.routes),
            groups: self.groups.clone(),
        }
    }
}

/// A next hop as the shared sequence reads it: whether it is an equal-cost group, and where it
/// leaves.
pub trait Hop: Copy {
    /// Entries `first..first + len` of the family's group members, if it is a group.
    fn group(&self) -> Option<(u32, u16)>;
    /// Egress port.
    fn port(&self) -> PortId;
    /// The route's MTU (0: the port's).
    fn mtu(&self) -> u32;
}

/// Where a static route points, for gateways of type `G` ([`RouteTarget4`], [`RouteTarget6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteTarget<G> {
    /// Through a gateway: one on a connected subnet or prefix (of `dev`, if given), or a
    /// link-local IPv6 one on `dev` (which a link-local gateway needs).
    Via {
        /// The gateway.
        gw: G,
        /// The port it is on, if given.
        dev: Option<PortId>,
    },
    /// Straight out of a port (destinations are neighbours themselves).
    Dev(PortId),
}

impl<G> RouteTarget<G> {
    /// Through gateway `gw`, on whichever port's connected subnet or prefix holds it.
    pub fn via(gw: impl Into<G>) -> RouteTarget<G> {
        RouteTarget::Via { gw: gw.into(), dev: None }
    }

    /// The same target with its gateway mapped by `f` (e.g. to the text a tool takes).
    pub fn map_gw<H>(&self, f: impl FnOnce(&G) -> H) -> RouteTarget<H> {
        match self {
            RouteTarget::Via { gw, dev } => RouteTarget::Via { gw: f(gw), dev: *dev },
            RouteTarget::Dev(port) => RouteTarget::Dev(*port),
        }
    }
}

/// Where a static IPv4 route points: its gateway is an IPv4 address or, RFC 5549 (as BGP
/// unnumbered routes IPv4), an IPv6 one, whose MAC comes from the IPv6 neighbour table.
pub type RouteTarget4 = RouteTarget<IpAddr>;

/// Where a static IPv6 route points.
pub type RouteTarget6 = RouteTarget<Ipv6Addr>;

/// What a next hop is, for gateways of type `G` ([`NhKind4`], [`NhKind6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NhKind<G> {
    /// On link: the destination itself is the neighbour.
    Connected,
    /// Through this gateway.
    Gateway(G),
    /// One of the box's own addresses.
    Local,
    /// The broadcast address of a connected subnet (IPv4 only: IPv6 has no broadcast).
    Broadcast,
    /// A route that is not forwarded: see [`Special`].
    Special(Special),
    /// Equal-cost paths: entries `first..first + len` of the family's
    /// [`FamilyTables::groups`].
    Group {
        /// First member.
        first: u32,
        /// Members (weights repeat a path).
        len: u16,
    },
}

/// What an IPv4 next hop is: its gateway an IPv4 address or, RFC 5549, an IPv6 one (the
/// frame then leaves with the MAC the IPv6 neighbour table has for it on the next hop's port).
pub type NhKind4 = NhKind<IpAddr>;

/// What an IPv6 next hop is.
pub type NhKind6 = NhKind<Ipv6Addr>;

/// Routes that are not forwarded, as the kernel answers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Special {
    /// The kernel's `blackhole`: dropped silently.
    Blackhole,
    /// The kernel's `unreachable`: ICMP Host Unreachable (ICMPv6 No Route).
    Unreachable,
    /// The kernel's `prohibit`: ICMP Communication Administratively Prohibited (code 13;
    /// ICMPv6 code 1).
    Prohibit,
    /// Out of an interface xfwd does not own: with the kernel's forwarding off nobody forwards
    /// it, so it is dropped, counted, and answered as for no route.
    Foreign,
    /// A kernel route xfwd cannot forward as the kernel would: `throw` (the kernel then finds
    /// no route either), an encapsulation (MPLS, SRv6, ...), a gateway of a family that is
    /// neither IPv4 nor IPv6. Dropped, counted, answered as for no route.
    Unsupported,
}

/// A next hop: kind, egress port, the route's MTU, and `src`, what the family keeps for the
/// ICMP errors about packets routed through it ([`NextHop4`], [`NextHop6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop<G, S> {
    /// What it is.
    pub kind: NhKind<G>,
    /// Egress port.
    pub port: PortId,
    /// IPv4: the box address ICMP errors about packets routed back through it come from (the
    /// address on the port whose subnet holds the gateway or the destination, as Linux picks
    /// it). IPv6: nothing; an ICMPv6 error's source is chosen when it is sent, by
    /// [`RouterTables::source6`].
    pub src: S,
    /// The route's MTU where it sets one below the port's (0: the port's).
    pub mtu: u32,
}

/// An IPv4 next hop.
pub type NextHop4 = NextHop<IpAddr, Ipv4Addr>;

/// An IPv6 next hop.
pub type NextHop6 = NextHop<Ipv6Addr, ()>;

impl<G: Copy, S: Copy> Hop for NextHop<G, S> {
    #[inline(always)]
    fn group(&self) -> Option<(u32, u16)> {
        match self.kind {
            NhKind::Group { first, len } => Some((first, len)),
            _ => None,
        }
    }

    #[inline(always)]
    fn port(&self) -> PortId {
        self.port
    }

    #[inline(always)]
    fn mtu(&self) -> u32 {
        self.mtu
    }
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
    /// Mirrored from the kernel: its protocol number (`rtm_protocol`: 2 kernel, 3 boot,
    /// 4 static, 12 bird, 186 bgp, 188 ospf, ...), and whether it is in the local table.
    Kernel {
        /// Who installed it.
        protocol: u8,
        /// From the local table (the box's addresses and broadcasts).
        local_table: bool,
    },
}

/// The route types of the kernel that the mirror carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// Forwarded through its paths.
    Unicast,
    /// One of the box's addresses (local table; anycast ones too).
    Local,
    /// A subnet broadcast address (local table).
    Broadcast,
    /// Not forwarded, as [`Special`] says.
    Special(Special),
}

/// One path of a mirrored route: a gateway or none (on link), the port it leaves by (`None`:
/// an interface xfwd does not own), its weight among equal-cost paths (1..=256).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Path<A> {
    /// The gateway, if any.
    pub gw: Option<A>,
    /// The port, if xfwd owns the interface.
    pub port: Option<PortId>,
    /// Weight (the kernel's `hops + 1`, or a nexthop group member's weight).
    pub weight: u16,
}

/// A route as the kernel holds it, resolved to xfwd's ports (see `routes::mirror`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirroredRoute<P, A> {
    /// Destination.
    pub prefix: P,
    /// Its type.
    pub kind: RouteKind,
    /// Paths (unicast: one or more).
    pub paths: Vec<Path<A>>,
    /// The route's MTU metric (0: none).
    pub mtu: u32,
    /// Who installed it (`rtm_protocol`).
    pub protocol: u8,
    /// From the local table.
    pub local_table: bool,
}

/// An IPv4 route from the kernel. Its gateways are IPv4 addresses or, RFC 5549, IPv6 ones.
pub type Mirrored4 = MirroredRoute<Prefix, IpAddr>;
/// An IPv6 route from the kernel.
pub type Mirrored6 = MirroredRoute<Prefix6, Ipv6Addr>;

/// Members an equal-cost group may hold (paths repeated by weight are scaled down to this).
pub const MAX_GROUP: usize = 256;

/// The members of a group for `paths` with these weights, each repeated by its weight (scaled
/// so that the total stays within [`MAX_GROUP`], each path at least once).
fn weighted<T: Copy>(members: &[(T, u16)]) -> Vec<T> {
    let total: usize = members.iter().map(|&(_, w)| usize::from(w.max(1))).sum();
    let mut out = Vec::with_capacity(total.min(MAX_GROUP));
    for &(m, w) in members {
        let w = usize::from(w.max(1));
        let n = if total <= MAX_GROUP { w } else { (w * MAX_GROUP / total).max(1) };
        out.extend(std::iter::repeat_n(m, n));
    }
    out
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
    /// An IPv6 gateway on no connected prefix.
    #[error("next hop {0} is not on any connected IPv6 prefix")]
    GatewayUnreachable6(Ipv6Addr),
    /// A gateway on a connected subnet or prefix of another port than the one given.
    #[error("next hop {0} is not on a connected subnet or prefix of the port given")]
    GatewayNotOnDev(IpAddr),
    /// A link-local gateway without the port it is on.
    #[error("link-local next hop {0} needs the port it is on (dev)")]
    LinkLocalNeedsDev(Ipv6Addr),
    /// The FIB refused the table.
    #[error(transparent)]
    Fib(#[from] FibError),
}

/// The router's tables (see the module documentation). Cloning copies the IPv4 FIB (32 MiB
/// and more) and shares the IPv6 one: [`crate::routes::incremental`] clones only when it must.
#[derive(Debug, Clone)]
pub struct RouterTables {
    /// IPv4: its FIB, next hops, groups and routes.
    pub v4: Tables4,
    /// IPv6: the same (its FIB shared by tables whose IPv6 routes did not change).
    pub v6: Tables6,
    /// Ports by index.
    pub ports: Vec<PortSpec>,
    /// ICMP errors per second for the whole router (0: unlimited); set after building, travels
    /// with the tables so that a reload can change it.
    pub icmp_rate: u32,
    /// ICMP error burst.
    pub icmp_burst: u32,
    /// Drop class E (240/4) sources and destinations and 169.254/16 destinations, as RFC 1812
    /// and RFC 3927 have routers do; off, they are forwarded as the kernel does. Set after
    /// building, like the ICMP limits.
    pub rfc1812_martians: bool,
    /// A number no other tables built by this process share: per-worker caches keyed by next
    /// hop index are valid for these tables only.
    pub id: u64,
    /// How these tables' IPv4 FIB came from earlier tables', prefix by prefix (kernel mode,
    /// `routes::incremental`); `None` for tables built whole.
    pub changes4: Option<Arc<Changes4>>,
}

/// The IPv4 prefixes whose routes changed from one publication of the tables to the next
/// (`routes::incremental`), linked to the changes before: what a follower of the tables that
/// last saw an earlier publication (the XDP path's table, `io::program::dir4`) repaints
/// instead of copying the whole FIB. Within one chain, next hop indices and equal-cost groups
/// only grow (the interner is append-only), so an index means the same next hop throughout.
#[derive(Debug)]
pub struct Changes4 {
    /// The id of the tables these changes were made to.
    pub since: u64,
    /// The prefixes changed.
    pub prefixes: Vec<Prefix>,
    /// The changes that made the tables `since` (`None`: built whole, or too far back).
    pub before: Option<Arc<Changes4>>,
    /// When the first of these changes was read (kernel mode: its notification), if known:
    /// whence the XDP path counts how long a change takes to reach the program.
    pub read: Option<std::time::Instant>,
    /// Prefixes in this link and those it holds before it.
    total: usize,
    /// Links in the chain from this one back.
    links: usize,
}

impl Changes4 {
    /// Prefixes a chain keeps at most: past them, copying the whole FIB is about as cheap as
    /// repainting each, and the oldest changes are let go.
    pub const KEEP: usize = 100_000;
    /// Links a chain keeps at most (publications of a prefix or two each, at 10,000 changes a
    /// second): a chain is dropped one link inside the other, so its length is the depth of
    /// the recursion that frees it.
    pub const KEEP_LINKS: usize = 1024;

    /// The changes `prefixes` made to tables `since`, after `before` (the changes that made
    /// them, if known), the chain cut once it holds more than [`Changes4::KEEP`] prefixes or
    /// [`Changes4::KEEP_LINKS`] links.
    pub fn new(since: u64, prefixes: Vec<Prefix>, before: Option<Arc<Changes4>>) -> Changes4 {
        let (total, links) = before.as_ref().map_or((0, 0), |b| (b.total, b.links));
        let (total, links) = (total + prefixes.len(), links + 1);
        let (before, total, links) = if total > Self::KEEP || links > Self::KEEP_LINKS {
            (None, prefixes.len(), 1)
        } else {
            (before, total, links)
        };
        Changes4 { since, prefixes, before, read: None, total, links }
    }

    /// The links from this one back to the one made to tables `id`, or to the chain's end.
    fn back_to(&self, id: u64) -> impl Iterator<Item = &Changes4> {
        let mut reached = false;
        std::iter::successors(Some(self), |c| c.before.as_deref()).take_while(move |c| {
            let take = !reached;
            reached |= c.since == id;
            take
        })
    }

    /// When the earliest change since tables `id` was read, where the chain says.
    pub fn read_since(&self, id: u64) -> Option<std::time::Instant> {
        self.back_to(id).filter_map(|c| c.read).min()
    }

    /// Every prefix changed since tables `id` (in no particular order, repeats kept), or
    /// `None` if the chain does not reach back to them.
    pub fn since(&self, id: u64) -> Option<Vec<Prefix>> {
        let mut reached = false;
        let out = self.back_to(id).inspect(|c| reached |= c.since == id).flat_map(|c| c.prefixes.iter().copied());
        let out: Vec<Prefix> = out.collect();
        reached.then_some(out)
    }
}

static TABLES_BUILT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl RouterTables {
    /// Builds the tables: connected, local and broadcast routes from the ports' addresses, then
    /// the static routes (a static route for the same prefix as a connected one replaces it).
    pub fn build(ports: Vec<PortSpec>, statics: &[(Prefix, RouteTarget4)]) -> Result<RouterTables, TablesError> {
        RouterTables::build_advised(ports, statics, no_advice)
    }

    /// [`RouterTables::build`], with `advise` given to [`Fib::build_advised`] for the FIB's memory.
    pub fn build_advised(
        ports: Vec<PortSpec>,
        statics: &[(Prefix, RouteTarget4)],
        advise: Advice,
    ) -> Result<RouterTables, TablesError> {
        RouterTables::build_dual(ports, statics, &[], advise)
    }

    /// [`RouterTables::build_advised`] with static IPv6 routes too: connected and local IPv6
    /// routes come from the ports' IPv6 addresses (a static route for the same prefix replaces
    /// a connected one; the box's own addresses always win).
    pub fn build_dual(
        ports: Vec<PortSpec>,
        statics: &[(Prefix, RouteTarget4)],
        statics6: &[(Prefix6, RouteTarget6)],
        advise: Advice,
    ) -> Result<RouterTables, TablesError> {
        let v6 = build6(&ports, statics6, advise)?;
        let mut interner = Interner4::new();
        let mut intern = |nh: NextHop4| interner.one(nh);
        let mut routes = Vec::new();
        for (p, spec) in ports.iter().enumerate() {
            let port = PortId(p as u8);
            for &(addr, len) in &spec.addrs {
                let subnet = Prefix::truncate(addr, len);
                let nh = intern(NextHop { kind: NhKind::Connected, port, src: addr, mtu: 0 });
                routes.push((subnet, nh, RouteOrigin::Connected));
                if len < 31 {
                    let b = intern(NextHop { kind: NhKind::Broadcast, port, src: addr, mtu: 0 });
                    routes.push((Prefix::truncate(subnet.broadcast(), 32), b, RouteOrigin::Broadcast));
                }
            }
        }
        // Local addresses last among the automatic ones, so a /32 address wins over its subnet.
        for (p, spec) in ports.iter().enumerate() {
            for &(addr, _) in &spec.addrs {
                let nh = intern(NextHop { kind: NhKind::Local, port: PortId(p as u8), src: addr, mtu: 0 });
                routes.push((Prefix::truncate(addr, 32), nh, RouteOrigin::Local));
            }
        }
        for &(prefix, target) in statics {
            let nh = match target {
                RouteTarget::Via { gw: IpAddr::V4(gw), dev } => {
                    let (port, src) = connected_to(&ports, gw).ok_or(TablesError::GatewayUnreachable(gw))?;
                    if dev.is_some_and(|d| d != port) {
                        return Err(TablesError::GatewayNotOnDev(gw.into()));
                    }
                    NextHop { kind: NhKind::Gateway(IpAddr::V4(gw)), port, src, mtu: 0 }
                }
                RouteTarget::Dev(port) => {
                    let spec = ports.get(port.index()).ok_or(TablesError::NoSuchPort(port.0))?;
                    let &(src, _) = spec.addrs.first().ok_or_else(|| TablesError::NoAddress(spec.name.clone()))?;
                    NextHop { kind: NhKind::Connected, port, src, mtu: 0 }
                }
                RouteTarget::Via { gw: IpAddr::V6(gw), dev } => {
                    let port = port_of_gateway6(&ports, gw, dev)?;
                    NextHop { kind: NhKind::Gateway(IpAddr::V6(gw)), port, src: source_on(&ports, port), mtu: 0 }
                }
            };
            let nh = intern(nh);
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
        let id = next_id();
        Ok(RouterTables {
            v4: Tables4 { fib, nexthops: interner.nexthops, routes: Arc::new(routes), groups: Vec::new() },
            v6,
            ports,
            icmp_rate: 0,
            icmp_burst: 1,
            rfc1812_martians: false,
            id,
            changes4: None,
        })
    }

    /// Builds the tables from routes mirrored from the kernel (`routes::mirror`): no route is made
    /// up from the ports' addresses, which the kernel's own connected and local routes cover.
    /// For a prefix given twice the last one wins, local-table routes after the main table's.
    /// The ports' addresses serve ICMP sources and next hops' sources only.
    pub fn build_mirrored(
        ports: Vec<PortSpec>,
        routes4: &[Mirrored4],
        routes6: &[Mirrored6],
        advise: Advice,
    ) -> Result<RouterTables, TablesError> {
        let mut interner = Interner4::new();
        let mut routes = Vec::with_capacity(routes4.len());
        let mut order: Vec<&Mirrored4> = routes4.iter().collect();
        order.sort_by_key(|r| r.local_table);
        for r in order {
            if let Some(nh) = interner.route(&ports, r, r.prefix.addr().into())? {
                routes.push((r.prefix, nh, RouteOrigin::Kernel { protocol: r.protocol, local_table: r.local_table }));
            }
        }
        let fib_routes: Vec<(Prefix, NhIndex)> = routes.iter().map(|r| (r.0, r.1)).collect();
        let fib = Fib::build_advised(&fib_routes, advise)?;
        let v6 = mirrored6(&ports, routes6, advise)?;
        let Interner4 { nexthops, groups, .. } = interner;
        Ok(RouterTables {
            v4: Tables4 { fib, nexthops, routes: Arc::new(routes), groups },
            v6,
            ports,
            icmp_rate: 0,
            icmp_burst: 1,
            rfc1812_martians: false,
            id: next_id(),
            changes4: None,
        })
    }

    /// Whether `a` is one of the box's IPv6 addresses (link-local ones are the kernel's).
    pub fn is_local6(&self, a: Ipv6Addr) -> bool {
        self.route6(a).is_some_and(|nh| nh.kind == NhKind6::Local)
    }

    /// The source address for a packet the router sends to `dst` out of `egress`, as Linux
    /// chooses it (RFC 6724, the rules that tell the box's addresses apart): for a link-local
    /// destination the port's link-local address (rule 2, scope); else the port's own global
    /// addresses first (rule 5, outgoing interface), the longest prefix shared with `dst`
    /// among them (rule 8); else any port's; else the port's link-local one.
    pub fn source6(&self, dst: Ipv6Addr, egress: PortId) -> Option<Ipv6Addr> {
        let port = self.ports.get(egress.index())?;
        if is_link_local6(&dst) {
            return port.link_local;
        }
        // Rule 8 as Linux applies it: the shared prefix counts up to the address's own prefix
        // length, no further (ipv6_addr_diff capped at ifa->prefix_len). Of equals Linux keeps
        // the first in its list, where a newer address of a scope goes before the older ones:
        // the last configured (as `xfwd kernel` adds them in file order) wins.
        let shared = |&(a, len): &(Ipv6Addr, u8)| (u128::from(a) ^ u128::from(dst)).leading_zeros().min(u32::from(len));
        let best = |addrs: &mut dyn Iterator<Item = (Ipv6Addr, u8)>| {
            addrs
                .fold(None::<(u32, Ipv6Addr)>, |b, c| match b {
                    Some((k, _)) if k > shared(&c) => b,
                    _ => Some((shared(&c), c.0)),
                })
                .map(|(_, a)| a)
        };
        best(&mut port.addrs6.iter().copied())
            .or_else(|| best(&mut self.ports.iter().flat_map(|p| p.addrs6.iter().copied())))
            .or(port.link_local)
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
    longest_match(ports, |s: &PortSpec| s.addrs.as_slice(), |x, len| Prefix::truncate(x, len).contains(a))
}

/// The port whose IPv6 prefixes hold `a` (longest match first).
pub fn connected_to6(ports: &[PortSpec], a: Ipv6Addr) -> Option<PortId> {
    longest_match(ports, |s: &PortSpec| s.addrs6.as_slice(), |x, len| Prefix6::truncate(x, len).contains(a))
        .map(|m| m.0)
}

/// The port, and its address, whose connected prefix holds an address, the longest prefix
/// first: `addrs` are a port's addresses of the family, `holds` whether the prefix of one (the
/// address, its length) holds the address sought. The last of equals wins.
fn longest_match<A: Copy>(
    ports: &[PortSpec],
    addrs: impl Fn(&PortSpec) -> &[(A, u8)],
    holds: impl Fn(A, u8) -> bool,
) -> Option<(PortId, A)> {
    ports
        .iter()
        .enumerate()
        .flat_map(|(p, s)| addrs(s).iter().map(move |&(addr, len)| (p, addr, len)))
        .filter(|&(_, addr, len)| holds(addr, len))
        .max_by_key(|&(_, _, len)| len)
        .map(|(p, addr, _)| (PortId(p as u8), addr))
}

/// The port an IPv6 gateway is reached by: `dev` for a link-local one (which needs it), else
/// the port whose connected prefix holds it (which `dev`, if given, must name).
fn port_of_gateway6(ports: &[PortSpec], gw: Ipv6Addr, dev: Option<PortId>) -> Result<PortId, TablesError> {
    let port = if is_link_local6(&gw) {
        dev.ok_or(TablesError::LinkLocalNeedsDev(gw))?
    } else {
        let on = connected_to6(ports, gw).ok_or(TablesError::GatewayUnreachable6(gw))?;
        if dev.is_some_and(|d| d != on) {
            return Err(TablesError::GatewayNotOnDev(gw.into()));
        }
        on
    };
    if port.index() >= ports.len() {
        return Err(TablesError::NoSuchPort(port.0));
    }
    Ok(port)
}

/// The box address ICMP errors about packets routed through `port` come from when no subnet
/// of the port holds the next hop (an IPv6 gateway): the port's first IPv4 address, else any
/// port's (a port of an unnumbered link has none), else 0.0.0.0.
fn source_on(ports: &[PortSpec], port: PortId) -> Ipv4Addr {
    ports
        .get(port.index())
        .and_then(|s| s.addrs.first())
        .or_else(|| ports.iter().flat_map(|p| p.addrs.first()).next())
        .map_or(Ipv4Addr::UNSPECIFIED, |a| a.0)
}

/// A number for a new set of tables (see [`RouterTables::id`]).
pub fn next_id() -> u64 {
    TABLES_BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A family's next hops and equal-cost groups, each interned once: a route's next hop index for
/// the FIB. Append-only, so that indices handed out stay valid (kernel mode adds to the live
/// tables' next hops, `l3::incremental`).
#[derive(Debug, Clone)]
pub struct Interner<N> {
    /// Next hops by index (index 0 unused).
    pub nexthops: Vec<N>,
    /// Members of the groups.
    pub groups: Vec<NhIndex>,
    index: HashMap<N, NhIndex>,
    group_index: HashMap<Vec<NhIndex>, NhIndex>,
}

/// The IPv4 next hops of mirrored routes, interned.
pub type Interner4 = Interner<NextHop4>;

/// The IPv6 next hops of mirrored routes, interned.
pub type Interner6 = Interner<NextHop6>;

impl<N: Copy + Eq + core::hash::Hash> Interner<N> {
    /// An empty one, `unused` at index 0 (the FIB's "no route").
    fn starting_with(unused: N) -> Interner<N> {
        Interner { nexthops: vec![unused], groups: Vec::new(), index: HashMap::new(), group_index: HashMap::new() }
    }

    /// The index of `nh`, added if new.
    pub fn one(&mut self, nh: N) -> NhIndex {
        let nexthops = &mut self.nexthops;
        *self.index.entry(nh).or_insert_with(|| {
            nexthops.push(nh);
            NhIndex((nexthops.len() - 1) as u16)
        })
    }

    /// The index of the equal-cost group of `paths` (each interned with its weight), added if
    /// new as `group(first, len)`: its members are `first..first + len` of
    /// [`Interner::groups`], each repeated by its weight.
    fn group<P>(
        &mut self,
        paths: &[P],
        mut one: impl FnMut(&P) -> (N, u16),
        group: impl FnOnce(u32, u16) -> N,
    ) -> NhIndex {
        let members: Vec<(NhIndex, u16)> = paths
            .iter()
            .map(|p| {
                let (nh, weight) = one(p);
                (self.one(nh), weight)
            })
            .collect();
        let members = weighted(&members);
        let (nexthops, groups) = (&mut self.nexthops, &mut self.groups);
        let next = NhIndex(nexthops.len() as u16);
        *self.group_index.entry(members.clone()).or_insert_with(|| {
            let first = groups.len() as u32;
            groups.extend_from_slice(&members);
            nexthops.push(group(first, members.len() as u16));
            next
        })
    }

    /// Whether the FIB can index them all.
    fn fits(&self) -> Result<(), TablesError> {
        if self.nexthops.len() > 0x7fff {
            return Err(FibError::TooManyNextHops(self.nexthops.len()).into());
        }
        Ok(())
    }
}

/// What the families' next hops differ in when a kernel route is interned: what they keep for
/// ICMP errors ([`NextHop::src`]) and whether broadcast routes exist.
pub trait HopSource: Copy + Eq + core::hash::Hash {
    /// Whether the family has broadcast routes (IPv6 has none: a broadcast the kernel might
    /// report is taken as one of the box's addresses, as its anycast routes are).
    const BROADCAST: bool;
    /// For a next hop out of `port` whose neighbour (gateway or destination) is `toward`.
    fn toward(ports: &[PortSpec], port: PortId, toward: IpAddr) -> Self;
    /// For a next hop that leaves by no port in particular (special routes, groups,
    /// broadcasts, ports xfwd does not own).
    fn any(ports: &[PortSpec]) -> Self;
    /// For one of the box's own addresses, `addr`.
    fn local(addr: IpAddr) -> Self;
}

/// IPv4 next hops keep the box address ICMP errors come from, as Linux picks it.
impl HopSource for Ipv4Addr {
    const BROADCAST: bool = true;

    /// The address whose subnet on `port` holds `toward`, else the port's first, else any
    /// port's; an IPv6 gateway's (RFC 5549): the port's first, else any port's.
    fn toward(ports: &[PortSpec], port: PortId, toward: IpAddr) -> Ipv4Addr {
        let IpAddr::V4(a) = toward else {
            return source_on(ports, port);
        };
        ports[port.index()]
            .addrs
            .iter()
            .filter(|&&(x, len)| Prefix::truncate(x, len).contains(a))
            .max_by_key(|x| x.1)
            .map_or_else(|| source_on(ports, port), |x| x.0)
    }

    fn any(ports: &[PortSpec]) -> Ipv4Addr {
        ports.iter().flat_map(|p| p.addrs.first()).map(|a| a.0).next().unwrap_or(Ipv4Addr::UNSPECIFIED)
    }

    fn local(addr: IpAddr) -> Ipv4Addr {
        match addr {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// IPv6 next hops keep nothing: an ICMPv6 error's source is chosen when it is sent.
impl HopSource for () {
    const BROADCAST: bool = false;

    fn toward(_ports: &[PortSpec], _port: PortId, _toward: IpAddr) {}

    fn any(_ports: &[PortSpec]) {}

    fn local(_addr: IpAddr) {}
}

impl<G: Copy + Eq + core::hash::Hash + Into<IpAddr>, S: HopSource> Interner<NextHop<G, S>> {
    /// An empty one.
    pub fn new() -> Interner<NextHop<G, S>> {
        Interner::starting_with(NextHop { kind: NhKind::Local, port: PortId(0), src: S::any(&[]), mtu: 0 })
    }

    /// The next hop index of `r` through `ports` (`None`: a unicast route without a path);
    /// `at` is the address of its prefix.
    pub fn route<P>(
        &mut self,
        ports: &[PortSpec],
        r: &MirroredRoute<P, G>,
        at: IpAddr,
    ) -> Result<Option<NhIndex>, TablesError> {
        if let Some(p) = r.paths.iter().flat_map(|p| p.port).find(|p| p.index() >= ports.len()) {
            return Err(TablesError::NoSuchPort(p.0));
        }
        let any = S::any(ports);
        let hop = |kind, port, src| NextHop { kind, port, src, mtu: 0 };
        let one = |p: &Path<G>| -> NextHop<G, S> {
            match (p.port, p.gw) {
                (None, _) => hop(NhKind::Special(Special::Foreign), PortId(0), any),
                (Some(port), Some(gw)) => {
                    NextHop { kind: NhKind::Gateway(gw), port, src: S::toward(ports, port, gw.into()), mtu: r.mtu }
                }
                (Some(port), None) => {
                    NextHop { kind: NhKind::Connected, port, src: S::toward(ports, port, at), mtu: r.mtu }
                }
            }
        };
        let first_port = r.paths.first().and_then(|p| p.port).unwrap_or(PortId(0));
        let nh = match r.kind {
            RouteKind::Broadcast if S::BROADCAST => self.one(hop(NhKind::Broadcast, first_port, any)),
            RouteKind::Local | RouteKind::Broadcast => self.one(hop(NhKind::Local, first_port, S::local(at))),
            RouteKind::Special(k) => self.one(hop(NhKind::Special(k), PortId(0), any)),
            RouteKind::Unicast if r.paths.len() <= 1 => match r.paths.first() {
                Some(p) => self.one(one(p)),
                None => return Ok(None),
            },
            RouteKind::Unicast => self.group(
                &r.paths,
                |p| (one(p), p.weight),
                |first, len| hop(NhKind::Group { first, len }, PortId(0), any),
            ),
        };
        self.fits()?;
        Ok(Some(nh))
    }
}

impl<G: Copy + Eq + core::hash::Hash + Into<IpAddr>, S: HopSource> Default for Interner<NextHop<G, S>> {
    fn default() -> Self {
        Interner::new()
    }
}

/// [`RouterTables::build_mirrored`]'s IPv6 half.
fn mirrored6(ports: &[PortSpec], routes6: &[Mirrored6], advise: Advice) -> Result<Tables6, TablesError> {
    let mut interner = Interner6::new();
    let mut routes = Vec::with_capacity(routes6.len());
    let mut order: Vec<&Mirrored6> = routes6.iter().collect();
    order.sort_by_key(|r| r.local_table);
    for r in order {
        if let Some(nh) = interner.route(ports, r, r.prefix.addr().into())? {
            routes.push((r.prefix, nh, RouteOrigin::Kernel { protocol: r.protocol, local_table: r.local_table }));
        }
    }
    let fib_routes: Vec<(Prefix6, NhIndex)> = routes.iter().map(|r| (r.0, r.1)).collect();
    let fib = Arc::new(Fib6::build_advised(&fib_routes, advise)?);
    Ok(Tables6 { fib, nexthops: interner.nexthops, routes: Arc::new(routes), groups: interner.groups })
}

/// The IPv6 tables: connected prefixes, static routes, then the box's addresses as /128s (a
/// later duplicate wins in the FIB, so these stay above any static route).
fn build6(ports: &[PortSpec], statics: &[(Prefix6, RouteTarget6)], advise: Advice) -> Result<Tables6, TablesError> {
    let mut interner = Interner6::new();
    let mut intern = |nh: NextHop6| interner.one(nh);
    let mut routes = Vec::new();
    for (p, spec) in ports.iter().enumerate() {
        for &(addr, len) in &spec.addrs6 {
            let nh = intern(NextHop6 { kind: NhKind6::Connected, port: PortId(p as u8), src: (), mtu: 0 });
            routes.push((Prefix6::truncate(addr, len), nh, RouteOrigin::Connected));
        }
    }
    for &(prefix, target) in statics {
        let nh = match target {
            RouteTarget6::Via { gw, dev } => {
                NextHop6 { kind: NhKind6::Gateway(gw), port: port_of_gateway6(ports, gw, dev)?, src: (), mtu: 0 }
            }
            RouteTarget6::Dev(port) => {
                if port.index() >= ports.len() {
                    return Err(TablesError::NoSuchPort(port.0));
                }
                NextHop6 { kind: NhKind6::Connected, port, src: (), mtu: 0 }
            }
        };
        let nh = intern(nh);
        routes.push((prefix, nh, RouteOrigin::Static));
    }
    for (p, spec) in ports.iter().enumerate() {
        for &(addr, _) in &spec.addrs6 {
            let nh = intern(NextHop6 { kind: NhKind6::Local, port: PortId(p as u8), src: (), mtu: 0 });
            routes.push((Prefix6::truncate(addr, 128), nh, RouteOrigin::Local));
        }
    }
    let fib_routes: Vec<(Prefix6, NhIndex)> = routes.iter().map(|r| (r.0, r.1)).collect();
    let fib = Arc::new(Fib6::build_advised(&fib_routes, advise)?);
    Ok(Tables6 { fib, nexthops: interner.nexthops, routes: Arc::new(routes), groups: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l3::neighbors::Key6;
    use crate::l3::testing::{port, ETH4, ETH5};

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// The reference board, on the rig's addresses: eth5 towards one side, eth4 towards the other.
    pub(crate) fn reference() -> RouterTables {
        let ports = vec![
            port("eth5", ETH5, &["198.18.10.2/24", "198.18.11.2/24"]),
            port("eth4", ETH4, &["198.18.30.1/24", "198.18.31.1/24"]),
        ];
        RouterTables::build(ports, &[("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2")))]).unwrap()
    }

    #[test]
    fn a_chain_of_changes_reaches_back_until_it_holds_too_many_prefixes() {
        let p = |s: &str| -> Prefix { s.parse().unwrap() };
        let a = Arc::new(Changes4::new(1, vec![p("198.18.0.0/24")], None));
        let b = Arc::new(Changes4::new(2, vec![p("198.18.1.0/24"), p("198.18.0.0/24")], Some(Arc::clone(&a))));
        assert_eq!(b.since(2).unwrap(), [p("198.18.1.0/24"), p("198.18.0.0/24")]);
        assert_eq!(b.since(1).unwrap().len(), 3);
        assert_eq!(b.since(0), None);
        let many = vec![p("198.18.2.0/24"); Changes4::KEEP];
        let c = Changes4::new(3, many, Some(b));
        assert_eq!(c.since(3).unwrap().len(), Changes4::KEEP);
        assert_eq!(c.since(2), None, "cut: the follower copies the whole FIB instead");
    }

    #[test]
    fn a_chain_of_many_small_publications_is_cut_short_enough_to_free() {
        // 10,000 changes a second, one a publication: without a bound on its links, the chain
        // grows to KEEP links, freed by as deep a recursion (past a thread's stack).
        let p: Prefix = "198.18.0.0/24".parse().unwrap();
        let mut head: Option<Arc<Changes4>> = None;
        for id in 0..200_000u64 {
            head = Some(Arc::new(Changes4::new(id, vec![p], head.take())));
        }
        let head = head.unwrap();
        assert_eq!(head.since(199_999 - 100).map(|v| v.len()), Some(101), "a recent follower repaints");
        assert_eq!(head.since(199_999 - Changes4::KEEP_LINKS as u64 - 1), None, "beyond the links kept: a copy");
        assert!(head.since(0).is_none());
        drop(head);
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
        assert_eq!(
            (nh.kind, nh.port, nh.src),
            (NhKind::Gateway(IpAddr::V4(ip("198.18.30.2"))), PortId(1), ip("198.18.30.1"))
        );
        assert!(t.route(ip("203.0.113.1")).is_none());
        assert_eq!(t.local_addresses().len(), 4);
    }

    fn ip6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The reference ports with IPv6 on the rig's benchmarking range: eth5 2001:2:0:10::2/64,
    /// eth4 2001:2:0:30::1/64 and 2001:2:0:31::1/64.
    fn dual() -> Vec<PortSpec> {
        let mut ports = reference().ports;
        ports[0].addrs6 = vec![(ip6("2001:2:0:10::2"), 64)];
        ports[0].link_local = Some(ip6("fe80::5"));
        ports[1].addrs6 = vec![(ip6("2001:2:0:30::1"), 64), (ip6("2001:2:0:31::1"), 64)];
        ports[1].link_local = Some(ip6("fe80::4"));
        ports
    }

    #[test]
    fn ipv6_connected_local_and_static_routes() {
        let statics = [
            ("2001:2:100::/48".parse().unwrap(), RouteTarget6::Via { gw: ip6("2001:2:0:30::2"), dev: None }),
            ("2001:2:200::/48".parse().unwrap(), RouteTarget6::Via { gw: ip6("fe80::99"), dev: Some(PortId(0)) }),
            ("2001:2:300::/48".parse().unwrap(), RouteTarget6::Dev(PortId(1))),
            // Replaces the connected prefix; the box's address in it stays local.
            (
                "2001:2:0:31::/64".parse().unwrap(),
                RouteTarget6::Via { gw: ip6("2001:2:0:30::2"), dev: Some(PortId(1)) },
            ),
        ];
        let t = RouterTables::build_dual(dual(), &[], &statics, no_advice).unwrap();
        let nh = |a: &str| t.route6(ip6(a)).copied();
        assert_eq!(nh("2001:2:0:10::7"), Some(NextHop6 { kind: NhKind6::Connected, port: PortId(0), src: (), mtu: 0 }));
        assert_eq!(nh("2001:2:0:30::1"), Some(NextHop6 { kind: NhKind6::Local, port: PortId(1), src: (), mtu: 0 }));
        assert!(t.is_local6(ip6("2001:2:0:31::1")));
        assert!(!t.is_local6(ip6("fe80::4")), "link-local addresses are the kernel's");
        assert_eq!(nh("2001:2:100::1").unwrap().kind, NhKind6::Gateway(ip6("2001:2:0:30::2")));
        assert_eq!(
            nh("2001:2:200::1"),
            Some(NextHop6 { kind: NhKind6::Gateway(ip6("fe80::99")), port: PortId(0), src: (), mtu: 0 })
        );
        assert_eq!(nh("2001:2:300::1"), Some(NextHop6 { kind: NhKind6::Connected, port: PortId(1), src: (), mtu: 0 }));
        assert_eq!(nh("2001:2:0:31::9").unwrap().kind, NhKind6::Gateway(ip6("2001:2:0:30::2")));
        assert_eq!(nh("2001:3::1"), None);
        // IPv4 untouched beside it.
        assert_eq!(t.route(ip("198.18.10.7")).unwrap().kind, NhKind::Connected);
    }

    #[test]
    fn ipv6_gateways_must_be_reachable_and_link_local_ones_need_their_port() {
        let via = |gw: &str, dev| [("2001:2:100::/48".parse().unwrap(), RouteTarget6::Via { gw: ip6(gw), dev })];
        let e = |r: &[(Prefix6, RouteTarget6)]| RouterTables::build_dual(dual(), &[], r, no_advice).unwrap_err();
        assert_eq!(e(&via("2001:9::1", None)), TablesError::GatewayUnreachable6(ip6("2001:9::1")));
        assert_eq!(e(&via("fe80::1", None)), TablesError::LinkLocalNeedsDev(ip6("fe80::1")));
        assert_eq!(
            e(&via("2001:2:0:30::2", Some(PortId(0)))),
            TablesError::GatewayNotOnDev(ip6("2001:2:0:30::2").into())
        );
        assert_eq!(e(&via("fe80::1", Some(PortId(7)))), TablesError::NoSuchPort(7));
        assert_eq!(
            e(&[("2001:2:100::/48".parse().unwrap(), RouteTarget6::Dev(PortId(9)))]),
            TablesError::NoSuchPort(9)
        );
    }

    #[test]
    fn ipv4_routes_through_ipv6_gateways_are_checked_as_ipv6_gateways_are() {
        let via6 =
            |gw: &str, dev| [("198.51.100.0/24".parse().unwrap(), RouteTarget::Via { gw: IpAddr::V6(ip6(gw)), dev })];
        let t = RouterTables::build_dual(dual(), &via6("fe80::9", Some(PortId(1))), &[], no_advice).unwrap();
        let nh = t.route(ip("198.51.100.7")).unwrap();
        assert_eq!(
            (nh.kind, nh.port, nh.src),
            (NhKind::Gateway(IpAddr::V6(ip6("fe80::9"))), PortId(1), ip("198.18.30.1"))
        );
        let t = RouterTables::build_dual(dual(), &via6("2001:2:0:10::1", None), &[], no_advice).unwrap();
        assert_eq!(t.route(ip("198.51.100.7")).unwrap().port, PortId(0), "a global gateway's port is its prefix's");
        let e = |r: &[(Prefix, RouteTarget4)]| RouterTables::build_dual(dual(), r, &[], no_advice).unwrap_err();
        assert_eq!(e(&via6("fe80::9", None)), TablesError::LinkLocalNeedsDev(ip6("fe80::9")));
        assert_eq!(e(&via6("2001:9::1", None)), TablesError::GatewayUnreachable6(ip6("2001:9::1")));
        assert_eq!(
            e(&via6("2001:2:0:10::1", Some(PortId(1)))),
            TablesError::GatewayNotOnDev(ip6("2001:2:0:10::1").into())
        );
    }

    #[test]
    fn link_local_neighbours_are_keyed_with_their_port() {
        let ll = ip6("fe80::1");
        assert_ne!(scope6(ll, PortId(0)), scope6(ll, PortId(1)));
        assert_eq!(unscope6(scope6(ll, PortId(7))), ll);
        assert_eq!(scope6(ll, PortId(7)).port, Some(PortId(7)));
        // Bits 16–31 of a link-local address are the address's own (Linux accepts them set).
        assert_ne!(scope6(ip6("fe80:3::23"), PortId(1)), scope6(ip6("fe80::23"), PortId(1)));
        assert_eq!(unscope6(scope6(ip6("fe80:3::23"), PortId(1))), ip6("fe80:3::23"));
        let g = ip6("2001:2::1");
        assert_eq!(scope6(g, PortId(3)), Key6::global(g), "global addresses are their own key");
    }

    #[test]
    fn ipv6_sources_are_chosen_as_linux_chooses_them() {
        let mut ports = dual();
        ports.push(PortSpec { link_local: Some(ip6("fe80::6")), ..port("eth6", MacAddr([2, 0, 0, 0, 6, 6]), &[]) });
        let t = RouterTables::build_dual(ports, &[], &[], no_advice).unwrap();
        // The outgoing port's address sharing the longest prefix with the destination.
        assert_eq!(t.source6(ip6("2001:2:0:31::9"), PortId(1)), Some(ip6("2001:2:0:31::1")));
        assert_eq!(t.source6(ip6("2001:2:0:30::9"), PortId(1)), Some(ip6("2001:2:0:30::1")));
        // Beyond its prefix length an address's match counts no more; of equals, the last
        // configured wins, as in Linux's address list.
        assert_eq!(t.source6(ip6("2001:2:0:31:ffff::1"), PortId(1)), Some(ip6("2001:2:0:31::1")));
        assert_eq!(t.source6(ip6("2001:2:0:32::1"), PortId(1)), Some(ip6("2001:2:0:31::1")));
        assert_eq!(t.source6(ip6("2001:2:0:30:ffff::1"), PortId(1)), Some(ip6("2001:2:0:30::1")));
        assert_eq!(t.source6(ip6("2001:7::9"), PortId(0)), Some(ip6("2001:2:0:10::2")));
        // A link-local destination: the port's link-local address.
        assert_eq!(t.source6(ip6("fe80::77"), PortId(1)), Some(ip6("fe80::4")));
        // A port without a global address: the best of the other ports' (Linux prefers a
        // global source to a link-local one for a global destination).
        assert_eq!(t.source6(ip6("2001:2:0:31::9"), PortId(2)), Some(ip6("2001:2:0:31::1")));
        assert_eq!(t.source6(ip6("2001:2::9"), PortId(9)), None);
    }

    #[test]
    fn unreachable_gateways_are_refused() {
        let ports = reference().ports;
        let e = RouterTables::build(ports, &[("10.0.0.0/8".parse().unwrap(), RouteTarget::via(ip("192.0.2.1")))])
            .unwrap_err();
        assert_eq!(e, TablesError::GatewayUnreachable(ip("192.0.2.1")));
    }

    #[test]
    fn a_default_route_does_not_hide_local_addresses() {
        let ports = reference().ports;
        let t = RouterTables::build(
            ports,
            &[
                ("0.0.0.0/0".parse().unwrap(), RouteTarget::via(ip("198.18.30.2"))),
                ("198.18.30.1/32".parse().unwrap(), RouteTarget::Dev(PortId(0))),
            ],
        )
        .unwrap();
        assert_eq!(t.route(ip("8.8.8.8")).unwrap().kind, NhKind::Gateway(IpAddr::V4(ip("198.18.30.2"))));
        assert_eq!(t.route(ip("198.18.30.1")).unwrap().kind, NhKind::Local);
    }
}
