//! The router's configuration file (TOML), validated before anything is touched.
//!
//! Every error names the file, line and column of the offending value and says what would be
//! right: `router.toml:12:10: route prefix 10.0.0.1/8 has host bits set; did you mean
//! 10.0.0.0/8?`. The schema, with an example of every key, is in `config/README.md`.
//!
//! What it gives is what the data plane takes: worker options as the data plane's `PollMode` and
//! `XdpMode`, limits as `RouterLimits`, routes as `(Prefix, RouteTarget)` with a `dev` resolved
//! to its port here, where a name that is no interface can still be reported at its place; the
//! whole as a `RouterSetup` ([`RouterConfig::setup`]). It reads no file: the caller passes the
//! file's text and reads the routes file for it ([`RouterConfig::parse`]).

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use xfwd_dataplane::io::setup::settings::{Given, Layer, Opt, Origins, Source, WorkerOptions};
use xfwd_dataplane::io::{FibSource, RouterLimits, RouterSetup};
use xfwd_dataplane::l3::prefix::{IpPrefix, PrefixAddr};
use xfwd_dataplane::l3::tables::{is_link_local6, RouteTarget4, RouteTarget6};
use xfwd_dataplane::l3::{Prefix, Prefix6, RouteTarget};
use xfwd_dataplane::wire::MacAddr;
use xfwd_dataplane::{PortId, MAX_PORTS};

/// An error in a configuration (or routes) file, with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong, and the fix where there is one.
    pub message: String,
}

impl ConfigError {
    /// `path` could not be read.
    pub fn unreadable(path: &Path, e: &std::io::Error) -> ConfigError {
        ConfigError { path: path.to_owned(), line: 0, col: 0, message: format!("cannot read: {e}") }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.path.display(), self.line, self.col, self.message)
        }
    }
}

/// A position in a file, kept for checks made after parsing (e.g. that an interface exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

pub(crate) fn pos_of(text: &str, offset: usize) -> Pos {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Pos { line, col }
}

/// One interface of the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name.
    pub name: String,
    /// Where the name stands in the file.
    pub name_pos: Pos,
    /// The box's addresses on it, with prefix lengths.
    pub addresses: Vec<(Ipv4Addr, u8)>,
    /// The box's IPv6 addresses on it, with prefix lengths.
    pub addresses6: Vec<(Ipv6Addr, u8)>,
    /// Its link-local address, if given (else the kernel's is read at start).
    pub link_local: Option<Ipv6Addr>,
}

/// A validated router configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterConfig {
    /// The file it came from.
    pub path: PathBuf,
    /// Interfaces, in file order (port order).
    pub interfaces: Vec<Interface>,
    /// Static routes: the file's, then the routes file's. A `dev` is the port of its interface
    /// (its place in [`RouterConfig::interfaces`]), resolved and checked by the parser.
    pub routes: Vec<(Prefix, RouteTarget4)>,
    /// Static IPv6 routes, likewise.
    pub routes6: Vec<(Prefix6, RouteTarget6)>,
    /// Static neighbours.
    pub neighbors: Vec<(Ipv4Addr, MacAddr)>,
    /// Static IPv6 neighbours.
    pub neighbors6: Vec<(Ipv6Addr, MacAddr)>,
    /// The worker options the file gives (`[workers]` and `[aqm]`), each with its place.
    pub options: Layer,
    /// Limits, in the data plane's terms (the file's, or the defaults).
    pub limits: RouterLimits,
    /// Where the routes come from (`[fib]`).
    pub fib: FibSource,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    routes_file: Option<Spanned<String>>,
    #[serde(default)]
    interface: Vec<RawInterface>,
    #[serde(default)]
    route: Vec<RawRoute>,
    #[serde(default)]
    neighbor: Vec<RawNeighbor>,
    #[serde(default)]
    workers: RawOptions,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    aqm: RawOptions,
    #[serde(default)]
    fib: RawFib,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFib {
    source: Option<Spanned<String>>,
    table: Option<Spanned<u32>>,
    buffer: Option<Spanned<usize>>,
}

/// A table of worker options (`[workers]`, `[aqm]`): its keys and values with their places,
/// read by the table of [`xfwd_dataplane::io::setup::settings`].
pub(crate) type RawOptions = std::collections::BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterface {
    name: Spanned<String>,
    addresses: Option<Spanned<Vec<Spanned<String>>>>,
    link_local: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    prefix: Spanned<String>,
    via: Option<Spanned<String>>,
    dev: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNeighbor {
    ip: Spanned<String>,
    mac: Spanned<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    neighbors: Option<Spanned<usize>>,
    glean_queue: Option<Spanned<usize>>,
    icmp_rate: Option<Spanned<u32>>,
    icmp_burst: Option<Spanned<u32>>,
    rfc1812_martians: Option<bool>,
}

pub(crate) struct Ctx<'a> {
    pub(crate) path: &'a Path,
    pub(crate) text: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn err(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        let p = pos_of(self.text, span.start);
        ConfigError { path: self.path.to_owned(), line: p.line, col: p.col, message: message.into() }
    }

    /// `mac` as a station's address (a static neighbour's or FDB entry's): neither a group
    /// address nor all zeroes.
    pub(crate) fn station_mac(&self, mac: &Spanned<String>) -> Result<MacAddr, ConfigError> {
        let parsed: MacAddr = mac
            .get_ref()
            .parse()
            .map_err(|e: xfwd_dataplane::wire::ethernet::ParseMacError| self.err(mac.span(), e.to_string()))?;
        if parsed.is_multicast() || parsed.is_zero() {
            return Err(
                self.err(mac.span(), format!("{parsed} is not a station address (group bit set or all zeroes)"))
            );
        }
        Ok(parsed)
    }
}

/// Splits "addr/len" as an interface address of `family` (`example` shows one), its
/// length from 1 to `max`; what makes it a host address is the caller's.
fn split_addr<A: std::str::FromStr>(s: &str, family: &str, example: &str, max: u8) -> Result<(A, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not an address with a prefix length (write it as {example})"))?;
    let addr = a.parse().map_err(|_| format!("`{a}` is not an {family} address"))?;
    let len: u8 = l.parse().map_err(|_| format!("`{l}` is not a prefix length (1 to {max})"))?;
    if !(1..=max).contains(&len) {
        return Err(format!("prefix length {len} is out of range for an interface address (1 to {max})"));
    }
    Ok((addr, len))
}

/// Parses "a.b.c.d/len" as an interface address (host bits expected).
fn parse_addr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (addr, len): (Ipv4Addr, u8) = split_addr(s, "IPv4", "192.168.10.2/24", 32)?;
    let first = addr.octets()[0];
    if first == 0 || first == 127 || first >= 224 {
        return Err(format!("{addr} cannot be a router address (0/8, 127/8, multicast and 240/4 are never routed)"));
    }
    let subnet = Prefix::truncate(addr, len);
    if len < 31 && (addr == subnet.addr() || addr == subnet.broadcast()) {
        return Err(format!(
            "{addr} is the {} address of {subnet}, not a host address",
            if addr == subnet.addr() { "network" } else { "broadcast" }
        ));
    }
    Ok((addr, len))
}

fn parse_ip(s: &str) -> Result<Ipv4Addr, String> {
    s.parse().map_err(|_| format!("`{s}` is not an IPv4 address (write it as 192.168.30.2)"))
}

/// Whether `s` is written as IPv6 (it has a colon; no IPv4 address or prefix has one).
fn is_v6(s: &str) -> bool {
    s.contains(':')
}

/// Parses "addr/len" as an IPv6 interface address (global or unique local; link-local ones
/// go in `link_local`).
fn parse_addr6(s: &str) -> Result<(Ipv6Addr, u8), String> {
    let (addr, len): (Ipv6Addr, u8) = split_addr(s, "IPv6", "2001:db8:0:10::2/64", 128)?;
    if addr.is_multicast() || addr.is_unspecified() || addr.is_loopback() || addr.to_ipv4_mapped().is_some() {
        return Err(format!("{addr} cannot be a router address (multicast, ::, ::1 and IPv4-mapped are never routed)"));
    }
    if is_link_local6(&addr) {
        return Err(format!(
            "{addr} is link-local: the port has one already (the kernel's); to choose it, write link_local = \"{addr}\""
        ));
    }
    if Prefix6::truncate(addr, len).addr() == addr && len < 127 {
        return Err(format!("{addr} is the subnet-router anycast address of {addr}/{len}, not a host address"));
    }
    Ok((addr, len))
}

fn parse_ip6(s: &str) -> Result<Ipv6Addr, String> {
    s.parse().map_err(|_| format!("`{s}` is not an IPv6 address (write it as 2001:db8:0:30::2)"))
}

impl RouterConfig {
    /// Validates `text`, the configuration file `path`, and the routes file it names, whose
    /// text `read_routes` gives for its path (a relative one resolved beside `path`). Reads
    /// nothing itself: the caller does, and `path` only names the files in errors.
    pub fn parse(
        path: &Path,
        text: &str,
        read_routes: impl FnOnce(&Path) -> std::io::Result<String>,
    ) -> Result<RouterConfig, ConfigError> {
        let cx = Ctx { path, text };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().replace('\n', " ");
            cx.err(span, msg)
        })?;
        if raw.interface.is_empty() {
            return Err(ConfigError {
                path: path.to_owned(),
                line: 0,
                col: 0,
                message: "no [[interface]]: a router needs at least one (see config/README.md)".into(),
            });
        }

        let fib = fib_of(&cx, &raw)?;
        let (interfaces, subnets, subnets6) = interfaces_of(&cx, &raw, fib != FibSource::Config)?;
        let nets = Nets { interfaces: &interfaces, subnets: &subnets, subnets6: &subnets6 };
        let mut r = routes_of(&cx, &raw, nets)?;
        let (neighbors, neighbors6) = neighbors_of(&cx, &raw, &subnets, &subnets6)?;
        let options = options_of(&cx, &raw)?;
        let limits = limits_of(&cx, &raw)?;

        if let Some(rf) = &raw.routes_file {
            let file = path.parent().unwrap_or(Path::new(".")).join(rf.get_ref());
            let text =
                read_routes(&file).map_err(|e| cx.err(rf.span(), format!("routes_file {}: {e}", file.display())))?;
            parse_routes(&file, &text, nets, &mut r)?;
        }

        Ok(RouterConfig {
            path: path.to_owned(),
            fib,
            interfaces,
            routes: r.v4,
            routes6: r.v6,
            neighbors,
            neighbors6,
            options,
            limits,
        })
    }

    /// The ports, in port order: the interfaces' names.
    pub fn ports(&self) -> Vec<String> {
        self.interfaces.iter().map(|i| i.name.clone()).collect()
    }

    /// The name of `port`'s interface.
    ///
    /// # Panics
    ///
    /// If `port` is not one of [`RouterConfig::interfaces`]; the ports of the routes the parser
    /// gives always are.
    pub fn port_name(&self, port: PortId) -> &str {
        &self.interfaces[port.index()].name
    }

    /// The router's part of what the data plane starts with: addresses by port, routes,
    /// neighbours and limits.
    pub fn setup(&self) -> RouterSetup {
        RouterSetup {
            addresses: self.interfaces.iter().map(|i| i.addresses.clone()).collect(),
            addresses6: self.interfaces.iter().map(|i| i.addresses6.clone()).collect(),
            link_locals: self.interfaces.iter().map(|i| i.link_local).collect(),
            routes: self.routes.clone(),
            routes6: self.routes6.clone(),
            neighbors: self.neighbors.clone(),
            neighbors6: self.neighbors6.clone(),
            limits: self.limits,
            fib: self.fib,
        }
    }

    /// Checks that every interface exists (`exists(name)`), reporting the first that does not
    /// at its place in the file.
    pub fn check_interfaces(&self, exists: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        for i in &self.interfaces {
            if !exists(&i.name) {
                return Err(ConfigError {
                    path: self.path.clone(),
                    line: i.name_pos.line,
                    col: i.name_pos.col,
                    message: format!(
                        "interface {} does not exist in this network namespace (see `ip link show`)",
                        i.name
                    ),
                });
            }
        }
        Ok(())
    }

    /// What in `other` a reload cannot apply to a router started from `self` and running as
    /// `running` says: changed interfaces or addresses, `[fib]`, or a worker or queue
    /// management setting whose value in `other` (its default where `other` leaves it out)
    /// is not the one running. Each such setting is named, with both values. A setting the
    /// command line fixed (`None` in `running`) is not compared: the command line wins over
    /// the file at start and would again. `None`: the reload may go ahead.
    pub fn needs_restart(&self, other: &RouterConfig, running: &Running) -> Option<String> {
        let names = |c: &RouterConfig| {
            c.interfaces
                .iter()
                .map(|i| (i.name.clone(), i.addresses.clone(), i.addresses6.clone(), i.link_local))
                .collect::<Vec<_>>()
        };
        if names(self) != names(other) {
            return Some("interfaces or their addresses changed".into());
        }
        if self.fib != other.fib {
            return Some("[fib] changed".into());
        }
        let mut changed = Vec::new();
        let mut check = |key: &str, file: Option<String>, run: Option<String>| {
            if let (Some(file), Some(run)) = (file, run) {
                if file != run {
                    changed.push(format!("{key} = {file} (running: {run})"));
                }
            }
        };
        let defaults = WorkerOptions::default();
        for &opt in Opt::ALL {
            if *running.origins.of(opt) == Source::Flag {
                continue;
            }
            // Left out, an automatic value (queues, cores) is what xfwd chose at start:
            // unchanged only if it was left out then too.
            let (given, was_given) = (other.options.has(opt), self.options.has(opt));
            if !given && !was_given && defaults.show(opt) == "(automatic)" {
                continue;
            }
            let file = WorkerOptions::merge(&[&other.options]).0.show(opt);
            let (table, key) = opt.key().split_once('.').unwrap_or(("", opt.key()));
            check(&format!("[{table}] {key}"), Some(file), Some(running.options.show(opt)));
        }
        (!changed.is_empty()).then(|| format!("{} cannot change while xfwd runs", changed.join(", ")))
    }
}

/// What a running router's worker options are, for [`RouterConfig::needs_restart`]: the
/// values it runs with (the queue count and cores it chose where they were left out) and where
/// each came from (a flag's is not the file's to change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Running {
    /// The values.
    pub options: WorkerOptions,
    /// Where each came from.
    pub origins: Origins,
}

type Subnets = Vec<(Prefix, Ipv4Addr, String)>;
type Subnets6 = Vec<(Prefix6, Ipv6Addr, String)>;

/// The static routes read so far, of both families, and the prefixes seen (a prefix may be
/// given once, in the file or the routes file).
#[derive(Default)]
struct Routes {
    v4: Vec<(Prefix, RouteTarget4)>,
    v6: Vec<(Prefix6, RouteTarget6)>,
    seen: HashSet<Prefix>,
    seen6: HashSet<Prefix6>,
}

/// The part of a route a fault is in, for its position in the caller's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoutePart {
    Prefix,
    Via,
    Dev,
}

/// The interfaces a route is checked against.
#[derive(Clone, Copy)]
struct Nets<'a> {
    interfaces: &'a [Interface],
    subnets: &'a Subnets,
    subnets6: &'a Subnets6,
}

impl Routes {
    /// Checks the route to `prefix` through `via` and/or out of `dev` and adds it, for a
    /// `[[route]]` table and a routes file alike: a prefix without host bits, not a connected
    /// subnet's own, not given before; for IPv4, a gateway on a connected subnet that is a host
    /// address and not the box's, or `dev` alone, or an IPv6 gateway (RFC 5549) checked as an
    /// IPv6 route's is ([`target6`]). `needs` is the caller's message for a route with neither
    /// `via` nor `dev` (each text writes them its own way); `twice` ends the message for a
    /// prefix given before.
    fn add(
        &mut self,
        nets: Nets<'_>,
        (prefix, via, dev): (&str, Option<&str>, Option<&str>),
        needs: &dyn Fn() -> String,
        twice: &str,
    ) -> Result<(), (RoutePart, String)> {
        let (via, dev) = (via.map(str::trim), dev.map(str::trim));
        let on = |(on_dev, m): (bool, String)| (if on_dev { RoutePart::Dev } else { RoutePart::Via }, m);
        let at_prefix = |m: String| (RoutePart::Prefix, m);
        if is_v6(prefix) {
            let prefix: Prefix6 = prefix.parse().map_err(|e| at_prefix(format!("route prefix {e}")))?;
            if via.is_none() && dev.is_none() {
                return Err(at_prefix(needs()));
            }
            let target = target6(nets.interfaces, nets.subnets6, via, dev).map_err(on)?;
            if let Some(m) = shadows_connected6(nets.subnets6, prefix) {
                return Err(at_prefix(m));
            }
            if !self.seen6.insert(prefix) {
                return Err(at_prefix(format!("route {prefix} is given twice{twice}")));
            }
            self.v6.push((prefix, target));
            return Ok(());
        }
        let prefix: Prefix = prefix.parse().map_err(|e| at_prefix(format!("route prefix {e}")))?;
        let target = match (via, dev) {
            (Some(v), _) if is_v6(v) => match target6(nets.interfaces, nets.subnets6, via, dev).map_err(on)? {
                RouteTarget6::Via { gw, dev } => RouteTarget::Via { gw: IpAddr::V6(gw), dev },
                RouteTarget6::Dev(port) => RouteTarget::Dev(port),
            },
            (Some(v), None) => {
                let via = |m: String| (RoutePart::Via, m);
                let gw = parse_ip(v).map_err(via)?;
                if !nets.subnets.iter().any(|(s, _, _)| s.contains(gw)) {
                    return Err(via(format!(
                        "next hop {gw} is not on any connected subnet; use an address inside one of the interfaces' subnets"
                    )));
                }
                if let Some(why) = not_a_host(nets.subnets, gw) {
                    return Err(via(format!("next hop {gw} {why}")));
                }
                RouteTarget::via(gw)
            }
            (None, Some(d)) => RouteTarget::Dev(port_of(nets.interfaces, d).map_err(|m| (RoutePart::Dev, m))?),
            (Some(_), Some(_)) => {
                return Err((
                    RoutePart::Dev,
                    "an IPv4 route takes `via` or `dev`, not both (only an IPv6 `via` goes with a `dev`)".into(),
                ))
            }
            (None, None) => return Err(at_prefix(needs())),
        };
        if let Some(m) = shadows_connected(nets.subnets, prefix) {
            return Err(at_prefix(m));
        }
        if !self.seen.insert(prefix) {
            return Err(at_prefix(format!("route {prefix} is given twice{twice}")));
        }
        self.v4.push((prefix, target));
        Ok(())
    }
}

/// An IPv6 route's target from its `via` (and `dev`, which a link-local `via` needs) or its
/// `dev` alone; `dev` is an interface name, resolved to its port here.
fn target6(
    interfaces: &[Interface],
    subnets6: &Subnets6,
    via: Option<&str>,
    dev: Option<&str>,
) -> Result<RouteTarget6, (bool, String)> {
    // The error's bool: true when it is the `dev` that is wrong.
    let port = dev.map(|d| port_of(interfaces, d.trim()).map_err(|m| (true, m))).transpose()?;
    let Some(via) = via else {
        return port.map(RouteTarget6::Dev).ok_or((false, "needs `via` or `dev`".into()));
    };
    let gw = parse_ip6(via.trim()).map_err(|m| (false, m))?;
    if is_link_local6(&gw) {
        if port.is_none() {
            return Err((false, format!("next hop {gw} is link-local: say which interface it is on with `dev`")));
        }
        return Ok(RouteTarget6::Via { gw, dev: port });
    }
    let Some((_, _, on)) = subnets6.iter().filter(|(s, _, _)| s.contains(gw)).max_by_key(|(s, _, _)| s.prefix_len())
    else {
        return Err((false, format!("next hop {gw} is not on any connected IPv6 prefix; use an address inside one of the interfaces' prefixes, or a link-local one with `dev`")));
    };
    if subnets6.iter().any(|(_, a, _)| *a == gw) {
        return Err((false, format!("next hop {gw} is the box's own address")));
    }
    if let (Some(p), Some(d)) = (port, dev) {
        if interfaces[p.index()].name != *on {
            return Err((true, format!("next hop {gw} is on {on}'s prefix, not on {}", d.trim())));
        }
    }
    Ok(RouteTarget6::Via { gw, dev: port })
}

/// Gives interface `name` the subnet (IPv4) or prefix (IPv6, `noun`) of `addr/len`, or says
/// whose address's it repeats or overlaps: each belongs to one interface, once.
fn claim<A: PrefixAddr>(
    subnets: &mut Vec<(IpPrefix<A>, A, String)>,
    (addr, len): (A, u8),
    name: &str,
    noun: &str,
) -> Result<(), String> {
    let subnet = IpPrefix::truncate(addr, len);
    if let Some((other, oaddr, oname)) = subnets.iter().find(|(s, _, _)| s.overlaps(&subnet)) {
        let what = if *oaddr == addr { "repeats" } else { "overlaps" };
        return Err(format!(
            "{addr}/{len} {what} {oaddr}/{} on {oname}; each {noun} belongs to one interface, once",
            other.prefix_len()
        ));
    }
    subnets.push((subnet, addr, name.to_owned()));
    Ok(())
}

/// The `[[interface]]` tables: each interface with its addresses, and every connected subnet
/// (IPv4) and prefix (IPv6) with the address and interface it belongs to.
fn interfaces_of(cx: &Ctx, raw: &RawConfig, kernel: bool) -> Result<(Vec<Interface>, Subnets, Subnets6), ConfigError> {
    let text = cx.text;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut subnets: Subnets = Vec::new();
    let mut subnets6: Subnets6 = Vec::new();
    for ri in &raw.interface {
        let name = ri.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(cx.err(ri.name.span(), "interface name is empty"));
        }
        if interfaces.iter().any(|i| i.name == name) {
            return Err(cx.err(
                ri.name.span(),
                format!("interface {name} is configured twice; merge its addresses into one [[interface]]"),
            ));
        }
        let p = pos_of(text, ri.name.span().start);
        if kernel {
            // The kernel's addresses are used: the file names the ports only.
            if let Some(a) = &ri.addresses {
                return Err(cx.err(
                    a.span(),
                    format!("with [fib] source = \"kernel\" the addresses are the kernel's: remove `addresses` here and give them to the interface (ip addr add ... dev {name})"),
                ));
            }
            if let Some(ll) = &ri.link_local {
                return Err(cx.err(
                    ll.span(),
                    "with [fib] source = \"kernel\" the link-local address is the kernel's: remove `link_local`",
                ));
            }
            interfaces.push(Interface {
                name,
                name_pos: p,
                addresses: Vec::new(),
                addresses6: Vec::new(),
                link_local: None,
            });
            continue;
        }
        let Some(raw_addresses) = &ri.addresses else {
            return Err(cx.err(
                ri.name.span(),
                format!("interface {name} has no addresses; give it at least one, e.g. addresses = [\"192.168.10.2/24\"] (or take them from the kernel: [fib] source = \"kernel\")"),
            ));
        };
        if raw_addresses.get_ref().is_empty() {
            return Err(cx.err(
                raw_addresses.span(),
                format!("interface {name} has no addresses; give it at least one, e.g. [\"192.168.10.2/24\"]"),
            ));
        }
        let mut addresses = Vec::new();
        let mut addresses6 = Vec::new();
        for a in raw_addresses.get_ref() {
            if is_v6(a.get_ref()) {
                let (addr, len) = parse_addr6(a.get_ref()).map_err(|m| cx.err(a.span(), m))?;
                claim(&mut subnets6, (addr, len), &name, "prefix").map_err(|m| cx.err(a.span(), m))?;
                addresses6.push((addr, len));
                continue;
            }
            let (addr, len) = parse_addr(a.get_ref()).map_err(|m| cx.err(a.span(), m))?;
            claim(&mut subnets, (addr, len), &name, "subnet").map_err(|m| cx.err(a.span(), m))?;
            addresses.push((addr, len));
        }
        let link_local = match &ri.link_local {
            None => None,
            Some(ll) => {
                let a = parse_ip6(ll.get_ref().trim()).map_err(|m| cx.err(ll.span(), m))?;
                if !is_link_local6(&a) {
                    return Err(cx.err(ll.span(), format!("link_local {a} is not in fe80::/10")));
                }
                Some(a)
            }
        };
        interfaces.push(Interface { name, name_pos: p, addresses, addresses6, link_local });
    }
    Ok((interfaces, subnets, subnets6))
}

/// The `[[route]]` tables, with the prefixes seen (a routes file may not repeat them).
fn routes_of(cx: &Ctx, raw: &RawConfig, nets: Nets<'_>) -> Result<Routes, ConfigError> {
    let mut r = Routes::default();
    for rr in &raw.route {
        let prefix = rr.prefix.get_ref().as_str();
        let via = rr.via.as_ref().map(|v| v.get_ref().as_str());
        let dev = rr.dev.as_ref().map(|d| d.get_ref().as_str());
        let needs = || format!("route {} needs `via = \"ADDRESS\"` or `dev = \"INTERFACE\"`", prefix.trim());
        r.add(nets, (prefix, via, dev), &needs, "").map_err(|(part, m)| {
            let span = match (part, &rr.via, &rr.dev) {
                (RoutePart::Via, Some(v), _) => v.span(),
                (RoutePart::Dev, _, Some(d)) => d.span(),
                _ => rr.prefix.span(),
            };
            cx.err(span, m)
        })?;
    }
    Ok(r)
}

/// The `[[neighbor]]` tables: static neighbours on connected subnets or prefixes.
#[allow(clippy::type_complexity, reason = "one list per family")]
fn neighbors_of(
    cx: &Ctx,
    raw: &RawConfig,
    subnets: &Subnets,
    subnets6: &Subnets6,
) -> Result<(Vec<(Ipv4Addr, MacAddr)>, Vec<(Ipv6Addr, MacAddr)>), ConfigError> {
    let connected = |ip: Ipv4Addr| subnets.iter().any(|(s, _, _)| s.contains(ip));
    let not_a_host = |ip: Ipv4Addr| not_a_host(subnets, ip);
    let mut neighbors: Vec<(Ipv4Addr, MacAddr)> = Vec::new();
    let mut neighbors6: Vec<(Ipv6Addr, MacAddr)> = Vec::new();
    for rn in &raw.neighbor {
        let mac = cx.station_mac(&rn.mac)?;
        if is_v6(rn.ip.get_ref()) {
            let ip = parse_ip6(rn.ip.get_ref()).map_err(|m| cx.err(rn.ip.span(), m))?;
            if is_link_local6(&ip) {
                return Err(cx.err(
                    rn.ip.span(),
                    format!("neighbor {ip} is link-local; static neighbours must be on a configured prefix (neighbour discovery resolves link-local ones)"),
                ));
            }
            if !subnets6.iter().any(|(s, _, _)| s.contains(ip)) {
                return Err(cx.err(rn.ip.span(), format!("neighbor {ip} is not on any connected IPv6 prefix")));
            }
            if let Some((_, _, name)) = subnets6.iter().find(|(_, a, _)| *a == ip) {
                return Err(cx.err(rn.ip.span(), format!("neighbor {ip} is the box's own address on {name}")));
            }
            if neighbors6.iter().any(|(n, _)| *n == ip) {
                return Err(cx.err(rn.ip.span(), format!("neighbor {ip} is given twice")));
            }
            neighbors6.push((ip, mac));
            continue;
        }
        let ip = parse_ip(rn.ip.get_ref()).map_err(|m| cx.err(rn.ip.span(), m))?;
        if !connected(ip) {
            return Err(cx.err(rn.ip.span(), format!("neighbor {ip} is not on any connected subnet")));
        }
        if let Some(why) = not_a_host(ip) {
            return Err(cx.err(rn.ip.span(), format!("neighbor {ip} {why}")));
        }
        if neighbors.iter().any(|(n, _)| *n == ip) {
            return Err(cx.err(rn.ip.span(), format!("neighbor {ip} is given twice")));
        }
        neighbors.push((ip, mac));
    }
    Ok((neighbors, neighbors6))
}

/// The `[workers]` table.
/// The notification socket's default receive buffer (bytes): room for a daemon's burst of a
/// few hundred thousand changes between two reads.
pub const DEFAULT_FIB_BUFFER: usize = 64 << 20;

/// `[fib]`: where the routes come from; with the kernel's, the file holds no addresses,
/// routes or neighbours (each refused where it stands, saying where it belongs).
fn fib_of(cx: &Ctx, raw: &RawConfig) -> Result<FibSource, ConfigError> {
    let kernel = match &raw.fib.source {
        None => false,
        Some(s) => match s.get_ref().as_str() {
            "config" => false,
            "kernel" => true,
            other => {
                return Err(cx.err(s.span(), format!("[fib] source = \"{other}\": use \"config\" (this file's routes) or \"kernel\" (the kernel's, as routing daemons install them)")))
            }
        },
    };
    if !kernel {
        if let Some(t) = &raw.fib.table {
            return Err(cx.err(t.span(), "[fib] table names a kernel routing table: it needs source = \"kernel\""));
        }
        if let Some(b) = &raw.fib.buffer {
            return Err(
                cx.err(b.span(), "[fib] buffer sizes the kernel's notification socket: it needs source = \"kernel\"")
            );
        }
        return Ok(FibSource::Config);
    }
    let buffer = match &raw.fib.buffer {
        None => DEFAULT_FIB_BUFFER,
        Some(b) if *b.get_ref() < 4096 => {
            return Err(cx.err(
                b.span(),
                format!("[fib] buffer = {}: give at least 4096 bytes (default {DEFAULT_FIB_BUFFER})", b.get_ref()),
            ))
        }
        Some(b) => *b.get_ref(),
    };
    let table = match &raw.fib.table {
        None => 254,
        Some(t) => match *t.get_ref() {
            0 | 255 => {
                return Err(cx.err(
                    t.span(),
                    format!(
                        "[fib] table = {}: give a routing table to mirror besides the local one (254 is main)",
                        t.get_ref()
                    ),
                ))
            }
            n => n,
        },
    };
    const WHY: &str = "with [fib] source = \"kernel\" the kernel's";
    if let Some(r) = raw.route.first() {
        return Err(cx.err(r.prefix.span(), format!("{WHY} routes are used: add this one to the kernel (ip route add ...) or to the routing daemon, and remove the [[route]]")));
    }
    if let Some(rf) = &raw.routes_file {
        return Err(cx.err(rf.span(), format!("{WHY} routes are used: load these into the kernel (ip -batch) or the routing daemon, and remove routes_file")));
    }
    if let Some(n) = raw.neighbor.first() {
        return Err(cx.err(n.ip.span(), format!("{WHY} neighbour table is used: add this one to it (ip neigh replace ... lladdr ... nud permanent) and remove the [[neighbor]]")));
    }
    Ok(FibSource::Kernel { table, buffer })
}

/// The worker options of `[workers]` and `[aqm]`, each read by its row of the options table.
/// Checked together ([`WorkerOptions::check`]) once merged with the command line's, by the
/// caller: a flag may make right what the file alone would not.
fn options_of(cx: &Ctx, raw: &RawConfig) -> Result<Layer, ConfigError> {
    options_in(cx, &raw.workers, &raw.aqm)
}

/// The worker options of a file's `[workers]` and `[aqm]` tables (the router's, the bridge's).
pub(crate) fn options_in(cx: &Ctx, workers: &RawOptions, aqm: &RawOptions) -> Result<Layer, ConfigError> {
    let mut layer = Layer::default();
    for (table, entries) in [("workers", workers), ("aqm", aqm)] {
        for (key, value) in entries {
            let name = format!("{table}.{}", key.get_ref());
            let Some(opt) = Opt::by_key(&name) else {
                let known: Vec<&str> =
                    Opt::ALL.iter().filter_map(|o| o.key().strip_prefix(table)?.strip_prefix('.')).collect();
                return Err(cx.err(
                    key.span(),
                    format!("unknown field `{}`, expected one of `{}`", key.get_ref(), known.join("`, `")),
                ));
            };
            let p = pos_of(cx.text, value.span().start);
            let source = Source::File { path: cx.path.to_owned(), line: p.line, col: p.col };
            layer
                .set_from_file(opt, &given(value.get_ref()), source)
                .map_err(|m| cx.err(value.span(), format!("{name} {m}")))?;
        }
    }
    Ok(layer)
}

/// A TOML value as the options table reads it.
fn given(v: &toml::Value) -> Given<'_> {
    match v {
        toml::Value::String(s) => Given::Text(s),
        toml::Value::Integer(i) => Given::Int(*i),
        toml::Value::Boolean(b) => Given::Bool(*b),
        toml::Value::Array(a) => a
            .iter()
            .map(toml::Value::as_integer)
            .collect::<Option<Vec<_>>>()
            .map_or(Given::Other("a list of something else than whole numbers"), Given::Ints),
        toml::Value::Float(_) => Given::Other("a fraction"),
        toml::Value::Datetime(_) => Given::Other("a date"),
        toml::Value::Table(_) => Given::Other("a table"),
    }
}

/// The `[limits]` table, with the data plane's defaults for what it leaves out.
fn limits_of(cx: &Ctx, raw: &RawConfig) -> Result<RouterLimits, ConfigError> {
    let d = RouterLimits::default();
    let l = &raw.limits;
    for (v, name, max) in [(&l.neighbors, "neighbors", 1usize << 22), (&l.glean_queue, "glean_queue", 4096)] {
        if let Some(v) = v {
            if *v.get_ref() > max {
                return Err(cx.err(v.span(), format!("limits.{name} is at most {max}")));
            }
        }
    }
    if let Some(r) = &l.icmp_rate {
        if *r.get_ref() > 1_000_000 {
            return Err(cx.err(r.span(), "limits.icmp_rate is at most 1000000 per second (0: unlimited)"));
        }
    }
    if let Some(b) = &l.icmp_burst {
        if *b.get_ref() > 100_000 {
            return Err(cx.err(b.span(), "limits.icmp_burst is at most 100000"));
        }
    }
    for (v, name) in [(&l.neighbors, "neighbors"), (&l.glean_queue, "glean_queue")] {
        if let Some(v) = v {
            if *v.get_ref() == 0 {
                return Err(cx.err(v.span(), format!("limits.{name} must be at least 1")));
            }
        }
    }
    if let Some(b) = &l.icmp_burst {
        if *b.get_ref() == 0 {
            return Err(cx.err(b.span(), "limits.icmp_burst must be at least 1"));
        }
    }
    let limits = RouterLimits {
        neighbors: l.neighbors.as_ref().map_or(d.neighbors, |v| *v.get_ref()),
        glean_queue: l.glean_queue.as_ref().map_or(d.glean_queue, |v| *v.get_ref()),
        icmp_rate: l.icmp_rate.as_ref().map_or(d.icmp_rate, |v| *v.get_ref()),
        icmp_burst: l.icmp_burst.as_ref().map_or(d.icmp_burst, |v| *v.get_ref()),
        rfc1812_martians: l.rfc1812_martians.unwrap_or(d.rfc1812_martians),
    };
    Ok(limits)
}

/// The port of the interface `name`: its place in the file, which is its place in the
/// forwarder's port list.
fn port_of(interfaces: &[Interface], name: &str) -> Result<PortId, String> {
    let i = interfaces
        .iter()
        .position(|i| i.name == name)
        .ok_or_else(|| format!("dev {name} is not a configured [[interface]]"))?;
    u8::try_from(i).map(PortId).map_err(|_| {
        format!(
            "dev {name} is interface {} of the file, and a route's dev must be one of the first {}; xfwd drives at most {MAX_PORTS} ports",
            i + 1,
            usize::from(u8::MAX) + 1
        )
    })
}

/// Why `ip` cannot be a neighbour: one of the box's addresses, or a subnet's network or
/// broadcast address.
/// Why a static route to `prefix` cannot be: it is an interface's connected subnet, which the
/// route would hide (the hosts on it would go unreachable); the kernel refuses such a route too
/// ("File exists").
fn shadows_connected(subnets: &[(Prefix, Ipv4Addr, String)], prefix: Prefix) -> Option<String> {
    let (s, addr, name) = subnets.iter().find(|(s, _, _)| *s == prefix)?;
    Some(format!(
        "route {prefix} is the connected subnet of {name} ({addr}/{}), which it would hide; remove it (the kernel refuses it too: File exists), or give a longer prefix",
        s.prefix_len()
    ))
}

/// [`shadows_connected`] for IPv6.
fn shadows_connected6(subnets6: &Subnets6, prefix: Prefix6) -> Option<String> {
    let (s, addr, name) = subnets6.iter().find(|(s, _, _)| *s == prefix)?;
    Some(format!(
        "route {prefix} is the connected prefix of {name} ({addr}/{}), which it would hide; remove it (the kernel refuses it too: File exists), or give a longer prefix",
        s.prefix_len()
    ))
}

fn not_a_host(subnets: &[(Prefix, Ipv4Addr, String)], ip: Ipv4Addr) -> Option<String> {
    for (s, addr, name) in subnets {
        if *addr == ip {
            return Some(format!("is the box's own address on {name}"));
        }
        if s.prefix_len() < 31 && s.contains(ip) && (ip == s.addr() || ip == s.broadcast()) {
            return Some(format!("is the {} address of {s}", if ip == s.addr() { "network" } else { "broadcast" }));
        }
    }
    None
}

/// The `via ADDRESS` and `dev INTERFACE` of a routes-file line, each at most once, in either
/// order; else the word where the line stops making sense.
fn via_and_dev<'a>(mut words: impl Iterator<Item = &'a str>) -> Result<(Option<&'a str>, Option<&'a str>), &'a str> {
    let (mut via, mut dev) = (None, None);
    while let Some(w) = words.next() {
        match (w, words.next()) {
            ("via", Some(a)) if via.is_none() => via = Some(a),
            ("dev", Some(d)) if dev.is_none() => dev = Some(d),
            _ => return Err(w),
        }
    }
    Ok((via, dev))
}

/// Parses a routes file: one `PREFIX via ADDRESS` or `PREFIX dev INTERFACE` per line (a route
/// through an IPv6 gateway may name both: `PREFIX via fe80::1 dev eth4`, for an IPv6 prefix or
/// an IPv4 one, RFC 5549); `#` starts a comment. Built for a
/// full table: a million lines load in about a second.
fn parse_routes(path: &Path, text: &str, nets: Nets<'_>, r: &mut Routes) -> Result<(), ConfigError> {
    let err = |line: usize, col: usize, message: String| ConfigError { path: path.to_owned(), line, col, message };
    for (n, raw_line) in text.lines().enumerate() {
        let line = raw_line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(prefix) = words.next() else { continue };
        let col_of = |w: &str| w.as_ptr() as usize - raw_line.as_ptr() as usize + 1;
        let expected = || {
            if is_v6(prefix) {
                format!("expected `{prefix} via ADDRESS [dev INTERFACE]` or `{prefix} dev INTERFACE`")
            } else {
                format!("expected `{prefix} via ADDRESS` or `{prefix} dev INTERFACE` (or, through an IPv6 gateway, `{prefix} via IPV6-ADDRESS [dev INTERFACE]`)")
            }
        };
        let (via, dev) = via_and_dev(words).map_err(|w| match w {
            "via" | "dev" => err(n + 1, col_of(w), expected()),
            other if is_v6(prefix) => err(n + 1, col_of(other), expected()),
            other => err(n + 1, col_of(other), format!("`{other}`: expected `via` or `dev`")),
        })?;
        r.add(nets, (prefix, via, dev), &expected, " (here or in the configuration file)").map_err(|(part, m)| {
            let col = match part {
                RoutePart::Prefix => col_of(prefix),
                RoutePart::Via => via.map_or(1, col_of),
                RoutePart::Dev => dev.map_or(1, col_of),
            };
            err(n + 1, col, m)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use xfwd_dataplane::io::setup::settings::{Cores, Refusal};
    use xfwd_dataplane::io::{AqmMode, PollMode, XdpMode};

    const GOOD: &str = r#"
[[interface]]
name = "eth5"
addresses = ["192.168.10.2/24", "192.168.11.2/24"]

[[interface]]
name = "eth4"
addresses = ["192.168.30.1/24", "192.168.31.1/24"]

[[route]]
prefix = "10.0.0.0/8"
via = "192.168.30.2"

[[route]]
prefix = "172.16.0.0/12"
dev = "eth5"

[[neighbor]]
ip = "192.168.30.2"
mac = "02:00:00:00:00:01"

[workers]
queues = 2
cores = [0, 1]
poll = "busy"
xdp_mode = "native"

[limits]
neighbors = 1024
glean_queue = 8
icmp_rate = 100
icmp_burst = 10

[aqm]
mode = "codel"
target = "2ms"
interval = "50ms"
"#;

    /// Parses a file that names no routes file.
    fn parse(text: &str) -> Result<RouterConfig, ConfigError> {
        RouterConfig::parse(Path::new("router.toml"), text, |p| {
            panic!("no routes file here, asked for {}", p.display())
        })
    }

    #[test]
    fn every_key_is_accepted() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.interfaces.len(), 2);
        assert_eq!(c.interfaces[0].addresses[1], ("192.168.11.2".parse().unwrap(), 24));
        assert_eq!(c.interfaces[1].name_pos, Pos { line: 7, col: 8 });
        assert_eq!(
            c.routes[0],
            ("10.0.0.0/8".parse().unwrap(), RouteTarget::via("192.168.30.2".parse::<Ipv4Addr>().unwrap()))
        );
        assert_eq!(c.routes[1], ("172.16.0.0/12".parse().unwrap(), RouteTarget::Dev(PortId(0))));
        assert_eq!(c.neighbors, vec![("192.168.30.2".parse().unwrap(), "02:00:00:00:00:01".parse().unwrap())]);
        let (o, from) = WorkerOptions::merge(&[&c.options]);
        assert_eq!(
            (o.queues, o.cores, o.poll, o.xdp_mode),
            (Some(2), Some(Cores::List(vec![0, 1])), PollMode::Busy, XdpMode::Native)
        );
        assert!(matches!(from.of(Opt::Poll), Source::File { .. }) && *from.of(Opt::Sockets) == Source::Default);
        assert_eq!(
            c.limits,
            RouterLimits { neighbors: 1024, glean_queue: 8, icmp_rate: 100, icmp_burst: 10, rfc1812_martians: false }
        );
        let ms = std::time::Duration::from_millis;
        assert_eq!((o.aqm, o.aqm_target, o.aqm_interval), (AqmMode::Codel, ms(2), ms(50)));
    }

    #[test]
    fn aqm_settings_are_checked_where_they_stand() {
        let base = "[[interface]]\nname = \"eth4\"\naddresses = [\"198.18.10.2/24\"]\n";
        let c = parse(&format!("{base}[aqm]\nmode = \"off\"\n")).unwrap();
        assert_eq!(WorkerOptions::merge(&[&c.options]).0.aqm, AqmMode::Off);
        assert_eq!(parse(base).unwrap().options, Layer::default(), "no table: the command line's or the defaults");
        // Together, the values are checked once merged with the command line's; the refusal
        // names the options, and where the file gave them.
        let c = parse(&format!("{base}[aqm]\ntarget = \"200ms\"\n")).unwrap();
        let (o, from) = WorkerOptions::merge(&[&c.options]);
        let ms = std::time::Duration::from_millis;
        assert_eq!(o.check(), Err(Refusal::TargetNotBelowInterval { target: ms(200), interval: ms(100) }));
        assert_eq!(*from.of(Opt::AqmTarget), Source::File { path: "router.toml".into(), line: 5, col: 10 });
        assert!(
            error_of(&format!("{base}[aqm]\ninterval = \"soon\"\n")).contains("aqm.interval `soon` is not a duration")
        );
        assert!(error_of(&format!("{base}[aqm]\nmode = \"red\"\n"))
            .contains("aqm.mode `red` is not one of fq-codel, codel, off"));
        assert!(error_of(&format!("{base}[aqm]\ncolour = 1\n"))
            .contains("5:1: unknown field `colour`, expected one of `mode`, `target`, `interval`"));
    }

    /// What a router started from `c` alone runs with.
    fn running_of(c: &RouterConfig) -> Running {
        let (options, origins) = WorkerOptions::merge(&[&c.options]);
        Running { options, origins }
    }

    fn error_of(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    const IFACES: &str = "[[interface]]\nname = \"eth5\"\naddresses = [\"192.168.10.2/24\"]\n";

    #[test]
    fn errors_name_line_column_and_fix() {
        let e = error_of(&format!("{IFACES}[[route]]\nprefix = \"10.0.0.1/8\"\nvia = \"192.168.10.1\"\n"));
        assert_eq!(e, "router.toml:5:10: route prefix 10.0.0.1/8 has host bits set; did you mean 10.0.0.0/8?");
        let e = error_of(&format!("{IFACES}[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"192.168.99.1\"\n"));
        assert!(e.starts_with("router.toml:6:7: next hop 192.168.99.1 is not on any connected subnet"), "{e}");
        let e = error_of(&format!("{IFACES}[[route]]\nprefix = \"10.0.0.0/8\"\n"));
        assert!(e.starts_with("router.toml:5:10: route 10.0.0.0/8 needs `via"), "{e}");
        let e = error_of(&format!("{IFACES}[[interface]]\nname = \"eth4\"\naddresses = [\"192.168.10.9/16\"]\n"));
        assert!(e.starts_with("router.toml:6:14: 192.168.10.9/16 overlaps 192.168.10.2/24 on eth5"), "{e}");
        let e = error_of("[[interface]]\nname = \"eth5\"\naddresses = [\"192.168.10.2/24\"]\ncolour = \"blue\"\n");
        assert!(e.starts_with("router.toml:4:1: unknown field `colour`"), "{e}");
        let e = error_of("[[interface]]\nname = \"eth5\"\naddresses = \"192.168.10.2/24\"\n");
        assert!(e.starts_with("router.toml:3:13: "), "{e}");
        let e = error_of("[[interface]\nname = 1\n");
        assert!(e.starts_with("router.toml:1:"), "{e}");
        let e = error_of("[[interface]]\nname = \"eth5\"\naddresses = [\"192.168.10.0/24\"]\n");
        assert!(e.contains("network address of 192.168.10.0/24"), "{e}");
        let e = error_of(&format!("{IFACES}[[neighbor]]\nip = \"192.168.10.7\"\nmac = \"01:00:5e:00:00:01\"\n"));
        assert!(e.starts_with("router.toml:6:7: 01:00:5e:00:00:01 is not a station address"), "{e}");
        let e = error_of(&format!("{IFACES}[workers]\npoll = \"sometimes\"\n"));
        assert_eq!(e, "router.toml:5:8: workers.poll `sometimes` is not one of busy, adaptive");
        let e = error_of(&format!("{IFACES}[workers]\nxdp_mode = \"offload\"\n"));
        assert_eq!(e, "router.toml:5:12: workers.xdp_mode `offload` is not one of native, generic, auto");
        let e = error_of(&format!("{IFACES}[workers]\npoll = 1\n"));
        assert!(e.starts_with("router.toml:5:8: workers.poll expects one of busy, adaptive, not `1`"), "{e}");
        let e = error_of("");
        assert!(e.starts_with("router.toml: no [[interface]]"), "{e}");
        let e = error_of(&format!("{IFACES}[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"192.168.10.2\"\n"));
        assert!(e.starts_with("router.toml:6:7: next hop 192.168.10.2 is the box's own address on eth5"), "{e}");
        let e = error_of(&format!("{IFACES}[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"192.168.10.255\"\n"));
        assert!(e.contains("is the broadcast address of 192.168.10.0/24"), "{e}");
        let e = error_of("[[interface]]\nname = \"eth5\"\naddresses = [\"127.0.0.2/8\"]\n");
        assert!(e.contains("cannot be a router address"), "{e}");
        let e = error_of(&format!("{IFACES}[limits]\nglean_queue = 1000000\n"));
        assert!(e.starts_with("router.toml:5:15: limits.glean_queue is at most 4096"), "{e}");
    }

    #[test]
    fn the_data_plane_gets_ports_in_file_order_and_routes_by_port() {
        let c = parse(&format!("{GOOD}\n[[route]]\nprefix = \"198.51.100.0/24\"\ndev = \"eth4\"\n")).unwrap();
        assert_eq!(c.ports(), ["eth5", "eth4"]);
        assert_eq!(c.port_name(PortId(1)), "eth4");
        let s = c.setup();
        assert_eq!(s.addresses, [c.interfaces[0].addresses.clone(), c.interfaces[1].addresses.clone()]);
        assert_eq!(
            s.routes,
            [
                ("10.0.0.0/8".parse().unwrap(), RouteTarget::via("192.168.30.2".parse::<Ipv4Addr>().unwrap())),
                ("172.16.0.0/12".parse().unwrap(), RouteTarget::Dev(PortId(0))),
                ("198.51.100.0/24".parse().unwrap(), RouteTarget::Dev(PortId(1))),
            ]
        );
        assert_eq!(s.neighbors, c.neighbors);
        assert_eq!(s.limits, c.limits);
    }

    #[test]
    fn a_dev_beyond_what_a_port_id_numbers_is_refused_at_its_place() {
        let mut text = String::new();
        for i in 0..=256u32 {
            text += &format!("[[interface]]\nname = \"p{i}\"\naddresses = [\"10.{}.{}.1/24\"]\n", i / 256, i % 256);
        }
        let with_route = |dev: &str| format!("{text}[[route]]\nprefix = \"198.51.100.0/24\"\ndev = \"{dev}\"\n");
        let c = parse(&with_route("p255")).unwrap();
        assert_eq!(c.routes[0].1, RouteTarget::Dev(PortId(255)));
        let e = parse(&with_route("p256")).unwrap_err();
        assert_eq!((e.line, e.col), (257 * 3 + 3, 7), "{e}");
        assert!(e.message.starts_with("dev p256 is interface 257 of the file"), "{e}");
    }

    #[test]
    fn limits_left_out_are_the_documented_defaults() {
        assert!(!parse(IFACES).unwrap().limits.rfc1812_martians, "the kernel's rule by default");
        assert!(parse(&format!("{IFACES}[limits]\nrfc1812_martians = true\n")).unwrap().limits.rfc1812_martians);
        let c = parse(&format!("{IFACES}[limits]\nicmp_rate = 0\n")).unwrap();
        // config/README.md: neighbors 4096, glean_queue 16, icmp_rate 1000, icmp_burst 50.
        assert_eq!(
            c.limits,
            RouterLimits { neighbors: 4096, glean_queue: 16, icmp_rate: 0, icmp_burst: 50, rfc1812_martians: false }
        );
        assert_eq!(parse(IFACES).unwrap().limits.icmp_rate, 1000);
    }

    #[test]
    fn interfaces_are_checked_against_the_system_at_their_place() {
        let c = parse(GOOD).unwrap();
        let e = c.check_interfaces(|n| n == "eth5").unwrap_err();
        assert_eq!(
            e.to_string(),
            "router.toml:7:8: interface eth4 does not exist in this network namespace (see `ip link show`)"
        );
        assert!(c.check_interfaces(|_| true).is_ok());
    }

    /// Parses a file that names `routes.txt`, whose text is `routes`.
    fn with_routes_file(routes: std::io::Result<&str>) -> Result<RouterConfig, ConfigError> {
        let cfg = format!(
            "routes_file = \"routes.txt\"\n{IFACES}[[interface]]\nname = \"eth4\"\naddresses = [\"192.168.30.1/24\"]\n"
        );
        RouterConfig::parse(Path::new("/etc/xfwd/router.toml"), &cfg, |p| {
            assert_eq!(p, Path::new("/etc/xfwd/routes.txt"), "resolved beside the configuration file");
            routes.map(str::to_owned)
        })
    }

    #[test]
    fn routes_file_lines_are_validated_with_positions() {
        let c = with_routes_file(Ok("# full table\n10.1.0.0/16 via 192.168.10.1\n10.2.0.0/16 dev eth4  # comment\n\n"))
            .unwrap();
        assert_eq!(
            c.routes,
            [
                ("10.1.0.0/16".parse().unwrap(), RouteTarget::via("192.168.10.1".parse::<Ipv4Addr>().unwrap())),
                ("10.2.0.0/16".parse().unwrap(), RouteTarget::Dev(PortId(1))),
            ]
        );
        let e = with_routes_file(Ok("10.1.0.0/16 via 192.168.10.1\n10.2.0.0/16 via 192.168.77.1\n")).unwrap_err();
        assert_eq!(e.path, Path::new("/etc/xfwd/routes.txt"));
        assert_eq!((e.line, e.col), (2, 17), "{e}");
        assert!(with_routes_file(Ok("10.1.0.1/16 via 192.168.10.1\n")).unwrap_err().message.contains("host bits"));
        let e = with_routes_file(Ok("10.1.0.0/16 via 192.168.10.1\n10.1.0.0/16 via 192.168.10.3\n")).unwrap_err();
        assert_eq!((e.line, e.col), (2, 1));
        assert!(e.message.contains("given twice"), "{e}");
        let e = with_routes_file(Ok("\n10.3.0.0/16  dev eth9\n")).unwrap_err();
        assert_eq!(e.to_string(), "/etc/xfwd/routes.txt:2:18: dev eth9 is not a configured [[interface]]");
    }

    #[test]
    fn a_static_route_equal_to_a_connected_subnet_is_refused_where_it_is_written() {
        // In the file: it would hide the hosts on eth5's subnet, as the kernel refuses it.
        let e = error_of(&format!("{IFACES}[[route]]\nprefix = \"192.168.10.0/24\"\ndev = \"eth5\"\n"));
        assert!(
            e.starts_with("router.toml:5:10: route 192.168.10.0/24 is the connected subnet of eth5 (192.168.10.2/24)"),
            "{e}"
        );
        assert!(e.contains("File exists") && e.contains("longer prefix"), "{e}");
        // A longer prefix inside it, or a shorter one around it, is a route like any other.
        for prefix in ["192.168.10.128/25", "192.168.0.0/16"] {
            let text = format!("{IFACES}[[route]]\nprefix = \"{prefix}\"\nvia = \"192.168.10.1\"\n");
            assert!(parse(&text).is_ok(), "{prefix}");
        }
        // In a routes file, at its line and column; and for IPv6.
        let e = with_routes_file(Ok("10.1.0.0/16 via 192.168.10.1\n 192.168.30.0/24 dev eth4\n")).unwrap_err();
        assert_eq!((e.line, e.col), (2, 2), "{e}");
        assert!(e.message.contains("connected subnet of eth4"), "{e}");
        let text = "[[interface]]\nname = \"eth5\"\naddresses = [\"2001:2:0:10::2/64\"]\n[[route]]\nprefix = \"2001:2:0:10::/64\"\ndev = \"eth5\"\n";
        let e = error_of(text);
        assert!(e.starts_with("router.toml:5:10: route 2001:2:0:10::/64 is the connected prefix of eth5"), "{e}");
    }

    const DUAL: &str = r#"
routes_file = "routes.txt"

[[interface]]
name = "eth5"
addresses = ["198.18.10.2/24", "2001:2:0:10::2/64"]
link_local = "fe80::5"

[[interface]]
name = "eth4"
addresses = ["2001:2:0:30::1/64"]

[[route]]
prefix = "2001:2:100::/48"
via = "2001:2:0:30::2"

[[route]]
prefix = "2001:2:200::/48"
via = "fe80::99"
dev = "eth4"

[[route]]
prefix = "2001:2:300::/48"
dev = "eth5"

[[neighbor]]
ip = "2001:2:0:30::2"
mac = "02:00:00:00:00:02"
"#;

    fn dual(routes: &str) -> Result<RouterConfig, ConfigError> {
        RouterConfig::parse(Path::new("router.toml"), DUAL, |_| Ok(routes.to_owned()))
    }

    #[test]
    fn ipv6_addresses_routes_and_neighbours_beside_ipv4() {
        let ip6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let c =
            dual("2001:2:400::/48 via 2001:2:0:10::1\n2001:2:500::/48 via fe80::7 dev eth5\n10.9.0.0/16 dev eth5\n")
                .unwrap();
        assert_eq!(c.interfaces[0].addresses, [("198.18.10.2".parse().unwrap(), 24)]);
        assert_eq!(c.interfaces[0].addresses6, [(ip6("2001:2:0:10::2"), 64)]);
        assert_eq!((c.interfaces[0].link_local, c.interfaces[1].link_local), (Some(ip6("fe80::5")), None));
        assert!(c.interfaces[1].addresses.is_empty(), "an IPv6-only port");
        let via = |gw: &str, dev| RouteTarget6::Via { gw: ip6(gw), dev };
        assert_eq!(
            c.routes6,
            [
                ("2001:2:100::/48".parse().unwrap(), via("2001:2:0:30::2", None)),
                ("2001:2:200::/48".parse().unwrap(), via("fe80::99", Some(PortId(1)))),
                ("2001:2:300::/48".parse().unwrap(), RouteTarget6::Dev(PortId(0))),
                ("2001:2:400::/48".parse().unwrap(), via("2001:2:0:10::1", None)),
                ("2001:2:500::/48".parse().unwrap(), via("fe80::7", Some(PortId(0)))),
            ]
        );
        assert_eq!(c.routes, [("10.9.0.0/16".parse().unwrap(), RouteTarget::Dev(PortId(0)))]);
        assert_eq!(c.neighbors6, [(ip6("2001:2:0:30::2"), "02:00:00:00:00:02".parse().unwrap())]);
        let s = c.setup();
        assert_eq!((s.addresses6.len(), s.link_locals, s.routes6.len()), (2, vec![Some(ip6("fe80::5")), None], 5));
        // A changed IPv6 address or link-local address needs a restart.
        let mut d = c.clone();
        d.interfaces[1].addresses6[0].1 = 56;
        assert!(c.needs_restart(&d, &running_of(&c)).is_some());
        let mut d = c.clone();
        d.interfaces[0].link_local = None;
        assert!(c.needs_restart(&d, &running_of(&c)).is_some());
    }

    #[test]
    fn ipv6_routes_are_checked_where_they_stand() {
        let e = dual("2001:2:400::/48 via 2001:2:0:30::2 dev eth5\n").unwrap_err();
        assert_eq!(e.to_string(), "routes.txt:1:40: next hop 2001:2:0:30::2 is on eth4's prefix, not on eth5");
        let e = dual("2001:2:400::/48 via fe80::1\n").unwrap_err();
        assert_eq!((e.line, e.col), (1, 21), "{e}");
        assert!(e.message.contains("say which interface"), "{e}");
        let e = dual("2001:2:400::/48 via 2001:2:0:30::1\n").unwrap_err();
        assert!(e.message.contains("the box's own address"), "{e}");
        let e = dual("2001:2:400::/48 via 2001:2:0:30::5 via 2001:2:0:30::6\n").unwrap_err();
        assert!(e.message.starts_with("expected `2001:2:400::/48 via ADDRESS [dev INTERFACE]`"), "{e}");
        let e = dual("2001:2:100::/48 dev eth4\n").unwrap_err();
        assert!(e.message.contains("given twice"), "{e}");
        let e = dual("2001:2:400::/48 dev eth9\n").unwrap_err();
        assert_eq!(e.to_string(), "routes.txt:1:21: dev eth9 is not a configured [[interface]]");
        let e = RouterConfig::parse(
            Path::new("r.toml"),
            "[[interface]]\nname = \"eth4\"\naddresses = [\"2001:2:0:30::/64\"]\n",
            |_| unreachable!(),
        )
        .unwrap_err();
        assert!(e.message.contains("subnet-router anycast"), "{e}");
        let e = RouterConfig::parse(
            Path::new("r.toml"),
            "[[interface]]\nname = \"eth4\"\naddresses = [\"2001:2:0:30::1/64\"]\nlink_local = \"2001:2::1\"\n",
            |_| unreachable!(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "r.toml:4:14: link_local 2001:2::1 is not in fe80::/10");
    }

    #[test]
    fn an_ipv4_route_through_an_ipv6_gateway_is_checked_as_an_ipv6_gateway() {
        let with = |route: &str| {
            RouterConfig::parse(Path::new("router.toml"), &format!("{DUAL}\n[[route]]\n{route}"), |_| Ok(String::new()))
        };
        let c = with("prefix = \"198.51.100.0/24\"\nvia = \"fe80::9\"\ndev = \"eth4\"\n").unwrap();
        let gw = "fe80::9".parse().unwrap();
        assert_eq!(
            c.routes,
            [("198.51.100.0/24".parse().unwrap(), RouteTarget::Via { gw: IpAddr::V6(gw), dev: Some(PortId(1)) })]
        );
        let c = with("prefix = \"198.51.100.0/24\"\nvia = \"2001:2:0:30::2\"\n").unwrap();
        assert_eq!(c.routes[0].1, RouteTarget::Via { gw: IpAddr::V6("2001:2:0:30::2".parse().unwrap()), dev: None });
        let e = with("prefix = \"198.51.100.0/24\"\nvia = \"fe80::9\"\n").unwrap_err();
        assert!(e.message.contains("is link-local: say which interface it is on with `dev`"), "{e}");
        assert_eq!(e.col, 7, "at the via: {e}");
        let e = with("prefix = \"198.51.100.0/24\"\nvia = \"2001:2:0:30::2\"\ndev = \"eth5\"\n").unwrap_err();
        assert!(e.message.contains("is on eth4's prefix, not on eth5"), "{e}");
        let e = with("prefix = \"198.51.100.0/24\"\nvia = \"198.18.10.1\"\ndev = \"eth5\"\n").unwrap_err();
        assert!(e.message.contains("only an IPv6 `via` goes with a `dev`"), "{e}");
        // The same in a routes file, each refusal at its word.
        let c = dual("198.51.100.0/24 via fe80::9 dev eth4\n198.51.101.0/24 dev eth4 via 2001:2:0:30::2\n").unwrap();
        let via6 = |a: &str, dev| RouteTarget::Via { gw: IpAddr::V6(a.parse().unwrap()), dev };
        let targets: Vec<_> = c.routes.iter().map(|(_, t)| *t).collect();
        assert_eq!(targets, [via6("fe80::9", Some(PortId(1))), via6("2001:2:0:30::2", Some(PortId(1)))]);
        let e = dual("198.51.100.0/24 via fe80::9\n").unwrap_err();
        assert!(e.message.contains("is link-local: say which interface it is on with `dev`"), "{e}");
        assert_eq!((e.line, e.col), (1, 21), "at the via: {e}");
        let e = dual("198.51.100.0/24 via 198.18.10.1 dev eth5\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "routes.txt:1:37: an IPv4 route takes `via` or `dev`, not both (only an IPv6 `via` goes with a `dev`)"
        );
        let e = dual("198.51.100.0/24 via 198.18.10.1 via 198.18.10.3\n").unwrap_err();
        assert!(e.message.starts_with("expected `198.51.100.0/24 via ADDRESS` or"), "{e}");
        assert_eq!(e.col, 33);
        let e = dual("198.51.100.0/24 gw 198.18.10.1\n").unwrap_err();
        assert_eq!(e.to_string(), "routes.txt:1:17: `gw`: expected `via` or `dev`");
        assert_eq!(dual("198.51.100.0/24\n").unwrap_err().col, 1);
    }

    #[test]
    fn an_unreadable_routes_file_is_reported_where_the_file_names_it() {
        let gone = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let e = with_routes_file(Err(gone)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/xfwd/router.toml:1:15: routes_file /etc/xfwd/routes.txt: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn reload_refuses_interface_changes() {
        let a = parse(GOOD).unwrap();
        let mut b = a.clone();
        b.routes.pop();
        assert_eq!(a.needs_restart(&b, &running_of(&a)), None);
        b.interfaces[0].addresses.pop();
        assert!(a.needs_restart(&b, &running_of(&a)).is_some());
    }

    #[test]
    fn reload_compares_worker_and_queue_management_settings_with_what_runs() {
        let a = parse(IFACES).unwrap();
        // Started without [workers] or [aqm]: one queue (automatic), adaptive polling, flow
        // queues, CoDel's defaults.
        let options = WorkerOptions { queues: Some(1), ..WorkerOptions::default() };
        let running = Running { options, origins: Origins::default() };
        assert_eq!(a.needs_restart(&a, &running), None);
        // Saying what runs is no change: one queue, the default poll mode.
        let b = parse(&format!("{IFACES}[workers]\nqueues = 1\npoll = \"adaptive\"\n")).unwrap();
        assert_eq!(a.needs_restart(&b, &running), None);
        // Queue management off while it is on: refused, named with both values.
        let b = parse(&format!("{IFACES}[aqm]\nmode = \"off\"\n")).unwrap();
        let why = a.needs_restart(&b, &running).unwrap();
        assert!(
            why.starts_with("[aqm] mode = off (running: ") && why.ends_with("cannot change while xfwd runs"),
            "{why}"
        );
        // Two queues while one runs, and a new CoDel target: both named.
        let b = parse(&format!("{IFACES}[workers]\nqueues = 2\n[aqm]\ntarget = \"10ms\"\n")).unwrap();
        let why = a.needs_restart(&b, &running).unwrap();
        assert!(
            why.contains("[workers] queues = 2 (running: 1)") && why.contains("[aqm] target = 10ms (running: 5ms)"),
            "{why}"
        );
        // What the command line fixed is not the file's to change.
        let mut cli = running.clone();
        (cli.origins.aqm, cli.origins.queues) = (Source::Flag, Source::Flag);
        let b = parse(&format!("{IFACES}[workers]\nqueues = 2\n[aqm]\nmode = \"off\"\n")).unwrap();
        assert_eq!(a.needs_restart(&b, &cli), None);
        // A queue count given at start and left out now: what xfwd would choose is not known.
        let given = parse(&format!("{IFACES}[workers]\nqueues = 1\n")).unwrap();
        let why = given.needs_restart(&a, &running).unwrap();
        assert!(why.contains("[workers] queues = (automatic) (running: 1)"), "{why}");
    }
}
