//! What `xfwd show fdb|routes|neighbors` answers: each table as records with named fields,
//! printed as JSON (`--json`, with a schema `version`) or as text, one line a record, as `ip
//! route` and `ip neigh` print theirs. The records are built once from the live tables; text
//! and JSON are two renderings of them.

use std::fmt::Write as _;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use xfwd_dataplane::io::LiveView;
use xfwd_dataplane::l3::tables::{FamilyTables, NextHop, RouteOrigin, Special};
use xfwd_dataplane::l3::NhKind;

/// The version of the JSON below: raised when a field changes meaning or goes; new fields may
/// come without it.
pub const VERSION: u32 = 1;

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
    /// IPv4 neighbours, then IPv6 ones.
    pub entries: Vec<Neighbor>,
    /// The IPv4 table's capacity.
    pub capacity: usize,
    /// The IPv6 table's capacity.
    pub capacity6: usize,
}

/// A resolved neighbour.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Neighbor {
    /// `inet` or `inet6`.
    pub family: String,
    /// Its address.
    pub dst: IpAddr,
    /// The port it was resolved on.
    pub dev: String,
    /// Its MAC address.
    pub lladdr: String,
    /// `PERMANENT` (configured) or `REACHABLE` (resolved), as `ip neigh` names them.
    pub state: String,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// The egress port of a single next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// IPv4: the box's address its ICMP errors come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefsrc: Option<IpAddr>,
    /// A kernel route's protocol as `ip route` names it (`kernel`, `static`, `bird`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// `local` for a route of the kernel's local table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The route's MTU where it sets one below the port's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Equal-cost next hops, each once with its weight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<Hop>,
    /// False for a route out of an interface xfwd does not own: nobody forwards it.
    pub forwarded: bool,
}

/// A member of an equal-cost route.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Hop {
    /// Its gateway, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Its egress port.
    pub dev: String,
    /// How many times the group repeats it.
    pub weight: usize,
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

/// The neighbours; `None` on a bridge.
pub fn neighbors(view: &LiveView) -> Option<Neighbors> {
    let r = view.router.as_ref()?;
    let dev = |p: xfwd_dataplane::PortId| view.ports.get(p.index()).map_or("?", |p| p.name.as_str()).to_owned();
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
        })
        .collect();
    // A link-local neighbour's key carries its port; shown as `ip neigh` shows it.
    entries.extend(r.neighbors6.entries().into_iter().map(|n| Neighbor {
        family: "inet6".into(),
        dst: xfwd_dataplane::l3::tables::unscope6(n.ip).into(),
        dev: dev(n.port),
        lladdr: n.mac.to_string(),
        state: state(n.is_static),
    }));
    Some(Neighbors { version: VERSION, entries, capacity: r.neighbors.capacity(), capacity6: r.neighbors6.capacity() })
}

/// The name `ip route` gives a route's protocol (`rtm_protocol`).
fn proto_name(p: u8) -> String {
    match p {
        2 => "kernel".into(),
        3 => "boot".into(),
        4 => "static".into(),
        9 => "ra".into(),
        11 => "zebra".into(),
        12 => "bird".into(),
        16 => "dhcp".into(),
        42 => "babel".into(),
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
    dev_of: &dyn Fn(xfwd_dataplane::PortId) -> String,
    src: impl Fn(&NextHop<G, S>) -> Option<IpAddr>,
    addr_of: impl Fn(&P) -> String,
    out: &mut Vec<Route>,
) where
    G: Copy + Into<IpAddr>,
    P: std::fmt::Display,
{
    for (prefix, nh, origin) in t.routes.iter() {
        let h = &t.nexthops[usize::from(nh.0)];
        let mut r = Route {
            family: family.into(),
            kind: "unicast".into(),
            dst: prefix.to_string(),
            origin: match origin {
                RouteOrigin::Connected => "connected",
                RouteOrigin::Local => "local",
                RouteOrigin::Broadcast => "broadcast",
                RouteOrigin::Static => "static",
                RouteOrigin::Kernel { .. } => "kernel",
            }
            .into(),
            gateway: None,
            dev: Some(dev_of(h.port)),
            prefsrc: src(h),
            protocol: None,
            table: None,
            mtu: None,
            nexthops: Vec::new(),
            forwarded: true,
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
                            Hop { gateway, dev: dev_of(h.port), weight }
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

/// The routes; `None` on a bridge.
pub fn routes(view: &LiveView) -> Option<Routes> {
    let r = view.router.as_ref()?;
    let t = r.tables.load();
    let dev_of = |p: xfwd_dataplane::PortId| t.ports.get(p.index()).map_or("?", |p| p.name.as_str()).to_owned();
    let mut routes = Vec::new();
    family_routes("inet", &t.v4, &dev_of, |h| Some(h.src.into()), |p| p.addr().to_string(), &mut routes);
    family_routes("inet6", &t.v6, &dev_of, |_| None, |p| p.addr().to_string(), &mut routes);
    Some(Routes {
        version: VERSION,
        source: if r.kernel.is_some() { "kernel" } else { "config" }.into(),
        routes,
        fib_bytes: t.v4.fib.memory(),
        fib6_bytes: t.v6.fib.memory(),
    })
}

/// A gateway as `ip route` writes it: `inet6` before an IPv6 gateway of an IPv4 route.
fn via(family: &str, g: &IpAddr) -> String {
    if family == "inet" && g.is_ipv6() {
        format!("via inet6 {g}")
    } else {
        format!("via {g}")
    }
}

/// A route as `ip route` prints it.
pub fn route_line(r: &Route) -> String {
    let mut s = String::new();
    if r.kind != "unicast" {
        let _ = write!(s, "{} ", r.kind);
    }
    s.push_str(&r.dst);
    for h in &r.nexthops {
        s.push_str(" nexthop");
        if let Some(g) = &h.gateway {
            let _ = write!(s, " {}", via(&r.family, g));
        }
        let _ = write!(s, " dev {}", h.dev);
        if h.weight > 1 {
            let _ = write!(s, " weight {}", h.weight);
        }
    }
    if let Some(g) = &r.gateway {
        let _ = write!(s, " {}", via(&r.family, g));
    }
    if let Some(d) = &r.dev {
        let _ = write!(s, " dev {d}");
    } else if !r.forwarded {
        s.push_str(" dev (not a port)");
    }
    if r.origin == "connected" {
        s.push_str(" proto kernel");
        if let Some(src) = &r.prefsrc {
            let _ = write!(s, " scope link src {src}");
        }
    } else {
        if let Some(src) = &r.prefsrc {
            let _ = write!(s, " src {src}");
        }
        if let Some(m) = r.mtu {
            let _ = write!(s, " mtu {m}");
        }
        if let Some(p) = &r.protocol {
            let _ = write!(s, " proto {p}");
        }
        if let Some(t) = &r.table {
            let _ = write!(s, " table {t}");
        }
    }
    if !r.forwarded {
        s.push_str("  [not forwarded: out of an interface xfwd does not own]");
    }
    s
}

/// `show routes`: a line a route, then the counts.
pub fn routes_text(r: &Routes) -> String {
    let mut s = String::new();
    for route in &r.routes {
        let _ = writeln!(s, "{}", route_line(route));
    }
    let from = if r.source == "kernel" { " (mirrored from the kernel)" } else { "" };
    let count = |f: &str| r.routes.iter().filter(|x| x.family == f).count();
    let _ = writeln!(
        s,
        "{} routes, FIB {} MiB; {} IPv6 routes, FIB {} MiB{from}",
        count("inet"),
        r.fib_bytes >> 20,
        count("inet6"),
        r.fib6_bytes >> 20
    );
    s
}

/// `show neighbors`: as `ip neigh`, IPv4 then IPv6, each with its count.
pub fn neighbors_text(n: &Neighbors) -> String {
    let mut s = String::new();
    for family in ["inet", "inet6"] {
        let of: Vec<&Neighbor> = n.entries.iter().filter(|e| e.family == family).collect();
        for e in &of {
            let _ = writeln!(s, "{} dev {} lladdr {} {}", e.dst, e.dev, e.lladdr, e.state);
        }
        let (what, cap) = if family == "inet" { ("entries", n.capacity) } else { ("IPv6 entries", n.capacity6) };
        let _ = writeln!(s, "{} of {cap} {what}", of.len());
    }
    s
}

/// `show fdb`: a station a line, then the count.
pub fn fdb_text(f: &Fdb) -> String {
    let mut s = format!("{:<17}  {:<12}  {:>6}\n", "mac", "port", "age(s)");
    for e in &f.entries {
        let age = if e.is_static { "static".to_owned() } else { e.age_s.to_string() };
        let _ = writeln!(s, "{:<17}  {:<12}  {:>6}", e.mac, e.port, age);
    }
    let _ = writeln!(s, "{} of {} entries", f.entries.len(), f.capacity);
    s
}

/// `show stats --json`: the report with the schema [`VERSION`] beside its fields.
pub fn stats_json(report: &xfwd_dataplane::io::Report) -> String {
    #[derive(Serialize)]
    struct Stats<'a> {
        version: u32,
        #[serde(flatten)]
        report: &'a xfwd_dataplane::io::Report,
    }
    json(&Stats { version: VERSION, report })
}

/// JSON, pretty, with a final newline.
pub fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(kind: &str, dst: &str, origin: &str) -> Route {
        Route {
            family: "inet".into(),
            kind: kind.into(),
            dst: dst.into(),
            origin: origin.into(),
            gateway: None,
            dev: Some("eth4".into()),
            prefsrc: None,
            protocol: None,
            table: None,
            mtu: None,
            nexthops: Vec::new(),
            forwarded: true,
        }
    }

    #[test]
    fn routes_print_as_ip_route_prints_them() {
        let mut c = route("unicast", "198.18.30.0/24", "connected");
        c.prefsrc = Some("198.18.30.1".parse().unwrap());
        assert_eq!(route_line(&c), "198.18.30.0/24 dev eth4 proto kernel scope link src 198.18.30.1");

        let mut k = route("unicast", "198.19.0.0/16", "kernel");
        (k.gateway, k.prefsrc, k.mtu, k.protocol) = (
            Some("198.18.30.2".parse().unwrap()),
            Some("198.18.30.1".parse().unwrap()),
            Some(1400),
            Some("bird".into()),
        );
        assert_eq!(route_line(&k), "198.19.0.0/16 via 198.18.30.2 dev eth4 src 198.18.30.1 mtu 1400 proto bird");

        let mut l = route("local", "198.18.30.1/32", "kernel");
        (l.protocol, l.table) = (Some("kernel".into()), Some("local".into()));
        assert_eq!(route_line(&l), "local 198.18.30.1/32 dev eth4 proto kernel table local");

        let mut e = route("unicast", "198.19.0.0/16", "kernel");
        e.dev = None;
        e.protocol = Some("static".into());
        e.nexthops = vec![
            Hop { gateway: Some("198.18.30.2".parse().unwrap()), dev: "eth4".into(), weight: 1 },
            Hop { gateway: Some("fe80::1".parse().unwrap()), dev: "eth5".into(), weight: 2 },
        ];
        assert_eq!(
            route_line(&e),
            "198.19.0.0/16 nexthop via 198.18.30.2 dev eth4 nexthop via inet6 fe80::1 dev eth5 weight 2 proto static"
        );

        let mut f = route("unicast", "198.20.0.0/16", "kernel");
        (f.dev, f.forwarded) = (None, false);
        assert_eq!(
            route_line(&f),
            "198.20.0.0/16 dev (not a port)  [not forwarded: out of an interface xfwd does not own]"
        );

        let mut b = route("blackhole", "198.19.1.0/24", "kernel");
        b.dev = None;
        assert_eq!(route_line(&b), "blackhole 198.19.1.0/24");
    }

    #[test]
    fn the_json_names_every_field_and_leaves_out_what_a_route_has_not() {
        let mut r = route("unicast", "10.0.0.0/8", "static");
        r.gateway = Some("198.18.30.2".parse().unwrap());
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(v["type"], "unicast");
        assert_eq!(v["gateway"], "198.18.30.2");
        assert_eq!(v["dev"], "eth4");
        assert!(v.get("mtu").is_none() && v.get("nexthops").is_none(), "{v}");
        let back: Route = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn neighbors_and_fdb_print_with_their_counts() {
        let n = Neighbors {
            version: VERSION,
            entries: vec![
                Neighbor {
                    family: "inet".into(),
                    dst: "198.18.30.2".parse().unwrap(),
                    dev: "eth4".into(),
                    lladdr: "02:00:00:00:30:02".into(),
                    state: "REACHABLE".into(),
                },
                Neighbor {
                    family: "inet6".into(),
                    dst: "fe80::2".parse().unwrap(),
                    dev: "eth4".into(),
                    lladdr: "02:00:00:00:30:02".into(),
                    state: "PERMANENT".into(),
                },
            ],
            capacity: 4096,
            capacity6: 4096,
        };
        assert_eq!(
            neighbors_text(&n),
            "198.18.30.2 dev eth4 lladdr 02:00:00:00:30:02 REACHABLE\n1 of 4096 entries\n\
             fe80::2 dev eth4 lladdr 02:00:00:00:30:02 PERMANENT\n1 of 4096 IPv6 entries\n"
        );
        let f = Fdb {
            version: VERSION,
            entries: vec![
                FdbEntry { mac: "02:00:00:00:33:02".into(), port: "eth5".into(), age_s: 3, is_static: false },
                FdbEntry { mac: "02:00:00:00:33:03".into(), port: "eth4".into(), age_s: 0, is_static: true },
            ],
            capacity: 65536,
        };
        assert_eq!(fdb_text(&f).lines().nth(1), Some("02:00:00:00:33:02  eth5               3"));
        assert_eq!(fdb_text(&f).lines().nth(2), Some("02:00:00:00:33:03  eth4          static"));
        assert!(fdb_text(&f).ends_with("2 of 65536 entries\n"));
    }
}
