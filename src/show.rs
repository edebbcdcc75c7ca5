//! What `xfwd show fdb|routes|neighbors` answers, as text: the records the library builds from
//! the live tables (`xfwd_dataplane::io::listing`, re-exported here) printed one line a record,
//! as `ip route` and `ip neigh` print theirs, or as JSON (`--json`, with a schema `version`):
//! two renderings of the same records.

use std::fmt::Write as _;
use std::net::IpAddr;

use serde::Serialize;
pub use xfwd_dataplane::io::listing::*;

/// A kernel route as `ip route show table all` prints it (multipath members on lines of their
/// own), xfwd's note after two spaces and in brackets.
pub fn kernel_route_line(r: &Route) -> String {
    let mut s = String::new();
    if r.kind != "unicast" {
        let _ = write!(s, "{} ", r.kind);
    }
    s.push_str(&r.dst);
    put(&mut s, "nhid", r.nhid.as_ref());
    if let Some(t) = r.tos {
        let _ = write!(s, " tos {}", tos_name(t));
    }
    if let Some(g) = &r.gateway {
        let _ = write!(s, " {}", via(&r.family, g));
    }
    put(&mut s, "dev", r.dev.as_ref());
    put(&mut s, "table", r.table.as_ref());
    put(&mut s, "proto", r.protocol.as_ref());
    put(&mut s, "scope", r.scope.as_ref());
    put(&mut s, "src", r.prefsrc.as_ref());
    put(&mut s, "metric", r.metric.as_ref());
    put(&mut s, "mtu", r.mtu.as_ref());
    put(&mut s, "pref", r.pref.as_ref());
    if let Some(n) = &r.note {
        let _ = write!(s, "  [{n}]");
    }
    for h in &r.nexthops {
        s.push_str("\n\tnexthop");
        if let Some(g) = &h.gateway {
            let _ = write!(s, " {}", via(&r.family, g));
        }
        let _ = write!(s, " dev {} weight {}", h.dev, h.weight);
        if !h.forwarded {
            s.push_str("  [not forwarded: out of an interface xfwd does not own]");
        }
    }
    s
}

/// ` key value` after a route where the value is given.
fn put(s: &mut String, key: &str, value: Option<&impl std::fmt::Display>) {
    if let Some(v) = value {
        let _ = write!(s, " {key} {v}");
    }
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
        put(&mut s, "src", r.prefsrc.as_ref());
        put(&mut s, "mtu", r.mtu.as_ref());
        put(&mut s, "proto", r.protocol.as_ref());
        put(&mut s, "table", r.table.as_ref());
    }
    if !r.forwarded {
        s.push_str("  [not forwarded: out of an interface xfwd does not own]");
    }
    s
}

/// `show routes`: a line a route, then the counts.
pub fn routes_text(r: &Routes) -> String {
    let mut s = String::new();
    let kernel = r.source == "kernel";
    for route in &r.routes {
        let line = if kernel { kernel_route_line(route) } else { route_line(route) };
        let _ = writeln!(s, "{line}");
    }
    let from = if kernel {
        " (mirrored from the kernel: every route of its tables, as `ip route show table all`)"
    } else {
        ""
    };
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
            let _ = writeln!(s, "{}", neighbor_line(e));
        }
        let (what, cap) = if family == "inet" { ("entries", n.capacity) } else { ("IPv6 entries", n.capacity6) };
        let held = of.iter().filter(|e| e.held).count();
        let whose = if n.source == "kernel" { " in xfwd's table (the lines above are the kernel's)" } else { "" };
        let _ = writeln!(s, "{held} of {cap} {what}{whose}");
    }
    s
}

/// A neighbour as `ip neigh` prints it, xfwd's note after two spaces and in brackets.
pub fn neighbor_line(e: &Neighbor) -> String {
    let mut s = format!("{} dev {}", e.dst, e.dev);
    if !e.lladdr.is_empty() {
        let _ = write!(s, " lladdr {}", e.lladdr);
    }
    if e.router {
        s.push_str(" router");
    }
    let _ = write!(s, " {}", e.state);
    if let Some(n) = &e.note {
        let _ = write!(s, "  [{n}]");
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
    use xfwd_dataplane::routes::mirror::{KernelPath, KernelType, Listed, Use, TABLE_LOCAL, TABLE_MAIN};
    use xfwd_dataplane::routes::rtnl::KernelNeighbor;
    use xfwd_dataplane::wire::MacAddr;

    fn route(kind: &str, dst: &str, origin: &str) -> Route {
        Route { dev: Some("eth4".into()), ..Route::new("inet", kind, dst.into(), origin) }
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
            Hop { gateway: Some("198.18.30.2".parse().unwrap()), dev: "eth4".into(), weight: 1, forwarded: true },
            Hop { gateway: Some("fe80::1".parse().unwrap()), dev: "eth5".into(), weight: 2, forwarded: true },
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

    fn listed(dst: &str, len: u8, kind: KernelType, paths: &[(Option<&str>, u32, u16, bool)]) -> Listed {
        Listed {
            table: TABLE_MAIN,
            dst: dst.parse().unwrap(),
            len,
            tos: 0,
            metric: 0,
            kind,
            protocol: 3,
            scope: 0,
            prefsrc: None,
            pref: None,
            mtu: 0,
            nh_id: None,
            has_source: false,
            unsupported: false,
            paths: paths
                .iter()
                .map(|&(gw, ifindex, weight, port)| {
                    (KernelPath { gw: gw.map(|g| g.parse().unwrap()), ifindex, weight }, port)
                })
                .collect(),
            used: Use::Taken,
        }
    }

    #[test]
    fn kernel_routes_print_as_ip_route_show_table_all_prints_them() {
        let mut name = |i: u32| ["lo", "eth4", "eth5"][i as usize - 1].to_owned();
        let mut line = |l: &Listed| kernel_route_line(&kernel_route(l, &mut name));

        let mut c = listed("198.18.30.0", 24, KernelType::Unicast, &[(None, 2, 1, true)]);
        (c.protocol, c.scope, c.prefsrc) = (2, 253, Some("198.18.30.1".parse().unwrap()));
        assert_eq!(line(&c), "198.18.30.0/24 dev eth4 proto kernel scope link src 198.18.30.1");

        let mut l = listed("127.0.0.1", 32, KernelType::Local, &[(None, 1, 1, false)]);
        (l.table, l.protocol, l.scope, l.prefsrc) = (TABLE_LOCAL, 2, 254, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(line(&l), "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1");

        let mut m = listed("198.19.6.0", 24, KernelType::Unicast, &[(Some("198.18.30.2"), 2, 1, true)]);
        (m.metric, m.mtu, m.prefsrc) = (5, 1300, Some("198.18.30.1".parse().unwrap()));
        assert_eq!(line(&m), "198.19.6.0/24 via 198.18.30.2 dev eth4 src 198.18.30.1 metric 5 mtu 1300");

        let mut e =
            listed("0.0.0.0", 0, KernelType::Unicast, &[(Some("198.18.30.2"), 2, 1, true), (None, 1, 2, false)]);
        (e.protocol, e.metric, e.used) = (4, 20, Use::Shadowed);
        assert_eq!(
            line(&e),
            "default proto static metric 20\n\tnexthop via 198.18.30.2 dev eth4 weight 1\n\tnexthop dev lo weight 2  [not forwarded: out of an interface xfwd does not own]"
        );

        let mut t = listed("198.19.7.0", 24, KernelType::Unicast, &[(Some("198.18.30.2"), 2, 1, true)]);
        (t.tos, t.used, t.nh_id) = (0x10, Use::Tos, Some(7));
        assert_eq!(
            line(&t),
            "198.19.7.0/24 nhid 7 tos 0x10 via 198.18.30.2 dev eth4  [not used by xfwd: it selects by TOS]"
        );
        t.tos = 0x20;
        assert!(line(&t).starts_with("198.19.7.0/24 nhid 7 tos CS1 via"), "a DSCP class by its rt_dsfield name");

        let mut mc = listed("ff00::", 8, KernelType::Other(5), &[(None, 3, 1, true)]);
        (mc.table, mc.protocol, mc.metric, mc.pref) = (TABLE_LOCAL, 2, 256, Some(0));
        assert_eq!(line(&mc), "multicast ff00::/8 dev eth5 table local proto kernel metric 256 pref medium");
        let mut h = listed("2001:2:1::", 48, KernelType::Unicast, &[(Some("2001:2:0:30::2"), 2, 1, true)]);
        (h.metric, h.pref) = (1024, Some(1));
        assert_eq!(line(&h), "2001:2:1::/48 via 2001:2:0:30::2 dev eth4 metric 1024 pref high");
        let mut v = listed("::1", 128, KernelType::Local, &[(None, 1, 1, false)]);
        (v.table, v.protocol, v.pref) = (TABLE_LOCAL, 2, Some(0));
        assert_eq!(line(&v), "local ::1 dev lo table local proto kernel metric 0 pref medium");

        let f = listed("198.19.2.0", 24, KernelType::Unicast, &[(None, 1, 1, false)]);
        let r = kernel_route(&f, &mut name);
        assert!(!r.forwarded && r.used == Some(true), "{r:?}");
        assert_eq!(
            kernel_route_line(&r),
            "198.19.2.0/24 dev lo  [not forwarded: out of an interface xfwd does not own]"
        );
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

    fn neighbor(dst: &str, lladdr: &str, state: &str) -> Neighbor {
        let dst: IpAddr = dst.parse().unwrap();
        Neighbor {
            family: if dst.is_ipv6() { "inet6" } else { "inet" }.into(),
            dst,
            dev: "eth4".into(),
            lladdr: lladdr.into(),
            state: state.into(),
            router: false,
            held: true,
            note: None,
        }
    }

    #[test]
    fn kernel_mode_lists_the_kernels_neighbours_as_ip_neigh_and_says_where_xfwd_differs() {
        let own = Neighbors {
            version: VERSION,
            source: config_source(),
            entries: vec![
                neighbor("198.18.30.2", "02:00:00:00:30:02", "REACHABLE"),
                neighbor("198.18.30.3", "02:00:00:00:30:03", "REACHABLE"),
                neighbor("198.18.30.4", "02:00:00:00:30:04", "PERMANENT"),
                // A kernel NOARP entry xfwd took too: hidden with it.
                neighbor("198.18.30.7", "02:00:00:00:30:07", "REACHABLE"),
                neighbor("fe80::1", "02:00:00:00:30:01", "REACHABLE"),
            ],
            capacity: 4096,
            capacity6: 4096,
        };
        let mac = |m: &str| Some(m.parse::<MacAddr>().unwrap());
        let k = |ifindex, ip: &str, state, lladdr: Option<MacAddr>| KernelNeighbor {
            ifindex,
            ip: ip.parse().unwrap(),
            mac: if matches!(state, "FAILED" | "INCOMPLETE") { None } else { lladdr },
            failed: state == "FAILED",
            state,
            lladdr,
            router: false,
        };
        let kernel = [
            k(4, "198.18.30.2", "STALE", mac("02:00:00:00:30:02")),
            k(4, "198.18.30.3", "REACHABLE", mac("02:00:00:00:30:33")),
            k(4, "198.18.30.5", "DELAY", mac("02:00:00:00:30:05")),
            k(4, "198.18.30.6", "FAILED", None),
            k(4, "198.18.30.7", "NOARP", mac("02:00:00:00:30:07")),
            k(9, "198.19.2.2", "REACHABLE", mac("02:00:00:00:30:09")),
            KernelNeighbor { router: true, ..k(4, "fe80::1", "REACHABLE", mac("02:00:00:00:30:01")) },
        ];
        let dev = |i: u32| if i == 4 { ("eth4".to_owned(), true) } else { ("other0".to_owned(), false) };
        let n = with_kernel(own, &kernel, &dev);
        assert_eq!(
            neighbors_text(&n),
            "198.18.30.2 dev eth4 lladdr 02:00:00:00:30:02 STALE\n\
             198.18.30.3 dev eth4 lladdr 02:00:00:00:30:33 REACHABLE  [xfwd's table has 02:00:00:00:30:03]\n\
             198.18.30.5 dev eth4 lladdr 02:00:00:00:30:05 DELAY  [not in xfwd's table yet]\n\
             198.18.30.6 dev eth4 FAILED\n\
             198.19.2.2 dev other0 lladdr 02:00:00:00:30:09 REACHABLE  [not a port: xfwd does not use it]\n\
             198.18.30.4 dev eth4 lladdr 02:00:00:00:30:04 PERMANENT  [xfwd's own: not in the kernel's table]\n\
             3 of 4096 entries in xfwd's table (the lines above are the kernel's)\n\
             fe80::1 dev eth4 lladdr 02:00:00:00:30:01 router REACHABLE\n\
             1 of 4096 IPv6 entries in xfwd's table (the lines above are the kernel's)\n"
        );
        let v: serde_json::Value = serde_json::from_str(&json(&n)).unwrap();
        assert_eq!(v["source"], "kernel");
        let failed = &v["entries"][3];
        assert!(failed.get("lladdr").is_none() && failed["held"] == false, "{failed}");
        assert_eq!(v["entries"][6]["router"], true);
    }

    #[test]
    fn neighbors_and_fdb_print_with_their_counts() {
        let n = Neighbors {
            version: VERSION,
            source: config_source(),
            entries: vec![
                neighbor("198.18.30.2", "02:00:00:00:30:02", "REACHABLE"),
                neighbor("fe80::2", "02:00:00:00:30:02", "PERMANENT"),
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
