//! The kernel's routing state as xfwd mirrors it (`[fib] source = "kernel"`): routes of the
//! local table and of one main table, nexthop objects, the ports' addresses and MTUs. Pure: the
//! thread that follows the kernel ([`super::kernel`], over [`super::rtnl`]) turns rtnetlink messages into [`Event`]s, applies them here, and
//! builds the workers' tables from [`Mirror::routes4`], [`Mirror::routes6`] and
//! [`Mirror::ports`] when something changed.
//!
//! # What the kernel's semantics become here
//!
//! - Of the routes for one prefix in one table (they differ by metric, and IPv4 by TOS), the
//!   lowest metric is used, as the kernel does; routes with a TOS are not used (counted in
//!   [`Mirror::ignored`]), nor are source-specific IPv6 routes, which are kept apart from the
//!   others (a plain route of the same prefix and metric stays a route of its own).
//! - IPv4 routes of one table, prefix, TOS and metric (`ip route append`, `prepend`) are kept
//!   in the kernel's order, which the message's flags give ([`Place`]); the first is used, and
//!   deleting it uncovers the next.
//! - The kernel looks the local table up first, then the main one. The mirror merges both
//!   into one longest-prefix match where a local-table route wins a tie; the two differ only
//!   when the local table holds a prefix that a longer main route would split, which the
//!   kernel's own local routes (addresses, broadcasts, 127/8 and ::1) never are.
//! - Routes naming a nexthop object (`RTA_NH_ID`, as FRR installs them) take its paths; a
//!   group's members keep their weights; a route whose object is unknown is not used. Deleting
//!   an object deletes the routes that use it, which the kernel does without a notification.
//! - A route's paths through interfaces xfwd does not own stay, marked as such: the decision
//!   answers them as for no route ([`crate::l3::tables::Special::Foreign`]).
//! - The kernel removes routes without a notification when an interface goes down or an IPv4
//!   address goes away; those events ask for a full resynchronisation ([`Applied::Resync`]).
//! - IPv6 multipath routes may arrive whole or path by path (`NLM_F_APPEND`); deleting one path
//!   of a multipath route leaves the others.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::l3::fib::Prefix;
use crate::l3::fib6::Prefix6;
use crate::l3::tables::{Mirrored4, Mirrored6, MirroredRoute, Path, PortSpec, RouteKind, Special};
use crate::PortId;

/// The kernel's local routing table.
pub const TABLE_LOCAL: u32 = 255;
/// The kernel's main routing table.
pub const TABLE_MAIN: u32 = 254;

/// A route type as the kernel names it (`rtm_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelType {
    /// `unicast`.
    Unicast,
    /// `local`.
    Local,
    /// `broadcast`.
    Broadcast,
    /// `anycast`.
    Anycast,
    /// `blackhole`.
    Blackhole,
    /// `unreachable`.
    Unreachable,
    /// `prohibit`.
    Prohibit,
    /// Anything else (multicast, throw, nat, ...): not used.
    Other(u8),
}

/// One path of a kernel route: gateway, output interface, weight (1..=256).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelPath<A> {
    /// Gateway.
    pub gw: Option<A>,
    /// Output interface.
    pub ifindex: u32,
    /// Weight.
    pub weight: u16,
}

/// A route as an rtnetlink message describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute<P, A> {
    /// Routing table.
    pub table: u32,
    /// Destination.
    pub prefix: P,
    /// Metric (`RTA_PRIORITY`).
    pub metric: u32,
    /// IPv4 TOS (IPv6: 0).
    pub tos: u8,
    /// Whether it is source-specific (IPv6 `from`).
    pub has_source: bool,
    /// Type.
    pub kind: KernelType,
    /// Who installed it.
    pub protocol: u8,
    /// Paths (`RTA_GATEWAY`/`RTA_OIF`, or `RTA_MULTIPATH`).
    pub paths: Vec<KernelPath<A>>,
    /// Nexthop object (`RTA_NH_ID`).
    pub nh_id: Option<u32>,
    /// MTU metric (0: none).
    pub mtu: u32,
    /// Something xfwd cannot forward as the kernel would: an encapsulation, a gateway of
    /// another family than IPv4 and IPv6 (`via` an MPLS label, say).
    pub unsupported: bool,
    /// Scope (`rtm_scope`: 0 global, 253 link, 254 host, ...), for display.
    pub scope: u8,
    /// Preferred source address (`RTA_PREFSRC`), for display.
    pub prefsrc: Option<IpAddr>,
    /// IPv6 router preference (`RTA_PREF`: 0 medium, 1 high, 3 low), for display.
    pub pref: Option<u8>,
}

/// An IPv4 kernel route: its gateways are IPv4 addresses, or IPv6 ones (RFC 5549, `via inet6`).
pub type KernelRoute4 = KernelRoute<Prefix, IpAddr>;
/// An IPv6 kernel route.
pub type KernelRoute6 = KernelRoute<Prefix6, Ipv6Addr>;

/// A nexthop object (`RTM_NEWNEXTHOP`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nexthop {
    /// A gateway (or none) out of an interface.
    Single {
        /// Gateway.
        gw: Option<IpAddr>,
        /// Output interface.
        ifindex: u32,
    },
    /// `blackhole`.
    Blackhole,
    /// A group: member ids and weights.
    Group(Vec<(u32, u16)>),
}

/// Where a new IPv4 route goes among the kernel's routes of the same table, prefix, TOS and
/// metric, which the kernel keeps in order and looks up first to last (`ip route append` and
/// `prepend` make such lists; the first is the one used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// After them: a dump (in the kernel's order), `NLM_F_APPEND`, or a new one (`NLM_F_EXCL`).
    Last,
    /// Before them: a notification with neither flag (`ip route prepend`).
    First,
    /// In the first one's place (`NLM_F_REPLACE`).
    Replace,
}

/// What changed in the kernel, from one rtnetlink message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `RTM_NEWROUTE`/`RTM_DELROUTE` (IPv4).
    Route4 {
        /// New (else deleted).
        add: bool,
        /// Where a new route goes among those of the same table, prefix, TOS and metric.
        place: Place,
        /// The route.
        route: KernelRoute4,
    },
    /// `RTM_NEWROUTE`/`RTM_DELROUTE` (IPv6).
    Route6 {
        /// New (else deleted).
        add: bool,
        /// `NLM_F_REPLACE` was set (a new route replaces the one it names, whole).
        replace: bool,
        /// The route.
        route: KernelRoute6,
    },
    /// `RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP`.
    Nexthop {
        /// Its id.
        id: u32,
        /// The object, or `None` when deleted.
        nh: Option<Nexthop>,
    },
    /// `RTM_NEWADDR`/`RTM_DELADDR`.
    Address {
        /// New (else deleted).
        add: bool,
        /// Interface.
        ifindex: u32,
        /// Address.
        addr: IpAddr,
        /// Prefix length.
        len: u8,
    },
    /// `RTM_NEWLINK`: an interface's state.
    Link {
        /// Interface.
        ifindex: u32,
        /// Administratively up.
        up: bool,
        /// Its MTU.
        mtu: u32,
        /// Its MAC address, when the notification carries one (an Ethernet interface's does).
        mac: Option<crate::wire::MacAddr>,
    },
}

/// What applying an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Nothing the workers' tables depend on.
    Unchanged,
    /// The tables must be rebuilt.
    Changed,
    /// The kernel may have changed routes without telling: dump everything again.
    Resync,
}

type Key4 = (u32, Prefix, u8, u32);
type Key6 = (u32, Prefix6, u32, u32);

/// A route's paths as the mirror keeps them: most routes have one, kept inline.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Paths<A> {
    One(KernelPath<A>),
    Many(Box<[KernelPath<A>]>),
}

impl<A: Copy> Paths<A> {
    fn new(mut v: Vec<KernelPath<A>>) -> Paths<A> {
        if v.len() == 1 {
            Paths::One(v.remove(0))
        } else {
            Paths::Many(v.into_boxed_slice())
        }
    }

    fn as_slice(&self) -> &[KernelPath<A>] {
        match self {
            Paths::One(p) => std::slice::from_ref(p),
            Paths::Many(v) => v,
        }
    }
}

/// A route as the mirror keeps it, its table, prefix, TOS and metric in its key: 48 bytes for
/// a route with one path (`size_of`, with or without the display fields, which fill what was
/// padding), against a heap block more for the message's form (a full table is a million of
/// them).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored<A> {
    paths: Paths<A>,
    nh_id: Option<u32>,
    mtu: u32,
    kind: KernelType,
    protocol: u8,
    has_source: bool,
    unsupported: bool,
    /// For display: scope, IPv6 preference (`NO_PREF`: none), preferred source (an index
    /// into [`Mirror::srcs`] plus one; 0: none).
    scope: u8,
    pref: u8,
    src: u16,
}

/// [`Stored::pref`] of a route without one (IPv4).
const NO_PREF: u8 = u8::MAX;
/// Distinct preferred sources kept for display (they are the box's addresses: a handful);
/// past this many, a route's is not shown.
const MAX_SRCS: usize = 4096;

impl<A: Copy> Stored<A> {
    fn of<P>(r: KernelRoute<P, A>, src: u16) -> Stored<A> {
        Stored {
            scope: r.scope,
            pref: r.pref.unwrap_or(NO_PREF),
            src,
            paths: Paths::new(r.paths),
            nh_id: r.nh_id,
            mtu: r.mtu,
            kind: r.kind,
            protocol: r.protocol,
            has_source: r.has_source,
            unsupported: r.unsupported,
        }
    }
}

/// A kernel route as `ip route` lists it, with what xfwd makes of it (kernel mode's `show
/// routes`): every route of the tables mirrored, every metric, whether xfwd uses it or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Routing table.
    pub table: u32,
    /// Destination address and prefix length.
    pub dst: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// IPv4 TOS.
    pub tos: u8,
    /// Metric.
    pub metric: u32,
    /// Type.
    pub kind: KernelType,
    /// Who installed it (`rtm_protocol`).
    pub protocol: u8,
    /// Scope (`rtm_scope`).
    pub scope: u8,
    /// Preferred source.
    pub prefsrc: Option<IpAddr>,
    /// IPv6 router preference (0 medium, 1 high, 3 low).
    pub pref: Option<u8>,
    /// MTU metric (0: none).
    pub mtu: u32,
    /// Nexthop object.
    pub nh_id: Option<u32>,
    /// Whether it is source-specific (IPv6 `from`).
    pub has_source: bool,
    /// An encapsulation or a gateway xfwd cannot forward through.
    pub unsupported: bool,
    /// Its paths, each with whether its interface is a port of xfwd's.
    pub paths: Vec<(KernelPath<IpAddr>, bool)>,
    /// What xfwd makes of it.
    pub used: Use,
}

/// What xfwd makes of a kernel route ([`Listed::used`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The route the workers take for its table and prefix, as the kernel does.
    Taken,
    /// Another usable route of the same table and prefix is taken instead: one of lower
    /// metric (by the kernel too), or, for routes on link of one prefix and metric on several
    /// interfaces (each port's `fe80::/64`, `ff00::/8`), the first (the kernel keeps each).
    Shadowed,
    /// Never taken by xfwd: it has a TOS.
    Tos,
    /// Never taken by xfwd: it is source-specific.
    Source,
    /// Never taken: its nexthop object is unknown, or it has no path.
    NoPath,
}

/// How far a listing built a slice at a time ([`Mirror::list_step`]) has got.
#[derive(Debug, Clone, Default)]
pub struct ListCursor {
    after4: Option<Key4>,
    done4: bool,
    after6: Option<Key6>,
    /// The table and prefix whose route was taken last (the next ones of it are shadowed).
    taken: Option<(u32, IpAddr, u8)>,
}

/// The mirror (see the module documentation).
#[derive(Debug, Clone)]
pub struct Mirror {
    table: u32,
    ports: Vec<(u32, PortSpec)>,
    up: HashMap<u32, bool>,
    routes4: BTreeMap<Key4, Stored<IpAddr>>,
    routes6: BTreeMap<Key6, Stored<Ipv6Addr>>,
    /// IPv4 routes after the first of their key (same table, prefix, TOS and metric), in the
    /// kernel's order: not used while the first is there.
    later4: BTreeMap<Key4, Vec<Stored<IpAddr>>>,
    /// Source-specific IPv6 routes (`from`), never used, apart from the others so that one of
    /// them and a plain route of the same prefix and metric stay two routes, as in the kernel.
    sourced6: BTreeMap<Key6, Stored<Ipv6Addr>>,
    nexthops: HashMap<u32, Nexthop>,
    /// The preferred source addresses routes name, for display ([`Stored::src`]).
    srcs: Vec<IpAddr>,
    /// Routes seen but not used (TOS, source-specific, unknown types or nexthop objects), by
    /// the last walk of each family.
    ignored4: std::cell::Cell<usize>,
    ignored6: std::cell::Cell<usize>,
    dirty: Dirty,
}

/// What changed since [`Mirror::take_dirty`] last said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirty {
    /// IPv4 prefixes whose routes changed (in either table).
    pub v4: BTreeSet<Prefix>,
    /// Some IPv6 route changed.
    pub v6: bool,
    /// A port's addresses or MTU changed, or everything was dumped again: rebuild all.
    pub all: bool,
    /// A route of the local table changed (the box's addresses and broadcasts).
    pub local: bool,
}

impl Mirror {
    /// A mirror of `table` (and the local table) for the ports `(ifindex, spec)`, in port
    /// order; their addresses come from the kernel.
    pub fn new(table: u32, ports: Vec<(u32, PortSpec)>) -> Mirror {
        let ports = ports
            .into_iter()
            .map(|(i, mut s)| {
                s.addrs.clear();
                s.addrs6.clear();
                s.link_local = None;
                (i, s)
            })
            .collect();
        Mirror {
            table,
            ports,
            up: HashMap::new(),
            routes4: BTreeMap::new(),
            routes6: BTreeMap::new(),
            later4: BTreeMap::new(),
            sourced6: BTreeMap::new(),
            nexthops: HashMap::new(),
            srcs: Vec::new(),
            ignored4: std::cell::Cell::new(0),
            ignored6: std::cell::Cell::new(0),
            dirty: Dirty { all: true, ..Dirty::default() },
        }
    }

    /// An empty mirror of the same table and ports (for a dump that replaces this one only
    /// if it completes).
    pub fn emptied(&self) -> Mirror {
        Mirror::new(self.table, self.ports.clone())
    }

    /// The routing table mirrored besides the local one.
    pub fn table(&self) -> u32 {
        self.table
    }

    /// What changed since the last call (the first: everything).
    pub fn take_dirty(&mut self) -> Dirty {
        std::mem::take(&mut self.dirty)
    }

    /// Marks the routes that use nexthop object `id` (directly or through a group) changed.
    fn touch_users(&mut self, id: u32) {
        let groups: Vec<u32> = self
            .nexthops
            .iter()
            .filter(|(_, nh)| matches!(nh, Nexthop::Group(m) if m.iter().any(|(x, _)| *x == id)))
            .map(|(g, _)| *g)
            .collect();
        let uses = |r: Option<u32>| r.is_some_and(|x| x == id || groups.contains(&x));
        for ((_, p, _, _), r) in &self.routes4 {
            if uses(r.nh_id) {
                self.dirty.v4.insert(*p);
            }
        }
        if self.routes6.values().any(|r| uses(r.nh_id)) {
            self.dirty.v6 = true;
        }
    }

    /// The IPv4 route the workers use for `p`, if any: the local table's, else the mirrored
    /// table's lowest metric (as [`Mirror::routes4`] gives it).
    pub fn effective4(&self, p: Prefix) -> Option<Mirrored4> {
        for table in [TABLE_LOCAL, self.table] {
            let found = self.routes4.range((table, p, 0, 0)..=(table, p, 0, u32::MAX)).map(|(_, r)| r).find_map(|r| {
                if r.has_source {
                    return None;
                }
                let (kind, paths) = self.resolve(r, Some)?;
                Some(MirroredRoute {
                    prefix: p,
                    kind,
                    paths,
                    mtu: r.mtu,
                    protocol: r.protocol,
                    local_table: table == TABLE_LOCAL,
                })
            });
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// Forgets every route, object and address (before a full dump).
    pub fn clear(&mut self) {
        self.dirty = Dirty { all: true, ..Dirty::default() };
        self.routes4.clear();
        self.routes6.clear();
        self.later4.clear();
        self.sourced6.clear();
        self.nexthops.clear();
        self.up.clear();
        for (_, s) in &mut self.ports {
            s.addrs.clear();
            s.addrs6.clear();
            s.link_local = None;
        }
    }

    /// The port of interface `ifindex`, if xfwd owns it.
    pub fn port_of(&self, ifindex: u32) -> Option<PortId> {
        self.ports.iter().position(|(i, _)| *i == ifindex).map(|p| PortId(p as u8))
    }

    fn wanted(&self, table: u32) -> bool {
        table == self.table || table == TABLE_LOCAL
    }

    /// Applies one event.
    pub fn apply(&mut self, e: Event) -> Applied {
        match e {
            Event::Route4 { add, place, route } => {
                if !self.wanted(route.table) {
                    return Applied::Unchanged;
                }
                let key = (route.table, route.prefix, route.tos, route.metric);
                let (prefix, table) = (route.prefix, route.table);
                let src = self.intern_src(route.prefsrc);
                let new = Stored::of(route, src);
                let changed = if add { self.add4(key, new, place) } else { self.remove4(key, &new) };
                if changed {
                    self.dirty.v4.insert(prefix);
                    self.dirty.local |= table == TABLE_LOCAL;
                    Applied::Changed
                } else {
                    Applied::Unchanged
                }
            }
            Event::Route6 { add, replace, route } => {
                if !self.wanted(route.table) {
                    return Applied::Unchanged;
                }
                let table = route.table;
                let a = self.apply6(add, replace, route);
                if a == Applied::Changed {
                    self.dirty.v6 = true;
                    self.dirty.local |= table == TABLE_LOCAL;
                }
                a
            }
            Event::Nexthop { id, nh: Some(nh) } => {
                if self.nexthops.insert(id, nh.clone()).as_ref() == Some(&nh) {
                    Applied::Unchanged
                } else {
                    self.touch_users(id);
                    Applied::Changed
                }
            }
            Event::Nexthop { id, nh: None } => {
                if !self.nexthops.contains_key(&id) {
                    return Applied::Unchanged;
                }
                self.touch_users(id);
                self.nexthops.remove(&id);
                // The kernel deletes the routes that used it, silently.
                let gone: Vec<Key4> =
                    self.routes4.iter().filter(|(_, r)| r.nh_id == Some(id)).map(|(k, _)| *k).collect();
                for list in self.later4.values_mut() {
                    list.retain(|r| r.nh_id != Some(id));
                }
                self.later4.retain(|_, l| !l.is_empty());
                for k in gone {
                    self.routes4.remove(&k);
                    self.promote4(k);
                }
                self.routes6.retain(|_, r| r.nh_id != Some(id));
                self.sourced6.retain(|_, r| r.nh_id != Some(id));
                for nh in self.nexthops.values_mut() {
                    if let Nexthop::Group(m) = nh {
                        m.retain(|(member, _)| *member != id);
                    }
                }
                Applied::Changed
            }
            Event::Address { add, ifindex, addr, len } => self.address(add, ifindex, addr, len),
            Event::Link { ifindex, up, mtu, mac } => self.link(ifindex, up, mtu, mac),
        }
    }

    /// An address added to or removed from interface `ifindex`.
    fn address(&mut self, add: bool, ifindex: u32, addr: IpAddr, len: u8) -> Applied {
        let Some(p) = self.port_of(ifindex) else {
            // Not a port's: its routes arrive by themselves. An IPv4 removal may take routes
            // with it silently: those through the interface (its subnet's) and those whose
            // preferred source it was, wherever they lead; only when the mirror holds such a
            // route is a resynchronisation worth its dump (containers' veths come and go).
            let silent = !add && addr.is_ipv4() && (self.uses_interface(ifindex) || self.uses_source(addr));
            return if silent { Applied::Resync } else { Applied::Unchanged };
        };
        let spec = &mut self.ports[p.index()].1;
        // A notification that changes nothing here (a flag, such as the end of
        // duplicate address detection) leaves the tables alone.
        let before = (spec.addrs.clone(), spec.addrs6.clone(), spec.link_local);
        match addr {
            IpAddr::V4(a) => {
                spec.addrs.retain(|x| x.0 != a);
                if add {
                    spec.addrs.push((a, len));
                } else {
                    return Applied::Resync;
                }
            }
            IpAddr::V6(a) if crate::l3::tables::is_link_local6(&a) => {
                spec.link_local = if add { Some(a) } else { None };
            }
            IpAddr::V6(a) => {
                spec.addrs6.retain(|x| x.0 != a);
                if add {
                    spec.addrs6.push((a, len));
                }
            }
        }
        let mut after = (spec.addrs.clone(), spec.addrs6.clone(), spec.link_local);
        let mut was = before;
        for v in [&mut was, &mut after] {
            v.0.sort();
            v.1.sort();
        }
        if was == after {
            return Applied::Unchanged;
        }
        self.dirty.all = true;
        Applied::Changed
    }

    /// Interface `ifindex`'s state: up or down, its MTU and its MAC.
    fn link(&mut self, ifindex: u32, up: bool, mtu: u32, mac: Option<crate::wire::MacAddr>) -> Applied {
        let was = self.up.insert(ifindex, up);
        let mut changed = Applied::Unchanged;
        if let Some(p) = self.port_of(ifindex) {
            // A port's MTU or MAC changed at run time: the tables take it (the source
            // MAC of what leaves, the destination MAC that arrives for the box).
            let spec = &mut self.ports[p.index()].1;
            let mac = mac.unwrap_or(spec.mac);
            if (spec.mtu, spec.mac) != (mtu, mac) {
                (spec.mtu, spec.mac) = (mtu, mac);
                self.dirty.all = true;
                changed = Applied::Changed;
            }
        }
        match was {
            // Going down flushes its routes; coming up restores some: silently. An interface
            // that is not a port and that no mirrored route or object leaves by changes
            // nothing here (a container's veth going up or down).
            Some(w) if w != up && (self.port_of(ifindex).is_some() || self.uses_interface(ifindex)) => Applied::Resync,
            _ => changed,
        }
    }

    /// Whether a mirrored route or nexthop object leaves by interface `ifindex`.
    fn uses_interface(&self, ifindex: u32) -> bool {
        fn by<A: Copy>(r: &Stored<A>, ifindex: u32) -> bool {
            r.paths.as_slice().iter().any(|p| p.ifindex == ifindex)
        }
        self.routes4.values().chain(self.later4.values().flatten()).any(|r| by(r, ifindex))
            || self.routes6.values().chain(self.sourced6.values()).any(|r| by(r, ifindex))
            || self.nexthops.values().any(|n| matches!(n, Nexthop::Single { ifindex: i, .. } if *i == ifindex))
    }

    /// Whether a mirrored route has `addr` as its preferred source (or may have: past
    /// [`MAX_SRCS`] distinct sources, a route's is not kept).
    fn uses_source(&self, addr: IpAddr) -> bool {
        match self.srcs.iter().position(|s| *s == addr) {
            Some(i) => {
                let src = i as u16 + 1;
                self.routes4.values().chain(self.later4.values().flatten()).any(|r| r.src == src)
                    || self.routes6.values().chain(self.sourced6.values()).any(|r| r.src == src)
            }
            None => self.srcs.len() >= MAX_SRCS,
        }
    }

    /// Adds `new` to the routes of `key` at `place`; whether anything changed.
    fn add4(&mut self, key: Key4, new: Stored<IpAddr>, place: Place) -> bool {
        let Some(first) = self.routes4.get_mut(&key) else {
            self.routes4.insert(key, new);
            return true;
        };
        match place {
            Place::Replace => std::mem::replace(first, new.clone()) != new,
            // The same route told again (a notification, then a dump that lists it).
            _ if *first == new => false,
            Place::First => {
                let was = std::mem::replace(first, new);
                self.later4.entry(key).or_default().insert(0, was);
                true
            }
            Place::Last => {
                let later = self.later4.entry(key).or_default();
                if later.contains(&new) {
                    return false;
                }
                later.push(new);
                true
            }
        }
    }

    /// Removes the route of `key` that `gone` describes (its paths, type and object), else
    /// the first, as the kernel deletes; the next one, if any, takes its place. Whether
    /// anything changed.
    fn remove4(&mut self, key: Key4, gone: &Stored<IpAddr>) -> bool {
        let same = |r: &Stored<IpAddr>| r.paths == gone.paths && r.kind == gone.kind && r.nh_id == gone.nh_id;
        let Some(first) = self.routes4.get(&key) else {
            return false;
        };
        if !same(first) {
            if let Some(later) = self.later4.get_mut(&key) {
                if let Some(i) = later.iter().position(same) {
                    later.remove(i);
                    if later.is_empty() {
                        self.later4.remove(&key);
                    }
                    return true;
                }
            }
        }
        self.routes4.remove(&key);
        self.promote4(key);
        true
    }

    /// Moves the next route of `key`, if any, into the first's empty place.
    fn promote4(&mut self, key: Key4) {
        if let Some(later) = self.later4.get_mut(&key) {
            let next = later.remove(0);
            if later.is_empty() {
                self.later4.remove(&key);
            }
            self.routes4.insert(key, next);
        }
    }

    /// The index [`Stored::src`] keeps for `a`.
    fn intern_src(&mut self, a: Option<IpAddr>) -> u16 {
        let Some(a) = a else { return 0 };
        if let Some(i) = self.srcs.iter().position(|x| *x == a) {
            return i as u16 + 1;
        }
        if self.srcs.len() >= MAX_SRCS {
            return 0;
        }
        self.srcs.push(a);
        self.srcs.len() as u16
    }

    fn apply6(&mut self, add: bool, replace: bool, route: KernelRoute6) -> Applied {
        let src = self.intern_src(route.prefsrc);
        if route.has_source {
            // Never used: kept for the listing, changing nothing the workers read.
            Self::apply6_in(&mut self.sourced6, add, replace, route, src);
            return Applied::Unchanged;
        }
        Self::apply6_in(&mut self.routes6, add, replace, route, src)
    }

    /// [`Mirror::apply6`] on one of the two maps.
    fn apply6_in(
        routes6: &mut BTreeMap<Key6, Stored<Ipv6Addr>>,
        add: bool,
        replace: bool,
        route: KernelRoute6,
        src: u16,
    ) -> Applied {
        let gateway = route.paths.iter().any(|p| p.gw.is_some());
        // Routes on link are one per interface (fe80::/64 on every port); gateway routes
        // of one prefix and metric are one route, their paths siblings.
        let dev = if gateway || route.nh_id.is_some() { 0 } else { route.paths.first().map_or(0, |p| p.ifindex) };
        let key = (route.table, route.prefix, route.metric, dev);
        if add && replace {
            // A replacement takes the place of whatever the prefix and metric held.
            let all =
                (route.table, route.prefix, route.metric, 0)..=(route.table, route.prefix, route.metric, u32::MAX);
            let old: Vec<Key6> = routes6.range(all).map(|(k, _)| *k).collect();
            for k in old {
                routes6.remove(&k);
            }
            routes6.insert(key, Stored::of(route, src));
            return Applied::Changed;
        }
        if add {
            return match routes6.get_mut(&key) {
                Some(old) if gateway && old.nh_id.is_none() && route.nh_id.is_none() => {
                    let mut paths = old.paths.as_slice().to_vec();
                    let before = paths.len();
                    for p in route.paths {
                        if !paths.contains(&p) {
                            paths.push(p);
                        }
                    }
                    if paths.len() == before {
                        Applied::Unchanged
                    } else {
                        old.paths = Paths::new(paths);
                        Applied::Changed
                    }
                }
                Some(old) if *old == Stored::of(route.clone(), src) => Applied::Unchanged,
                _ => {
                    routes6.insert(key, Stored::of(route, src));
                    Applied::Changed
                }
            };
        }
        let Some(old) = routes6.get_mut(&key) else {
            return Applied::Unchanged;
        };
        if !gateway {
            routes6.remove(&key);
            return Applied::Changed;
        }
        // Only the paths the message names go; none of them held: nothing changes (a
        // notification older than a dump that already left them out).
        let held = old.paths.as_slice();
        let left: Vec<KernelPath<Ipv6Addr>> = held
            .iter()
            .filter(|p| !route.paths.iter().any(|q| q.gw == p.gw && q.ifindex == p.ifindex))
            .copied()
            .collect();
        if left.len() == held.len() {
            return Applied::Unchanged;
        }
        if left.is_empty() {
            routes6.remove(&key);
        } else {
            old.paths = Paths::new(left);
        }
        Applied::Changed
    }

    /// The ports with the kernel's addresses and MTUs, in port order.
    pub fn ports(&self) -> Vec<PortSpec> {
        self.ports.iter().map(|(_, s)| s.clone()).collect()
    }

    /// The paths of a route, resolved to ports, or its type alone; `None`: not used.
    fn resolve<A: Copy>(&self, r: &Stored<A>, from: impl Fn(IpAddr) -> Option<A>) -> Option<(RouteKind, Vec<Path<A>>)> {
        let (kind, paths, nh_id) = (r.kind, r.paths.as_slice(), r.nh_id);
        if r.unsupported {
            return Some((RouteKind::Special(Special::Unsupported), Vec::new()));
        }
        let kind = match kind {
            KernelType::Unicast => RouteKind::Unicast,
            KernelType::Local | KernelType::Anycast => RouteKind::Local,
            KernelType::Broadcast => RouteKind::Broadcast,
            KernelType::Blackhole => return Some((RouteKind::Special(Special::Blackhole), Vec::new())),
            KernelType::Unreachable => return Some((RouteKind::Special(Special::Unreachable), Vec::new())),
            KernelType::Prohibit => return Some((RouteKind::Special(Special::Prohibit), Vec::new())),
            // throw, nat, multicast, ...: the kernel's lookup stops there as well (a throw
            // finds no route); forwarding by a covering route instead would be wrong.
            KernelType::Other(_) => return Some((RouteKind::Special(Special::Unsupported), Vec::new())),
        };
        let path = |gw: Option<A>, ifindex: u32, weight: u16| Path { gw, port: self.port_of(ifindex), weight };
        let Some(id) = nh_id else {
            let out: Vec<Path<A>> = paths.iter().map(|p| path(p.gw, p.ifindex, p.weight)).collect();
            return (!out.is_empty() || kind != RouteKind::Unicast).then_some((kind, out));
        };
        let single = |nh: &Nexthop, weight: u16| -> Option<Option<Path<A>>> {
            match nh {
                Nexthop::Single { gw, ifindex } => {
                    let gw = match gw {
                        Some(g) => Some(from(*g)?),
                        None => None,
                    };
                    Some(Some(path(gw, *ifindex, weight)))
                }
                Nexthop::Blackhole => Some(None),
                Nexthop::Group(_) => None,
            }
        };
        // A gateway the route's family cannot use (an IPv6 route through an IPv4 next hop,
        // which the kernel refuses too) or a group inside a group: not forwarded by xfwd.
        let unsupported = Some((RouteKind::Special(Special::Unsupported), Vec::new()));
        match self.nexthops.get(&id)? {
            Nexthop::Group(members) => {
                let mut out = Vec::with_capacity(members.len());
                for &(m, w) in members {
                    let Some(nh) = self.nexthops.get(&m) else { continue };
                    match single(nh, w) {
                        Some(Some(p)) => out.push(p),
                        Some(None) => {}
                        None => return unsupported,
                    }
                }
                (!out.is_empty()).then_some((kind, out))
            }
            nh => match single(nh, 1) {
                Some(Some(p)) => Some((kind, vec![p])),
                Some(None) => Some((RouteKind::Special(Special::Blackhole), Vec::new())),
                None => unsupported,
            },
        }
    }

    /// Of `entries` — routes by (table, prefix) in key order, lowest metric first, each with
    /// whether it is never used (a TOS, a source prefix) — the usable route of lowest metric
    /// per (table, prefix), with gateways of the family `pick` takes; counts what it leaves
    /// out in `ignored`.
    fn usable<'a, P: Copy + PartialEq + 'a, A: Copy + 'a>(
        &'a self,
        entries: impl Iterator<Item = ((u32, P), bool, &'a Stored<A>)> + 'a,
        pick: fn(IpAddr) -> Option<A>,
        ignored: &'a std::cell::Cell<usize>,
    ) -> impl Iterator<Item = MirroredRoute<P, A>> + 'a {
        ignored.set(0);
        let mut last: Option<(u32, P)> = None;
        entries.filter_map(move |((table, prefix), never, r)| {
            if last == Some((table, prefix)) {
                return None;
            }
            let Some((kind, paths)) = (!never).then(|| self.resolve(r, pick)).flatten() else {
                ignored.set(ignored.get() + 1);
                return None;
            };
            last = Some((table, prefix));
            Some(MirroredRoute {
                prefix,
                kind,
                paths,
                mtu: r.mtu,
                protocol: r.protocol,
                local_table: table == TABLE_LOCAL,
            })
        })
    }

    /// The IPv4 routes the workers use: per prefix and table, the usable route of lowest
    /// metric; in key order (by table, then prefix). Counts what it leaves out in
    /// [`Mirror::ignored`] once walked to the end.
    pub fn routes4_iter(&self) -> impl Iterator<Item = Mirrored4> + '_ {
        let entries = self.routes4.iter().map(|((t, p, tos, _), r)| ((*t, *p), *tos != 0 || r.has_source, r));
        // IPv4 routes take gateways of both families (RFC 5549).
        self.usable(entries, Some, &self.ignored4)
    }

    /// [`Mirror::routes4_iter`], collected.
    pub fn routes4(&self) -> Vec<Mirrored4> {
        self.routes4_iter().collect()
    }

    /// Routes seen but not used (TOS, source-specific, unknown types or nexthop objects), as
    /// the last walks of [`Mirror::routes4_iter`] and [`Mirror::routes6`] found them.
    pub fn ignored(&self) -> usize {
        self.ignored4.get() + self.ignored6.get() + self.sourced6.len()
    }

    /// The IPv6 routes the workers use: per prefix and table, the usable route of lowest
    /// metric (as [`Mirror::routes4_iter`] for IPv4).
    pub fn routes6(&self) -> Vec<Mirrored6> {
        let entries = self.routes6.iter().map(|((t, p, _, _), r)| ((*t, *p), r.has_source, r));
        self.usable(
            entries,
            |a| match a {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            },
            &self.ignored6,
        )
        .collect()
    }

    /// The box's addresses and subnet broadcasts from the local table (for the XDP program,
    /// which hands traffic to them to the kernel): single addresses only.
    pub fn local_addresses(&self) -> Vec<(IpAddr, bool)> {
        let mut out = Vec::new();
        let all4 = Prefix::truncate(Ipv4Addr::UNSPECIFIED, 0);
        let all6 = Prefix6::truncate(Ipv6Addr::UNSPECIFIED, 0);
        for ((t, p, _, _), r) in self.routes4.range((TABLE_LOCAL, all4, 0, 0)..) {
            if *t == TABLE_LOCAL && p.prefix_len() == 32 {
                match r.kind {
                    KernelType::Local => out.push((IpAddr::V4(p.addr()), true)),
                    KernelType::Broadcast => out.push((IpAddr::V4(p.addr()), false)),
                    _ => {}
                }
            }
        }
        for ((t, p, _, _), r) in self.routes6.range((TABLE_LOCAL, all6, 0, 0)..) {
            if *t == TABLE_LOCAL && p.prefix_len() == 128 && matches!(r.kind, KernelType::Local | KernelType::Anycast) {
                out.push((IpAddr::V6(p.addr()), true));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Appends to `out` at most `budget` routes of the listing `cursor` has got to (IPv4, then
    /// IPv6, each by table, prefix and metric); true once it holds them all. A listing built
    /// over several calls sees each route as it was when its slice was taken.
    pub fn list_step(&self, cursor: &mut ListCursor, budget: usize, out: &mut Vec<Listed>) -> bool {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut n = 0;
        if !cursor.done4 {
            let range = match cursor.after4 {
                Some(k) => self.routes4.range((Excluded(k), Unbounded)),
                None => self.routes4.range(..),
            };
            for (k, r) in range {
                if n == budget {
                    return false;
                }
                let (table, p, tos, metric) = *k;
                let never = if tos != 0 { Some(Use::Tos) } else { r.has_source.then_some(Use::Source) };
                let used = self.use_of(cursor, (table, p.addr().into(), p.prefix_len()), never, || {
                    self.resolve(r, Some).is_some()
                });
                out.push(self.listed(table, p.addr().into(), p.prefix_len(), tos, metric, r, used));
                // The routes after the first of the key, in the kernel's order: never used.
                for r in self.later4.get(k).into_iter().flatten() {
                    let used = match never {
                        Some(u) => u,
                        None if self.resolve(r, Some).is_none() => Use::NoPath,
                        None => Use::Shadowed,
                    };
                    out.push(self.listed(table, p.addr().into(), p.prefix_len(), tos, metric, r, used));
                }
                cursor.after4 = Some(*k);
                n += 1;
            }
            cursor.done4 = true;
            cursor.taken = None;
        }
        let range = match cursor.after6 {
            Some(k) => self.routes6.range((Excluded(k), Unbounded)),
            None => self.routes6.range(..),
        };
        for (k, r) in range {
            if n == budget {
                return false;
            }
            let (table, p, metric, _) = *k;
            let never = r.has_source.then_some(Use::Source);
            let pick = |a: IpAddr| match a {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            };
            let used = self
                .use_of(cursor, (table, p.addr().into(), p.prefix_len()), never, || self.resolve(r, pick).is_some());
            out.push(self.listed(table, p.addr().into(), p.prefix_len(), 0, metric, r, used));
            cursor.after6 = Some(*k);
            n += 1;
        }
        // The source-specific ones last, all at once (a handful where there are any).
        for ((table, p, metric, _), r) in &self.sourced6 {
            out.push(self.listed(*table, p.addr().into(), p.prefix_len(), 0, *metric, r, Use::Source));
        }
        true
    }

    /// Whether the next route of `group` (table, prefix) is taken, as [`Mirror::usable`]
    /// decides: the first usable one of each group.
    fn use_of(
        &self,
        cursor: &mut ListCursor,
        group: (u32, IpAddr, u8),
        never: Option<Use>,
        resolves: impl FnOnce() -> bool,
    ) -> Use {
        if let Some(u) = never {
            return u;
        }
        if !resolves() {
            return Use::NoPath;
        }
        if cursor.taken == Some(group) {
            return Use::Shadowed;
        }
        cursor.taken = Some(group);
        Use::Taken
    }

    #[allow(clippy::too_many_arguments)]
    fn listed<A: Copy + Into<IpAddr>>(
        &self,
        table: u32,
        dst: IpAddr,
        len: u8,
        tos: u8,
        metric: u32,
        r: &Stored<A>,
        used: Use,
    ) -> Listed {
        Listed {
            table,
            dst,
            len,
            tos,
            metric,
            kind: r.kind,
            protocol: r.protocol,
            scope: r.scope,
            prefsrc: r.src.checked_sub(1).and_then(|i| self.srcs.get(usize::from(i))).copied(),
            pref: (r.pref != NO_PREF).then_some(r.pref),
            mtu: r.mtu,
            nh_id: r.nh_id,
            has_source: r.has_source,
            unsupported: r.unsupported,
            paths: r
                .paths
                .as_slice()
                .iter()
                .map(|p| {
                    let path = KernelPath { gw: p.gw.map(Into::into), ifindex: p.ifindex, weight: p.weight };
                    (path, self.port_of(p.ifindex).is_some())
                })
                .collect(),
            used,
        }
    }

    /// Routes held (all tables mirrored, all metrics).
    pub fn len(&self) -> usize {
        self.routes4.len()
            + self.routes6.len()
            + self.later4.values().map(Vec::len).sum::<usize>()
            + self.sourced6.len()
    }

    /// Whether no route is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;

    #[test]
    fn a_stored_route_stays_48_bytes() {
        assert_eq!(std::mem::size_of::<Stored<IpAddr>>(), 48);
        assert_eq!(std::mem::size_of::<Stored<Ipv6Addr>>(), 48);
    }

    #[test]
    fn an_equal_cost_ipv6_route_splits_many_flows_evenly_however_the_kernel_tells_it() {
        // Item 5 of the spoofing/stale-state review: the kernel mirror's equal-cost IPv6
        // routes, told in one message, path by path then dumped, or as a nexthop-object group,
        // each give one slot per gateway, and the decision splits 32,768 flows (one source
        // port, destination ports 0-32767) within two points of half.
        use crate::action::{Action, SCRATCH_LEN};
        use crate::l3::fib::no_advice;
        use crate::l3::tables::RouterTables;
        use crate::l3::{decide, Key6, NeighborTable, NeighborTable6, RouterState, V6};
        let ports = vec![
            crate::l3::testing::port("eth4", MacAddr([2, 0, 0, 0, 4, 4]), &["2001:2:0:30::1/64"]),
            crate::l3::testing::port("eth5", MacAddr([2, 0, 0, 0, 5, 5]), &["2001:2:0:10::2/64"]),
        ];
        let (a, b) = ("2001:2:0:30::2", "2001:2:0:10::1");
        let gw = |s: &str| -> Ipv6Addr { s.parse().unwrap() };
        let prefix = "2001:2:100::/48";
        let route =
            |paths: &[(Option<&str>, u32)]| Event::Route6 { add: true, replace: false, route: r6(prefix, 1024, paths) };
        let mut ways: Vec<(&str, Mirror)> = Vec::new();
        let mut m = mirror();
        m.apply(route(&[(Some(a), 4), (Some(b), 5)]));
        ways.push(("one RTA_MULTIPATH message", m));
        let mut m = mirror();
        m.apply(route(&[(Some(a), 4)]));
        m.apply(route(&[(Some(b), 5)]));
        m.apply(route(&[(Some(a), 4), (Some(b), 5)]));
        ways.push(("path by path, then the dump", m));
        let mut m = mirror();
        let nh = |g: &str, ifindex| Nexthop::Single { gw: Some(g.parse().unwrap()), ifindex };
        m.apply(Event::Nexthop { id: 1, nh: Some(nh(a, 4)) });
        m.apply(Event::Nexthop { id: 2, nh: Some(nh(b, 5)) });
        m.apply(Event::Nexthop { id: 10, nh: Some(Nexthop::Group(vec![(1, 1), (2, 1)])) });
        let mut r = r6(prefix, 1024, &[]);
        r.nh_id = Some(10);
        m.apply(Event::Route6 { add: true, replace: false, route: r });
        ways.push(("a nexthop-object group", m));
        for (how, m) in ways {
            let t = RouterTables::build_mirrored(ports.clone(), &[], &m.routes6(), no_advice).unwrap();
            assert_eq!(t.v6.groups.len(), 2, "{how}: one slot per gateway: {:?}", t.v6.groups);
            let n6 = NeighborTable6::new6(16);
            n6.insert(Key6::global(gw(a)), MacAddr([2, 0, 0, 0, 0x30, 2]), PortId(0), false).unwrap();
            n6.insert(Key6::global(gw(b)), MacAddr([2, 0, 0, 0, 0x10, 1]), PortId(1), false).unwrap();
            let mut st = RouterState::new(0, 10);
            st.fit(&t);
            let (n4, mut scratch) = (NeighborTable::new(8), [0u8; SCRATCH_LEN]);
            let mut count = [0u32; 2];
            for dp in 0..32_768u16 {
                let mut f = Vec::new();
                etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x11], [2, 0, 0, 0, 5, 5])
                    .ipv6(gw("2001:2:0:10::7").octets(), gw("2001:2:100::1").octets(), 64)
                    .udp(1024, dp)
                    .write(&mut f, &[0; 18])
                    .unwrap();
                match decide::<V6>(&mut f, PortId(1), &t, &n4, &n6, &mut st, 1_000, &mut scratch) {
                    Action::Forward(p) => count[p.index()] += 1,
                    other => panic!("{how}: flow {dp}: {other:?}"),
                }
            }
            let share = f64::from(count[0]) / 32_768.0;
            assert!((share - 0.5).abs() < 0.02, "{how}: {count:?}");
        }
    }

    fn spec(name: &str) -> PortSpec {
        crate::l3::testing::port(name, MacAddr([2, 0, 0, 0, 0, 1]), &[])
    }

    fn mirror() -> Mirror {
        Mirror::new(TABLE_MAIN, vec![(4, spec("eth4")), (5, spec("eth5"))])
    }

    fn r4(table: u32, p: &str, metric: u32, kind: KernelType, paths: &[(Option<&str>, u32)]) -> KernelRoute4 {
        KernelRoute {
            table,
            prefix: p.parse().unwrap(),
            metric,
            tos: 0,
            has_source: false,
            kind,
            protocol: 4,
            paths: paths
                .iter()
                .map(|&(gw, ifindex)| KernelPath { gw: gw.map(|g| g.parse().unwrap()), ifindex, weight: 1 })
                .collect(),
            nh_id: None,
            mtu: 0,
            unsupported: false,
            scope: 0,
            prefsrc: None,
            pref: None,
        }
    }

    fn r6(p: &str, metric: u32, paths: &[(Option<&str>, u32)]) -> KernelRoute6 {
        KernelRoute {
            table: TABLE_MAIN,
            prefix: p.parse().unwrap(),
            metric,
            tos: 0,
            has_source: false,
            kind: KernelType::Unicast,
            protocol: 4,
            paths: paths
                .iter()
                .map(|&(gw, ifindex)| KernelPath { gw: gw.map(|g| g.parse().unwrap()), ifindex, weight: 1 })
                .collect(),
            nh_id: None,
            mtu: 0,
            unsupported: false,
            scope: 0,
            prefsrc: None,
            pref: None,
        }
    }

    fn add4(m: &mut Mirror, r: KernelRoute4) -> Applied {
        m.apply(Event::Route4 { add: true, place: Place::Last, route: r })
    }

    #[test]
    fn the_listing_holds_every_route_says_which_is_taken_and_is_the_same_in_slices() {
        let mut m = mirror();
        let gw = |g| [(Some(g), 4)];
        let mut a = r4(TABLE_MAIN, "198.19.6.0/24", 0, KernelType::Unicast, &gw("198.18.30.2"));
        (a.mtu, a.prefsrc, a.scope) = (1300, Some("198.18.30.1".parse().unwrap()), 0);
        add4(&mut m, a);
        add4(&mut m, r4(TABLE_MAIN, "198.19.6.0/24", 5, KernelType::Unicast, &gw("198.18.30.3")));
        let mut t = r4(TABLE_MAIN, "198.19.7.0/24", 0, KernelType::Unicast, &gw("198.18.30.2"));
        t.tos = 0x10;
        add4(&mut m, t);
        let mut o = r4(TABLE_MAIN, "198.19.8.0/24", 0, KernelType::Unicast, &[]);
        o.nh_id = Some(99);
        add4(&mut m, o);
        let mut l = r4(TABLE_LOCAL, "127.0.0.1/32", 0, KernelType::Local, &[(None, 1)]);
        (l.scope, l.prefsrc) = (254, Some("127.0.0.1".parse().unwrap()));
        add4(&mut m, l);
        add4(&mut m, r4(TABLE_MAIN, "198.19.9.0/24", 0, KernelType::Unicast, &[(None, 1)]));
        let mut v6 = r6("2001:2:1::/48", 1024, &[(Some("2001:2::2"), 4)]);
        v6.pref = Some(1);
        m.apply(Event::Route6 { add: true, replace: false, route: v6 });
        let mut mc = r6("ff00::/8", 256, &[(None, 5)]);
        (mc.table, mc.kind) = (TABLE_LOCAL, KernelType::Other(5));
        m.apply(Event::Route6 { add: true, replace: false, route: mc });

        let mut whole = Vec::new();
        assert!(m.list_step(&mut ListCursor::default(), usize::MAX, &mut whole));
        assert_eq!(whole.len(), m.len(), "every route, every metric, both tables and families");
        let find =
            |dst: &str, metric: u32| whole.iter().find(|r| r.dst.to_string() == dst && r.metric == metric).unwrap();
        let a = find("198.19.6.0", 0);
        assert_eq!((a.used, a.mtu, a.prefsrc), (Use::Taken, 1300, Some("198.18.30.1".parse().unwrap())));
        assert_eq!(a.paths, [(KernelPath { gw: Some("198.18.30.2".parse().unwrap()), ifindex: 4, weight: 1 }, true)]);
        assert_eq!(find("198.19.6.0", 5).used, Use::Shadowed);
        assert_eq!((find("198.19.7.0", 0).used, find("198.19.7.0", 0).tos), (Use::Tos, 0x10));
        assert_eq!(find("198.19.8.0", 0).used, Use::NoPath, "an unknown nexthop object");
        let lo = find("127.0.0.1", 0);
        assert_eq!((lo.table, lo.scope, lo.paths[0].1), (TABLE_LOCAL, 254, false), "on an interface not a port");
        assert_eq!(find("198.19.9.0", 0).used, Use::Taken, "taken, its path not a port's: the display says so");
        let v6 = find("2001:2:1::", 1024);
        assert_eq!((v6.pref, v6.len, v6.used), (Some(1), 48, Use::Taken));
        assert_eq!(find("ff00::", 256).kind, KernelType::Other(5));

        for budget in [1, 2, 3] {
            let (mut cursor, mut sliced, mut steps) = (ListCursor::default(), Vec::new(), 0);
            while !m.list_step(&mut cursor, budget, &mut sliced) {
                steps += 1;
            }
            assert_eq!(sliced, whole, "slices of {budget}");
            assert!(steps >= whole.len() / budget - 1, "{steps} steps of {budget}");
        }
    }

    #[test]
    fn routes_of_one_key_keep_the_kernels_order_and_the_first_is_used() {
        let mut m = mirror();
        let r = |g: &str| r4(TABLE_MAIN, "198.19.0.0/16", 0, KernelType::Unicast, &[(Some(g), 4)]);
        let gw = |m: &Mirror| m.effective4("198.19.0.0/16".parse().unwrap()).unwrap().paths[0].gw.unwrap();
        let at = |g: &str| -> IpAddr { g.parse().unwrap() };
        let put = |m: &mut Mirror, place, g: &str| m.apply(Event::Route4 { add: true, place, route: r(g) });
        let del = |m: &mut Mirror, g: &str| m.apply(Event::Route4 { add: false, place: Place::Last, route: r(g) });
        put(&mut m, Place::Last, "198.18.30.2");
        // `ip route append`: a second route of the key, after the first, which stays used.
        assert_eq!(put(&mut m, Place::Last, "198.18.30.3"), Applied::Changed);
        assert_eq!((gw(&m), m.len()), (at("198.18.30.2"), 2));
        assert_eq!(put(&mut m, Place::Last, "198.18.30.3"), Applied::Unchanged, "told again by a dump");
        let mut listed = Vec::new();
        m.list_step(&mut ListCursor::default(), usize::MAX, &mut listed);
        assert_eq!(listed.iter().map(|l| l.used).collect::<Vec<_>>(), [Use::Taken, Use::Shadowed]);
        // Deleting the first: the next takes its place.
        del(&mut m, "198.18.30.2");
        assert_eq!((gw(&m), m.len()), (at("198.18.30.3"), 1));
        // `ip route prepend`: before the others, used.
        put(&mut m, Place::First, "198.18.30.4");
        assert_eq!((gw(&m), m.len()), (at("198.18.30.4"), 2));
        // Deleting a later one leaves the first.
        del(&mut m, "198.18.30.3");
        assert_eq!((gw(&m), m.len()), (at("198.18.30.4"), 1));
        // `ip route replace`: in the first one's place.
        put(&mut m, Place::Last, "198.18.30.3");
        put(&mut m, Place::Replace, "198.18.30.5");
        assert_eq!((gw(&m), m.len()), (at("198.18.30.5"), 2));
        // A deletion that names none of them takes the first, as the kernel's does.
        del(&mut m, "198.18.30.9");
        assert_eq!((gw(&m), m.len()), (at("198.18.30.3"), 1));
        del(&mut m, "198.18.30.3");
        assert!(m.effective4("198.19.0.0/16".parse().unwrap()).is_none() && m.is_empty());
    }

    #[test]
    fn a_source_specific_ipv6_route_and_a_plain_one_of_the_same_prefix_stay_two() {
        for source_first in [true, false] {
            let mut m = mirror();
            let mut sourced = r6("2001:2:5::/64", 1024, &[(Some("2001:2::2"), 4)]);
            sourced.has_source = true;
            let plain = r6("2001:2:5::/64", 1024, &[(Some("2001:2::3"), 4)]);
            let add = |m: &mut Mirror, r| m.apply(Event::Route6 { add: true, replace: false, route: r });
            if source_first {
                assert_eq!(add(&mut m, sourced.clone()), Applied::Unchanged, "never used: nothing to rebuild");
                add(&mut m, plain.clone());
            } else {
                add(&mut m, plain.clone());
                add(&mut m, sourced.clone());
            }
            let used = m.routes6();
            assert_eq!(used.len(), 1, "{used:?}");
            assert_eq!(used[0].paths.iter().map(|p| p.gw).collect::<Vec<_>>(), [Some("2001:2::3".parse().unwrap())]);
            assert_eq!((m.len(), m.ignored()), (2, 1));
            let mut listed = Vec::new();
            m.list_step(&mut ListCursor::default(), usize::MAX, &mut listed);
            assert_eq!(listed.iter().map(|l| l.used).collect::<Vec<_>>(), [Use::Taken, Use::Source]);
            m.apply(Event::Route6 { add: false, replace: false, route: sourced });
            assert_eq!((m.len(), m.routes6().len()), (1, 1));
        }
    }

    #[test]
    fn the_lowest_metric_wins_and_deleting_it_uncovers_the_next() {
        let mut m = mirror();
        assert_eq!(
            add4(&mut m, r4(TABLE_MAIN, "198.19.0.0/16", 20, KernelType::Unicast, &[(Some("198.18.30.2"), 4)])),
            Applied::Changed
        );
        add4(&mut m, r4(TABLE_MAIN, "198.19.0.0/16", 10, KernelType::Unicast, &[(Some("198.18.30.3"), 4)]));
        let got = m.routes4();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].paths[0].gw, Some("198.18.30.3".parse().unwrap()));
        assert_eq!(got[0].paths[0].port, Some(PortId(0)));
        let del = r4(TABLE_MAIN, "198.19.0.0/16", 10, KernelType::Unicast, &[]);
        assert_eq!(m.apply(Event::Route4 { add: false, place: Place::Last, route: del.clone() }), Applied::Changed);
        assert_eq!(m.routes4()[0].paths[0].gw, Some("198.18.30.2".parse().unwrap()));
        assert_eq!(
            m.apply(Event::Route4 { add: false, place: Place::Last, route: del }),
            Applied::Unchanged,
            "already gone"
        );
        // The same route again changes nothing.
        assert_eq!(
            add4(&mut m, r4(TABLE_MAIN, "198.19.0.0/16", 20, KernelType::Unicast, &[(Some("198.18.30.2"), 4)])),
            Applied::Unchanged
        );
    }

    #[test]
    fn other_tables_tos_and_unknown_types_are_not_used() {
        let mut m = mirror();
        assert_eq!(add4(&mut m, r4(100, "198.19.0.0/16", 0, KernelType::Unicast, &[(None, 4)])), Applied::Unchanged);
        let mut tos = r4(TABLE_MAIN, "198.19.1.0/24", 0, KernelType::Unicast, &[(None, 4)]);
        tos.tos = 0x10;
        add4(&mut m, tos);
        add4(&mut m, r4(TABLE_MAIN, "198.19.2.0/24", 0, KernelType::Other(9), &[]));
        add4(&mut m, r4(TABLE_LOCAL, "198.18.30.1/32", 0, KernelType::Local, &[(None, 4)]));
        add4(&mut m, r4(TABLE_MAIN, "198.19.3.0/24", 0, KernelType::Prohibit, &[]));
        add4(&mut m, r4(TABLE_MAIN, "198.19.4.0/24", 0, KernelType::Unicast, &[(Some("10.9.9.9"), 77)]));
        let got = m.routes4();
        assert_eq!(m.ignored(), 1, "the TOS route");
        let other = got.iter().find(|r| r.prefix.to_string() == "198.19.2.0/24").unwrap();
        assert_eq!(other.kind, RouteKind::Special(Special::Unsupported), "a throw or nat route is not fallen through");
        let kinds: Vec<_> = got.iter().map(|r| (r.prefix.to_string(), r.kind, r.local_table)).collect();
        assert!(kinds.contains(&("198.18.30.1/32".into(), RouteKind::Local, true)));
        assert!(kinds.contains(&("198.19.3.0/24".into(), RouteKind::Special(Special::Prohibit), false)));
        let foreign = got.iter().find(|r| r.prefix.to_string() == "198.19.4.0/24").unwrap();
        assert_eq!(foreign.paths[0].port, None, "interface 77 is not a port");
        assert_eq!(m.local_addresses(), vec![("198.18.30.1".parse().unwrap(), true)]);
    }

    #[test]
    fn nexthop_objects_and_groups_give_their_paths_and_take_their_routes_with_them() {
        let mut m = mirror();
        let nh = |gw: &str, ifindex| Nexthop::Single { gw: Some(gw.parse().unwrap()), ifindex };
        m.apply(Event::Nexthop { id: 1, nh: Some(nh("198.18.30.2", 4)) });
        m.apply(Event::Nexthop { id: 2, nh: Some(nh("198.18.10.1", 5)) });
        m.apply(Event::Nexthop { id: 10, nh: Some(Nexthop::Group(vec![(1, 1), (2, 3)])) });
        m.apply(Event::Nexthop { id: 11, nh: Some(Nexthop::Blackhole) });
        let mut a = r4(TABLE_MAIN, "198.19.0.0/16", 20, KernelType::Unicast, &[]);
        a.nh_id = Some(10);
        add4(&mut m, a);
        let mut b = r4(TABLE_MAIN, "198.19.1.0/24", 20, KernelType::Unicast, &[]);
        b.nh_id = Some(11);
        add4(&mut m, b);
        let mut c = r4(TABLE_MAIN, "198.19.2.0/24", 20, KernelType::Unicast, &[]);
        c.nh_id = Some(99);
        add4(&mut m, c);
        let got = m.routes4();
        assert_eq!(m.ignored(), 1, "object 99 is unknown");
        let g = got.iter().find(|r| r.prefix.to_string() == "198.19.0.0/16").unwrap();
        assert_eq!(
            g.paths,
            vec![
                Path { gw: Some("198.18.30.2".parse().unwrap()), port: Some(PortId(0)), weight: 1 },
                Path { gw: Some("198.18.10.1".parse().unwrap()), port: Some(PortId(1)), weight: 3 },
            ]
        );
        assert_eq!(
            got.iter().find(|r| r.prefix.to_string() == "198.19.1.0/24").unwrap().kind,
            RouteKind::Special(Special::Blackhole)
        );
        // Replacing an object changes its routes without a route message.
        assert_eq!(m.apply(Event::Nexthop { id: 1, nh: Some(nh("198.18.30.9", 4)) }), Applied::Changed);
        assert_eq!(
            m.routes4().iter().find(|r| r.prefix.to_string() == "198.19.0.0/16").unwrap().paths[0].gw,
            Some("198.18.30.9".parse().unwrap())
        );
        // Deleting the group deletes its routes.
        assert_eq!(m.apply(Event::Nexthop { id: 10, nh: None }), Applied::Changed);
        assert!(m.routes4().iter().all(|r| r.prefix.to_string() != "198.19.0.0/16"));
    }

    #[test]
    fn an_ipv4_route_through_an_ipv6_gateway_keeps_it_directly_or_by_an_object() {
        // RFC 5549, as FRR's BGP unnumbered installs it: a nexthop object `via fe80::1 dev
        // eth4` used by IPv4 routes; and the same gateway on the route itself. An IPv6 route
        // cannot use an IPv4 object.
        let mut m = mirror();
        let ll: Ipv6Addr = "fe80::1".parse().unwrap();
        m.apply(Event::Nexthop { id: 1, nh: Some(Nexthop::Single { gw: Some(IpAddr::V6(ll)), ifindex: 4 }) });
        m.apply(Event::Nexthop {
            id: 2,
            nh: Some(Nexthop::Single { gw: Some("198.18.30.2".parse().unwrap()), ifindex: 4 }),
        });
        let mut a = r4(TABLE_MAIN, "198.51.100.0/24", 20, KernelType::Unicast, &[]);
        a.nh_id = Some(1);
        add4(&mut m, a);
        let mut b = r4(TABLE_MAIN, "198.51.101.0/24", 20, KernelType::Unicast, &[]);
        b.paths = vec![KernelPath { gw: Some(IpAddr::V6(ll)), ifindex: 5, weight: 1 }];
        add4(&mut m, b);
        let mut c = r6("2001:2:100::/48", 1024, &[]);
        c.nh_id = Some(2);
        m.apply(Event::Route6 { add: true, replace: false, route: c });
        let got = m.routes4();
        let paths = |p: &str| got.iter().find(|r| r.prefix.to_string() == p).unwrap().clone();
        let a = paths("198.51.100.0/24");
        assert_eq!(
            (a.kind, a.paths),
            (RouteKind::Unicast, vec![Path { gw: Some(IpAddr::V6(ll)), port: Some(PortId(0)), weight: 1 }])
        );
        let b = paths("198.51.101.0/24");
        assert_eq!(
            (b.kind, b.paths),
            (RouteKind::Unicast, vec![Path { gw: Some(IpAddr::V6(ll)), port: Some(PortId(1)), weight: 1 }])
        );
        assert_eq!(
            m.routes6().iter().find(|r| r.prefix.to_string() == "2001:2:100::/48").unwrap().kind,
            RouteKind::Special(Special::Unsupported)
        );
    }

    #[test]
    fn ipv6_multipath_routes_merge_path_by_path_and_lose_paths_one_at_a_time() {
        let mut m = mirror();
        let add = |m: &mut Mirror, r, replace| m.apply(Event::Route6 { add: true, replace, route: r });
        add(&mut m, r6("2001:2:100::/48", 1024, &[(Some("2001:2:0:30::2"), 4)]), false);
        assert_eq!(add(&mut m, r6("2001:2:100::/48", 1024, &[(Some("2001:2:0:30::3"), 4)]), false), Applied::Changed);
        assert_eq!(m.routes6()[0].paths.len(), 2);
        let del = r6("2001:2:100::/48", 1024, &[(Some("2001:2:0:30::2"), 4)]);
        assert_eq!(m.apply(Event::Route6 { add: false, replace: false, route: del }), Applied::Changed);
        let got = m.routes6();
        assert_eq!(got[0].paths.len(), 1);
        assert_eq!(got[0].paths[0].gw, Some("2001:2:0:30::3".parse().unwrap()));
        // A replace is whole.
        add(&mut m, r6("2001:2:100::/48", 1024, &[(Some("2001:2:0:30::7"), 4)]), true);
        assert_eq!(
            m.routes6()[0].paths,
            vec![Path { gw: Some("2001:2:0:30::7".parse().unwrap()), port: Some(PortId(0)), weight: 1 }]
        );
        // Routes on link are one per interface.
        add(&mut m, r6("fe80::/64", 256, &[(None, 4)]), false);
        add(&mut m, r6("fe80::/64", 256, &[(None, 5)]), false);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn changes_are_told_by_prefix_and_the_effective_route_is_the_one_routes4_gives() {
        let mut m = mirror();
        assert!(m.take_dirty().all, "the first build is whole");
        add4(&mut m, r4(TABLE_MAIN, "198.19.0.0/16", 20, KernelType::Unicast, &[(Some("198.18.30.2"), 4)]));
        add4(&mut m, r4(TABLE_MAIN, "198.19.0.0/16", 10, KernelType::Unicast, &[(Some("198.18.30.3"), 4)]));
        add4(&mut m, r4(TABLE_LOCAL, "198.18.30.1/32", 0, KernelType::Local, &[(None, 4)]));
        add4(&mut m, r4(TABLE_MAIN, "198.18.30.1/32", 0, KernelType::Unicast, &[(None, 5)]));
        let d = m.take_dirty();
        assert!(!d.all && !d.v6);
        assert_eq!(d.v4.iter().map(|p| p.to_string()).collect::<Vec<_>>(), ["198.18.30.1/32", "198.19.0.0/16"]);
        assert!(m.take_dirty().v4.is_empty());
        let all = m.routes4();
        let eff = m.effective4("198.19.0.0/16".parse().unwrap()).unwrap();
        assert_eq!(eff.paths[0].gw, Some("198.18.30.3".parse().unwrap()), "lowest metric");
        assert!(all.contains(&eff));
        let local = m.effective4("198.18.30.1/32".parse().unwrap()).unwrap();
        assert_eq!((local.kind, local.local_table), (RouteKind::Local, true), "the local table first");
        assert_eq!(m.effective4("198.20.0.0/16".parse().unwrap()), None);
        // A nexthop object's change reaches the prefixes that use it.
        m.apply(Event::Nexthop { id: 1, nh: Some(Nexthop::Single { gw: None, ifindex: 4 }) });
        m.apply(Event::Nexthop { id: 2, nh: Some(Nexthop::Group(vec![(1, 1)])) });
        let mut a = r4(TABLE_MAIN, "198.19.7.0/24", 0, KernelType::Unicast, &[]);
        a.nh_id = Some(2);
        add4(&mut m, a);
        m.take_dirty();
        m.apply(Event::Nexthop { id: 1, nh: Some(Nexthop::Single { gw: None, ifindex: 5 }) });
        assert_eq!(m.take_dirty().v4.iter().map(|p| p.to_string()).collect::<Vec<_>>(), ["198.19.7.0/24"]);
        m.apply(Event::Address { add: true, ifindex: 4, addr: "198.18.30.1".parse().unwrap(), len: 24 });
        assert!(m.take_dirty().all, "a port's address: everything");
    }

    #[test]
    fn an_interface_that_is_not_a_port_resynchronises_only_what_leaves_by_it() {
        // A container's veth (ifindex 9) going up and down, its address coming and going:
        // nothing of the mirror's goes through it, so no dump of the whole table.
        let mut m = mirror();
        let link9 = |up| Event::Link { ifindex: 9, up, mtu: 1500, mac: None };
        let addr9 = |add| Event::Address { add, ifindex: 9, addr: "198.18.99.1".parse().unwrap(), len: 24 };
        assert_eq!(
            add4(&mut m, r4(TABLE_MAIN, "198.19.0.0/16", 0, KernelType::Unicast, &[(None, 4)])),
            Applied::Changed
        );
        for up in [true, false, true] {
            assert_eq!(m.apply(link9(up)), Applied::Unchanged, "up {up}");
        }
        assert_eq!((m.apply(addr9(true)), m.apply(addr9(false))), (Applied::Unchanged, Applied::Unchanged));
        // A route out of it: the kernel flushes it silently when it goes down.
        add4(&mut m, r4(TABLE_MAIN, "198.18.99.0/24", 0, KernelType::Unicast, &[(None, 9)]));
        assert_eq!(m.apply(link9(false)), Applied::Resync);
        assert_eq!(m.apply(addr9(false)), Applied::Resync, "its subnet's routes go with the address");
        // An object on it counts as much.
        let mut m = mirror();
        m.apply(link9(true));
        m.apply(Event::Nexthop { id: 7, nh: Some(Nexthop::Single { gw: None, ifindex: 9 }) });
        assert_eq!(m.apply(link9(false)), Applied::Resync);
        // A route through a port whose preferred source is the address: gone with it.
        let mut m = mirror();
        let mut r = r4(TABLE_MAIN, "198.19.0.0/16", 0, KernelType::Unicast, &[(None, 4)]);
        r.prefsrc = Some("198.18.99.1".parse().unwrap());
        add4(&mut m, r);
        assert_eq!(m.apply(addr9(false)), Applied::Resync);
    }

    #[test]
    fn addresses_mtus_and_silent_kernel_changes() {
        let mut m = mirror();
        let addr = |add, ifindex, a: &str, len| Event::Address { add, ifindex, addr: a.parse().unwrap(), len };
        assert_eq!(m.apply(addr(true, 4, "198.18.30.1", 24)), Applied::Changed);
        assert_eq!(m.apply(addr(true, 4, "2001:2:0:30::1", 64)), Applied::Changed);
        assert_eq!(m.apply(addr(true, 4, "fe80::1", 64)), Applied::Changed);
        assert_eq!(m.apply(addr(true, 4, "2001:2:0:30::1", 64)), Applied::Unchanged, "a flag changed");
        assert_eq!(m.apply(addr(true, 9, "10.0.0.1", 8)), Applied::Unchanged, "not a port");
        let p = &m.ports()[0];
        assert_eq!(p.addrs, vec![("198.18.30.1".parse().unwrap(), 24)]);
        assert_eq!(p.addrs6, vec![("2001:2:0:30::1".parse().unwrap(), 64)]);
        assert_eq!(p.link_local, Some("fe80::1".parse().unwrap()));
        // IPv4 addresses take routes with them silently.
        assert_eq!(m.apply(addr(false, 4, "198.18.30.1", 24)), Applied::Resync);
        assert_eq!(m.apply(addr(false, 9, "10.0.0.1", 8)), Applied::Unchanged, "no route of its");
        let link = |up, mtu, mac| Event::Link { ifindex: 5, up, mtu, mac };
        let old = m.ports()[1].mac;
        assert_eq!(m.apply(link(true, 1500, Some(old))), Applied::Unchanged);
        assert_eq!(m.apply(link(true, 9000, None)), Applied::Changed);
        assert_eq!(m.ports()[1].mtu, 9000);
        let new = crate::wire::MacAddr([2, 0, 0, 0, 0x44, 0x45]);
        assert_eq!(m.apply(link(true, 9000, Some(new))), Applied::Changed, "a MAC changed at run time");
        assert_eq!((m.ports()[1].mac, m.ports()[0].mac == new), (new, false));
        assert_eq!(m.apply(link(false, 9000, Some(new))), Applied::Resync);
        m.clear();
        assert!(m.is_empty() && m.ports()[0].addrs6.is_empty());
    }
}
