//! The live tables as records, what `xfwd show fdb|routes|neighbors` and the control socket
//! answer: the FDB's stations, the neighbours (in kernel mode the kernel's, read at the request,
//! each with whether xfwd's table holds it), the routes (xfwd's, or in kernel mode every kernel
//! route with whether xfwd takes it and what it does with it). Built once from the tables;
//! the CLI renders them as text (as `ip route` and `ip neigh` print theirs) or as JSON (with a
//! schema [`VERSION`]).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::io::LiveView;
use crate::l3::tables::{FamilyTables, NextHop, RouteOrigin, Special};
use crate::l3::NhKind;
use crate::routes::mirror::{KernelType, Listed, Use, TABLE_LOCAL, TABLE_MAIN};
use crate::routes::rtnl::{Dump, KernelNeighbor, Message, Rtnl, RtnlError};

/// The version of the JSON below: raised when a field changes meaning or goes; new fields may
/// come without it. 2: in kernel mode `routes` lists every kernel route (not only those xfwd
/// takes: see `used`) with `dst` as `ip -j route` gives it (`default`, a host route's address
/// alone), and `neighbors` the kernel's entries, whose `lladdr` is absent while unresolved.
pub const VERSION: u32 = 2;

/// `show fdb --json`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Fdb {
    /// [`VERSION`].
    pub version: u32,
    /// The learnt stations.
    pub entries: Vec<FdbEntry>,
    /// How many entries the table holds at most.
    pub capacity: usize,
}

/// A learnt station.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct FdbEntry {
    /// Its MAC address.
    pub mac: String,
    /// The port it was last seen on.
    pub port: String,
    /// Seconds since it was last seen (0 for a static entry).
    pub age_s: u32,
    /// A static entry (the bridge file's `[[static]]`): never ages, never moves.
    #[serde(rename = "static", default)]
    pub is_static: bool,
}

/// `show neighbors --json`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Neighbors {
    /// [`VERSION`].
    pub version: u32,
    /// Where they come from: `config` (xfwd resolves them) or `kernel` (the kernel's table, as
    /// `ip neigh` lists it, each with whether xfwd's holds it).
    #[serde(default = "config_source")]
    pub source: String,
    /// IPv4 neighbours, then IPv6 ones.
    pub entries: Vec<Neighbor>,
    /// The IPv4 table's capacity.
    pub capacity: usize,
    /// The IPv6 table's capacity.
    pub capacity6: usize,
}

/// A resolved neighbour.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Neighbor {
    /// `inet` or `inet6`.
    pub family: String,
    /// Its address.
    pub dst: IpAddr,
    /// The port it was resolved on.
    pub dev: String,
    /// Its MAC address (none while the kernel resolves it, or after it failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lladdr: String,
    /// As `ip neigh` names it: xfwd's own `PERMANENT` (configured) or `REACHABLE` (resolved);
    /// in kernel mode the kernel's (`STALE`, `DELAY`, `PROBE`, `INCOMPLETE`, `FAILED`, …).
    pub state: String,
    /// The kernel marks it a router (IPv6).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub router: bool,
    /// xfwd's table holds it: the workers forward to this MAC.
    #[serde(default = "yes")]
    pub held: bool,
    /// Kernel mode: where xfwd's table and the kernel's differ.
    pub note: Option<String>,
}

pub fn config_source() -> String {
    "config".into()
}

/// `show routes --json`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Routes {
    /// [`VERSION`].
    pub version: u32,
    /// Where the routes come from: `config` or `kernel` (mirrored).
    pub source: String,
    /// IPv4 routes, then IPv6 ones.
    pub routes: Vec<Route>,
    /// The IPv4 FIB's memory, bytes.
    pub fib_bytes: usize,
    /// The IPv6 FIB's memory, bytes.
    pub fib6_bytes: usize,
}

/// A route.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Route {
    /// `inet` or `inet6`.
    pub family: String,
    /// `unicast`, `local`, `broadcast`, `blackhole`, `unreachable`, `prohibit` or
    /// `unsupported` (a kernel route xfwd cannot forward as the kernel would).
    #[serde(rename = "type")]
    pub kind: String,
    /// The prefix; the box's own address alone for its local and broadcast entries.
    pub dst: String,
    /// Where it came from: `connected`, `local`, `broadcast`, `static` or `kernel`.
    pub origin: String,
    /// The gateway of a single next hop.
    pub gateway: Option<IpAddr>,
    /// The egress port of a single next hop.
    pub dev: Option<String>,
    /// IPv4: the box's address its ICMP errors come from.
    pub prefsrc: Option<IpAddr>,
    /// A kernel route's protocol as `ip route` names it (`kernel`, `static`, `bird`, …).
    pub protocol: Option<String>,
    /// `local` for a route of the kernel's local table.
    pub table: Option<String>,
    /// The route's MTU where it sets one below the port's.
    pub mtu: Option<u32>,
    /// Equal-cost next hops, each once with its weight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<Hop>,
    /// False for a route out of an interface xfwd does not own: nobody forwards it.
    pub forwarded: bool,
    /// Kernel mode: the metric.
    pub metric: Option<u32>,
    /// Kernel mode: the scope where not global (`link`, `host`, …).
    pub scope: Option<String>,
    /// Kernel mode, IPv6: the router preference (`medium`, `high`, `low`).
    pub pref: Option<String>,
    /// Kernel mode, IPv4: the TOS a route selects by.
    pub tos: Option<u8>,
    /// Kernel mode: the nexthop object it names.
    pub nhid: Option<u32>,
    /// Kernel mode: whether xfwd takes this route for its prefix (false: another of lower
    /// metric is taken, or it is one xfwd never takes; `note` says which).
    pub used: Option<bool>,
    /// Kernel mode: what xfwd does with it that `ip route` does not say.
    pub note: Option<String>,
}

impl Route {
    /// A forwarded route of `family` and `kind` to `dst`, from `origin`, with nothing else said
    /// of it yet.
    pub fn new(family: &str, kind: &str, dst: String, origin: &str) -> Route {
        Route {
            family: family.into(),
            kind: kind.into(),
            dst,
            origin: origin.into(),
            gateway: None,
            dev: None,
            prefsrc: None,
            protocol: None,
            table: None,
            mtu: None,
            nexthops: Vec::new(),
            forwarded: true,
            metric: None,
            scope: None,
            pref: None,
            tos: None,
            nhid: None,
            used: None,
            note: None,
        }
    }
}

/// A member of an equal-cost route.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Hop {
    /// Its gateway, if it has one.
    pub gateway: Option<IpAddr>,
    /// Its egress port.
    pub dev: String,
    /// How many times the group repeats it.
    pub weight: usize,
    /// False for a member out of an interface xfwd does not own: the flows hashed to it are
    /// dropped.
    #[serde(default = "yes")]
    pub forwarded: bool,
}

fn yes() -> bool {
    true
}

/// The learnt stations.
pub fn fdb(view: &LiveView) -> Fdb {
    let entries = view
        .fdb_entries()
        .into_iter()
        .map(|(e, port)| FdbEntry { mac: e.mac.to_string(), port, age_s: e.age, is_static: e.is_static })
        .collect();
    Fdb { version: VERSION, entries, capacity: view.fdb.capacity() }
}

/// The neighbours; `None` on a bridge. In kernel mode, the kernel's table as `ip neigh` lists
/// it (read at the request), each entry with whether xfwd's holds it, then what only xfwd's
/// holds; an error if the kernel's cannot be read.
pub fn neighbors(view: &LiveView) -> Option<Result<Neighbors, String>> {
    let r = view.router.as_ref()?;
    let own = own_neighbors(view)?;
    if r.kernel.is_none() {
        return Some(Ok(own));
    }
    let mut kernel = Vec::new();
    let dumped = Rtnl::open().map_err(RtnlError::from).and_then(|mut n| {
        n.dump(Dump::Neighbors, |m| {
            if let Message::Neighbor(k) = m {
                kernel.push(k);
            }
        })
    });
    if let Err(e) = dumped {
        return Some(Err(format!("cannot read the kernel's neighbours: {e}")));
    }
    Some(Ok(with_kernel(own, &kernel, &|i| {
        view.ports
            .iter()
            .find(|p| p.ifindex == i)
            .map(|p| (p.name.clone(), true))
            .unwrap_or_else(|| (crate::io::setup::port::name_of(i).unwrap_or_else(|| format!("if{i}")), false))
    })))
}

/// The kernel's neighbours `kernel` as `ip neigh` lists them (not the `NOARP` and `NONE` ones
/// it hides), each with whether xfwd's table `own` holds it, then the entries only `own`
/// holds; `dev` names an interface and says whether it is a port.
pub fn with_kernel(own: Neighbors, kernel: &[KernelNeighbor], dev: &dyn Fn(u32) -> (String, bool)) -> Neighbors {
    // xfwd's entries by port and address, each taken once (tables of many thousands).
    let mut mine: Vec<Option<Neighbor>> = own.entries.into_iter().map(Some).collect();
    let index: std::collections::HashMap<(String, IpAddr), usize> =
        mine.iter().enumerate().filter_map(|(i, o)| o.as_ref().map(|o| ((o.dev.clone(), o.dst), i))).collect();
    let mut entries = Vec::new();
    for k in kernel {
        let (name, port) = dev(k.ifindex);
        let lladdr = k.lladdr.map(|m| m.to_string()).unwrap_or_default();
        let held = index.get(&(name.clone(), k.ip)).and_then(|&i| mine[i].take());
        if matches!(k.state, "NOARP" | "NONE") {
            // Hidden, as `ip neigh` hides them, with xfwd's copy of them (multicast and
            // broadcast entries the kernel's table holds without asking).
            continue;
        }
        let note = match (&held, port) {
            (_, false) => Some("not a port: xfwd does not use it".to_owned()),
            (Some(o), true) if o.lladdr != lladdr => Some(format!("xfwd's table has {}", o.lladdr)),
            (Some(_), true) => None,
            (None, true) if k.mac.is_some() => Some("not in xfwd's table yet".to_owned()),
            (None, true) => None,
        };
        entries.push(Neighbor {
            family: if k.ip.is_ipv6() { "inet6" } else { "inet" }.into(),
            dst: k.ip,
            dev: name,
            lladdr,
            state: k.state.into(),
            router: k.router,
            held: held.is_some(),
            note,
        });
    }
    for mut o in mine.into_iter().flatten() {
        o.note = Some("xfwd's own: not in the kernel's table".into());
        entries.push(o);
    }
    // IPv4 first, each family in the kernel's order.
    entries.sort_by_key(|e| e.family != "inet");
    Neighbors { source: "kernel".into(), entries, ..own }
}

/// xfwd's own neighbour tables; `None` on a bridge.
fn own_neighbors(view: &LiveView) -> Option<Neighbors> {
    let r = view.router.as_ref()?;
    let dev = |p: crate::PortId| view.ports.get(p.index()).map_or("?", |p| p.name.as_str()).to_owned();
    let state = |s: bool| if s { "PERMANENT" } else { "REACHABLE" }.to_owned();
    let mut entries: Vec<Neighbor> = r
        .neighbors
        .entries()
        .into_iter()
        .map(|n| Neighbor {
            family: "inet".into(),
            dst: n.ip.into(),
            dev: dev(n.port),
            lladdr: n.mac.to_string(),
            state: state(n.is_static),
            router: false,
            held: true,
            note: None,
        })
        .collect();
    // A link-local neighbour's key carries its port; shown as `ip neigh` shows it.
    entries.extend(r.neighbors6.entries().into_iter().map(|n| Neighbor {
        family: "inet6".into(),
        dst: crate::l3::tables::unscope6(n.ip).into(),
        dev: dev(n.port),
        lladdr: n.mac.to_string(),
        state: state(n.is_static),
        router: false,
        held: true,
        note: None,
    }));
    Some(Neighbors {
        version: VERSION,
        source: config_source(),
        entries,
        capacity: r.neighbors.capacity(),
        capacity6: r.neighbors6.capacity(),
    })
}

/// The name `ip route` gives a route's protocol (`rtm_protocol`).
fn proto_name(p: u8) -> String {
    match p {
        0 => "unspec".into(),
        1 => "redirect".into(),
        2 => "kernel".into(),
        3 => "boot".into(),
        4 => "static".into(),
        8 => "gated".into(),
        9 => "ra".into(),
        10 => "mrt".into(),
        11 => "zebra".into(),
        12 => "bird".into(),
        13 => "dnrouted".into(),
        14 => "xorp".into(),
        15 => "ntk".into(),
        16 => "dhcp".into(),
        18 => "keepalived".into(),
        42 => "babel".into(),
        99 => "openr".into(),
        186 => "bgp".into(),
        187 => "isis".into(),
        188 => "ospf".into(),
        189 => "rip".into(),
        192 => "eigrp".into(),
        n => n.to_string(),
    }
}

/// Equal-cost members, each once with its weight (the number of times it is repeated).
fn weights<T: PartialEq + Copy>(members: impl Iterator<Item = T>) -> Vec<(T, usize)> {
    let mut out: Vec<(T, usize)> = Vec::new();
    for m in members {
        match out.iter_mut().find(|(x, _)| *x == m) {
            Some((_, n)) => *n += 1,
            None => out.push((m, 1)),
        }
    }
    out
}

/// One family's routes as records; `src` gives a next hop's IPv4 source (none for IPv6).
fn family_routes<F, G, S, P>(
    family: &str,
    t: &FamilyTables<F, NextHop<G, S>, P>,
    dev_of: &dyn Fn(crate::PortId) -> String,
    src: impl Fn(&NextHop<G, S>) -> Option<IpAddr>,
    addr_of: impl Fn(&P) -> String,
    out: &mut Vec<Route>,
) where
    G: Copy + Into<IpAddr>,
    P: std::fmt::Display,
{
    for (prefix, nh, origin) in t.routes.iter() {
        let h = &t.nexthops[usize::from(nh.0)];
        let origin_name = match origin {
            RouteOrigin::Connected => "connected",
            RouteOrigin::Local => "local",
            RouteOrigin::Broadcast => "broadcast",
            RouteOrigin::Static => "static",
            RouteOrigin::Kernel { .. } => "kernel",
        };
        let mut r = Route {
            dev: Some(dev_of(h.port)),
            prefsrc: src(h),
            ..Route::new(family, "unicast", prefix.to_string(), origin_name)
        };
        if let RouteOrigin::Kernel { protocol, local_table } = origin {
            r.protocol = Some(proto_name(*protocol));
            r.table = local_table.then(|| "local".to_owned());
            r.mtu = (h.mtu != 0).then_some(h.mtu);
        }
        match origin {
            RouteOrigin::Local | RouteOrigin::Broadcast => {
                r.kind = r.origin.clone();
                r.dst = addr_of(prefix);
                r.prefsrc = None;
            }
            _ => match h.kind {
                NhKind::Local | NhKind::Broadcast => {
                    r.kind = if matches!(h.kind, NhKind::Local) { "local" } else { "broadcast" }.into();
                    (r.prefsrc, r.mtu) = (None, None);
                }
                NhKind::Special(k) => {
                    r.kind = match k {
                        Special::Blackhole => "blackhole",
                        Special::Unreachable => "unreachable",
                        Special::Prohibit => "prohibit",
                        Special::Unsupported => "unsupported",
                        Special::Foreign => "unicast",
                    }
                    .into();
                    r.forwarded = k != Special::Foreign;
                    (r.dev, r.prefsrc, r.mtu) = (None, None, None);
                }
                NhKind::Group { first, len } => {
                    let members = t.groups[first as usize..first as usize + usize::from(len)].iter().map(|i| i.0);
                    r.nexthops = weights(members)
                        .into_iter()
                        .map(|(m, weight)| {
                            let h = &t.nexthops[usize::from(m)];
                            let gateway = match h.kind {
                                NhKind::Gateway(g) => Some(g.into()),
                                _ => None,
                            };
                            Hop { gateway, dev: dev_of(h.port), weight, forwarded: true }
                        })
                        .collect();
                    (r.dev, r.prefsrc, r.mtu) = (None, None, None);
                }
                NhKind::Gateway(g) => r.gateway = Some(g.into()),
                NhKind::Connected => {}
            },
        }
        out.push(r);
    }
}

/// How long `show routes` waits for the kernel-mirror thread's listing (it builds it between
/// batches of changes, a slice at a time: under two seconds for a million routes), short of
/// the client's [`crate::control::QUERY_TIMEOUT`] so that the client reads why.
const LISTING_WAIT: std::time::Duration = std::time::Duration::from_secs(8);

/// The routes; `None` on a bridge; an error when the kernel-mirror thread does not answer.
pub fn routes(view: &LiveView) -> Option<Result<Routes, String>> {
    let r = view.router.as_ref()?;
    let t = r.tables.load();
    if let Some(ask) = &r.kernel_routes {
        let Some(listed) = crate::routes::kernel::ask_listing(ask, LISTING_WAIT) else {
            return Some(Err(format!("the kernel-mirror thread did not list the routes within {LISTING_WAIT:?}")));
        };
        let mut names = std::collections::HashMap::new();
        let mut name = |i: u32| -> String {
            names
                .entry(i)
                .or_insert_with(|| crate::io::setup::port::name_of(i).unwrap_or_else(|| format!("if{i}")))
                .clone()
        };
        let routes = listed.iter().map(|l| kernel_route(l, &mut name)).collect();
        return Some(Ok(Routes {
            version: VERSION,
            source: "kernel".into(),
            routes,
            fib_bytes: t.v4.fib.memory(),
            fib6_bytes: t.v6.fib.memory(),
        }));
    }
    let dev_of = |p: crate::PortId| t.ports.get(p.index()).map_or("?", |p| p.name.as_str()).to_owned();
    let mut routes = Vec::new();
    family_routes("inet", &t.v4, &dev_of, |h| Some(h.src.into()), |p| p.addr().to_string(), &mut routes);
    family_routes("inet6", &t.v6, &dev_of, |_| None, |p| p.addr().to_string(), &mut routes);
    Some(Ok(Routes {
        version: VERSION,
        source: if r.kernel.is_some() { "kernel" } else { "config" }.into(),
        routes,
        fib_bytes: t.v4.fib.memory(),
        fib6_bytes: t.v6.fib.memory(),
    }))
}

/// A route type's name as `ip route` writes it (`rtm_type`).
fn type_name(k: KernelType) -> String {
    match k {
        KernelType::Unicast => "unicast".into(),
        KernelType::Local => "local".into(),
        KernelType::Broadcast => "broadcast".into(),
        KernelType::Anycast => "anycast".into(),
        KernelType::Blackhole => "blackhole".into(),
        KernelType::Unreachable => "unreachable".into(),
        KernelType::Prohibit => "prohibit".into(),
        KernelType::Other(5) => "multicast".into(),
        KernelType::Other(9) => "throw".into(),
        KernelType::Other(10) => "nat".into(),
        KernelType::Other(11) => "xresolve".into(),
        KernelType::Other(n) => n.to_string(),
    }
}

/// A route scope's name as `ip route` writes it (`rtm_scope`); `None` for global.
fn scope_name(s: u8) -> Option<String> {
    match s {
        0 => None,
        200 => Some("site".into()),
        253 => Some("link".into()),
        254 => Some("host".into()),
        255 => Some("nowhere".into()),
        n => Some(n.to_string()),
    }
}

/// A routing table's name as `ip route` writes it; `None` for main.
fn table_name(t: u32) -> Option<String> {
    match t {
        TABLE_MAIN => None,
        TABLE_LOCAL => Some("local".into()),
        253 => Some("default".into()),
        n => Some(n.to_string()),
    }
}

/// A kernel route, as `ip route` lists it, and what xfwd makes of it.
pub fn kernel_route(l: &Listed, name: &mut dyn FnMut(u32) -> String) -> Route {
    let v6 = l.dst.is_ipv6();
    let host = if v6 { 128 } else { 32 };
    let dst = match l.len {
        0 => "default".to_owned(),
        n if n == host => l.dst.to_string(),
        n => format!("{}/{n}", l.dst),
    };
    let multipath = l.paths.len() > 1;
    let single = if multipath { None } else { l.paths.first() };
    let on_port = l.paths.iter().any(|(_, port)| *port);
    let taken = l.used == Use::Taken;
    let other_type = matches!(l.kind, KernelType::Other(n) if n != 5);
    let note = match l.used {
        Use::Tos => Some("not used by xfwd: it selects by TOS"),
        Use::Source => Some("not used by xfwd: it is source-specific"),
        Use::NoPath => Some("not used: no usable path (an unknown nexthop object?)"),
        Use::Shadowed => None,
        Use::Taken if l.unsupported || other_type => Some("not forwarded by xfwd: answered as for no route"),
        Use::Taken if l.kind == KernelType::Unicast && !on_port => {
            Some("not forwarded: out of an interface xfwd does not own")
        }
        Use::Taken => None,
    };
    Route {
        family: if v6 { "inet6" } else { "inet" }.into(),
        kind: type_name(l.kind),
        dst,
        origin: "kernel".into(),
        gateway: single.and_then(|(p, _)| p.gw),
        dev: single.map(|(p, _)| name(p.ifindex)),
        prefsrc: l.prefsrc,
        protocol: (l.protocol != 3).then(|| proto_name(l.protocol)),
        table: table_name(l.table),
        mtu: (l.mtu != 0).then_some(l.mtu),
        nexthops: if multipath {
            l.paths
                .iter()
                .map(|(p, port)| Hop {
                    gateway: p.gw,
                    dev: name(p.ifindex),
                    weight: usize::from(p.weight),
                    forwarded: *port,
                })
                .collect()
        } else {
            Vec::new()
        },
        forwarded: taken && note.is_none(),
        // The kernel sends no metric 0 for an IPv4 route; IPv6 routes always have one.
        metric: (v6 || l.metric != 0).then_some(l.metric),
        scope: scope_name(l.scope),
        pref: l.pref.map(|p| match p {
            0 => "medium".into(),
            1 => "high".into(),
            3 => "low".into(),
            n => n.to_string(),
        }),
        tos: (l.tos != 0).then_some(l.tos),
        nhid: l.nh_id,
        used: Some(taken),
        note: note.map(Into::into),
    }
}

/// A TOS as `ip route` writes it: its name in iproute2's `rt_dsfield` (the DSCP classes), else
/// in hexadecimal.
pub fn tos_name(t: u8) -> String {
    const NAMES: [(u8, &str); 20] = [
        (0x28, "AF11"),
        (0x30, "AF12"),
        (0x38, "AF13"),
        (0x48, "AF21"),
        (0x50, "AF22"),
        (0x58, "AF23"),
        (0x68, "AF31"),
        (0x70, "AF32"),
        (0x78, "AF33"),
        (0x88, "AF41"),
        (0x90, "AF42"),
        (0x98, "AF43"),
        (0x20, "CS1"),
        (0x40, "CS2"),
        (0x60, "CS3"),
        (0x80, "CS4"),
        (0xa0, "CS5"),
        (0xc0, "CS6"),
        (0xe0, "CS7"),
        (0xb8, "EF"),
    ];
    NAMES.iter().find(|(v, _)| *v == t).map_or_else(|| format!("0x{t:02x}"), |(_, n)| (*n).to_owned())
}
