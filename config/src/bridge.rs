//! The bridge's TOML file, for a bridge run as a service (`xfwd bridge --config FILE`): its
//! ports, the FDB's ageing and size, and the same `[workers]` and `[aqm]` tables as the
//! router's. Flags given beside it win over it. Parsed from text like the router's file, each
//! error at its `file:line:col` with what to write instead.
//!
//! ```toml
//! ports = ["eth4", "eth5"]
//! ageing = "300s"        # default 300s
//! fdb_size = 65536       # default 65536
//! [workers]
//! queues = 2
//! [port.eth5]            # a port's settings, as `bridge link set` has them (defaults shown
//! learning = true        # but isolated): learn its sources,
//! flood = true           # flood unknown unicast out of it,
//! mcast_flood = true     # multicast,
//! bcast_flood = true     # broadcast;
//! isolated = true        # reach only the ports that are not isolated
//! storm_control = 1000   # at most 1000 flooded frames received a second (default: no limit)
//! [[static]]             # a station that never ages and never moves
//! mac = "02:00:00:00:00:01"
//! port = "eth4"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use xfwd_dataplane::io::setup::settings::Layer;
use xfwd_dataplane::l2::PortPolicy;
use xfwd_dataplane::wire::MacAddr;

use crate::router::{options_in, pos_of, ConfigError, Ctx, Pos, RawOptions};

/// The most FDB entries a bridge may be given (`fdb_size`, `--fdb-size`): 16 Mi stations, far
/// beyond any segment, and a table that still fits in memory.
pub const FDB_MAX: usize = 1 << 24;

/// The highest storm-control limit (`storm_control`, flooded frames a second): far above any
/// port's line rate in 64-byte frames.
pub const STORM_MAX: u32 = 1_000_000_000;

/// `--fdb-size`: 1 to [`FDB_MAX`] entries.
pub fn parse_fdb_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=FDB_MAX).contains(&n) => Ok(n),
        _ => Err(format!("`{text}`: give a number of entries from 1 to {FDB_MAX}, e.g. 65536")),
    }
}

/// A validated bridge configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeConfig {
    /// The file it came from.
    pub path: PathBuf,
    /// The ports, in file order, each with its place in the file.
    pub ports: Vec<(String, Pos)>,
    /// FDB ageing time, if the file sets it.
    pub ageing: Option<Duration>,
    /// FDB capacity in entries, if the file sets it.
    pub fdb_size: Option<usize>,
    /// The worker options the file sets.
    pub options: Layer,
    /// Each port's settings, in port order (the defaults where `[port.NAME]` is absent).
    pub port_settings: Vec<PortPolicy>,
    /// Static stations: a MAC and the index of its port in `ports`.
    pub statics: Vec<(MacAddr, usize)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBridge {
    ports: Spanned<Vec<Spanned<String>>>,
    ageing: Option<Spanned<String>>,
    fdb_size: Option<Spanned<i64>>,
    #[serde(default)]
    workers: RawOptions,
    #[serde(default)]
    aqm: RawOptions,
    #[serde(default)]
    port: BTreeMap<Spanned<String>, RawPort>,
    #[serde(default, rename = "static")]
    statics: Vec<RawStatic>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    learning: Option<bool>,
    flood: Option<bool>,
    mcast_flood: Option<bool>,
    bcast_flood: Option<bool>,
    isolated: Option<bool>,
    storm_control: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatic {
    mac: Spanned<String>,
    port: Spanned<String>,
}

impl BridgeConfig {
    /// Validates `text`, the bridge file `path` (named in errors only: the caller reads it).
    pub fn parse(path: &Path, text: &str) -> Result<BridgeConfig, ConfigError> {
        let cx = Ctx { path, text };
        let raw: RawBridge = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            cx.err(span, e.message().trim().replace('\n', " "))
        })?;
        let list = raw.ports.get_ref();
        if list.len() < 2 {
            return Err(cx.err(raw.ports.span(), "a bridge needs two or more ports, e.g. ports = [\"eth4\", \"eth5\"]"));
        }
        let mut ports: Vec<(String, Pos)> = Vec::new();
        for p in list {
            let name = p.get_ref();
            if name.is_empty() || name.len() > 15 || name.contains(['/', ' ']) {
                return Err(cx.err(
                    p.span(),
                    format!("`{name}` is not an interface name (1 to 15 characters, no '/' or space)"),
                ));
            }
            if ports.iter().any(|(n, _)| n == name) {
                return Err(cx.err(p.span(), format!("port {name} is listed twice")));
            }
            ports.push((name.clone(), pos_of(text, p.span().start)));
        }
        let ageing = raw
            .ageing
            .map(|a| match crate::parse_duration(a.get_ref()) {
                Ok(d) if d >= Duration::from_secs(1) => Ok(d),
                Ok(_) => Err(cx.err(a.span(), "ageing must be at least 1s")),
                Err(e) => Err(cx.err(a.span(), format!("ageing: {e}"))),
            })
            .transpose()?;
        let fdb_size = raw
            .fdb_size
            .map(|n| match usize::try_from(*n.get_ref()) {
                Ok(v) if (1..=FDB_MAX).contains(&v) => Ok(v),
                _ => Err(cx.err(n.span(), format!("fdb_size must be 1 to {FDB_MAX} (entries)"))),
            })
            .transpose()?;
        let options = options_in(&cx, &raw.workers, &raw.aqm)?;
        let index = |name: &Spanned<String>, what: &str| {
            ports.iter().position(|(n, _)| n == name.get_ref()).ok_or_else(|| {
                let listed: Vec<&str> = ports.iter().map(|(n, _)| n.as_str()).collect();
                cx.err(
                    name.span(),
                    format!("{what} {} is not one of the ports ({})", name.get_ref(), listed.join(", ")),
                )
            })
        };
        let mut port_settings = vec![PortPolicy::default(); ports.len()];
        for (name, rp) in &raw.port {
            let d = PortPolicy::default();
            let storm_limit = rp
                .storm_control
                .as_ref()
                .map(|n| match u32::try_from(*n.get_ref()) {
                    Ok(v) if (1..=STORM_MAX).contains(&v) => Ok(v),
                    _ => Err(cx.err(
                        n.span(),
                        format!(
                            "storm_control is flooded frames a second, 1 to {STORM_MAX}; leave it out for no limit"
                        ),
                    )),
                })
                .transpose()?;
            port_settings[index(name, "[port.NAME]:")?] = PortPolicy {
                learning: rp.learning.unwrap_or(d.learning),
                flood: rp.flood.unwrap_or(d.flood),
                mcast_flood: rp.mcast_flood.unwrap_or(d.mcast_flood),
                bcast_flood: rp.bcast_flood.unwrap_or(d.bcast_flood),
                isolated: rp.isolated.unwrap_or(d.isolated),
                storm_limit,
            };
        }
        let mut statics: Vec<(MacAddr, usize)> = Vec::new();
        for st in &raw.statics {
            let mac = cx.station_mac(&st.mac)?;
            if statics.iter().any(|(m, _)| *m == mac) {
                return Err(cx.err(st.mac.span(), format!("{mac} is given twice; a station sits behind one port")));
            }
            statics.push((mac, index(&st.port, "static entry's port")?));
        }
        if let (Some(n), true) = (fdb_size, statics.len() > fdb_size.unwrap_or(usize::MAX)) {
            let at = raw.statics[n].mac.span();
            return Err(cx.err(at, format!("{} static entries and fdb_size = {n}: raise fdb_size", statics.len())));
        }
        Ok(BridgeConfig { path: path.to_owned(), ports, ageing, fdb_size, options, port_settings, statics })
    }

    /// The ports' names, in order.
    pub fn port_names(&self) -> Vec<String> {
        self.ports.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Checks that every port exists (`exists(name)`), reporting the first that does not at its
    /// place in the file.
    pub fn check_ports(&self, exists: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        match self.ports.iter().find(|(n, _)| !exists(n)) {
            Some((name, at)) => Err(ConfigError {
                path: self.path.clone(),
                line: at.line,
                col: at.col,
                message: format!("port {name} does not exist in this network namespace (see `ip link show`)"),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BridgeConfig, String> {
        BridgeConfig::parse(Path::new("b.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_ports_ageing_size_and_worker_options() {
        let c =
            parse("ports = [\"eth4\", \"eth5\"]\nageing = \"5m\"\nfdb_size = 1024\n[workers]\nqueues = 2\n").unwrap();
        assert_eq!(c.port_names(), ["eth4", "eth5"]);
        assert_eq!(c.ports[1].1, Pos { line: 1, col: 18 });
        assert_eq!((c.ageing, c.fdb_size), (Some(Duration::from_secs(300)), Some(1024)));
        assert!(c.options.has(xfwd_dataplane::io::setup::settings::Opt::Queues));
        let d = parse("ports = [\"a\", \"b\", \"c\"]\n").unwrap();
        assert_eq!((d.ageing, d.fdb_size, d.ports.len()), (None, None, 3));
    }

    #[test]
    fn errors_name_the_place_and_the_fix() {
        for (text, want) in [
            ("ports = [\"eth4\"]\n", "b.toml:1:9: a bridge needs two or more ports"),
            ("ports = [\"eth4\", \"eth4\"]\n", "b.toml:1:18: port eth4 is listed twice"),
            ("ports = [\"eth4\", \"a b\"]\n", "b.toml:1:18: `a b` is not an interface name"),
            ("ports = [\"a\", \"b\"]\nageing = \"often\"\n", "b.toml:2:10: ageing: "),
            ("ports = [\"a\", \"b\"]\nageing = \"0s\"\n", "b.toml:2:10: ageing must be at least 1s"),
            ("ports = [\"a\", \"b\"]\nfdb_size = 0\n", "b.toml:2:12: fdb_size must be 1 to 16777216"),
            ("ports = [\"a\", \"b\"]\nfdb_size = 99999999999\n", "b.toml:2:12: fdb_size must be 1 to 16777216"),
            ("ports = [\"a\", \"b\"]\n[workers]\nqueue = 2\n", "b.toml:3:1: unknown field `queue`, expected one of"),
            ("ports = [\"a\", \"b\"]\nlearning = false\n", "b.toml:2:1: unknown field `learning`"),
            ("ageing = \"5m\"\n", "missing field `ports`"),
            ("ports = [\"a\", \"b\"]\n[port.c]\nflood = false\n", "b.toml:2:7: [port.NAME]: c is not one of the ports (a, b)"),
            ("ports = [\"a\", \"b\"]\n[port.a]\nflooding = false\n", "b.toml:3:1: unknown field `flooding`, expected one of `learning`, `flood`"),
            ("ports = [\"a\", \"b\"]\n[port.a]\nflood = 0\n", "b.toml:3:9: invalid type: integer `0`, expected a boolean"),
            ("ports = [\"a\", \"b\"]\n[[static]]\nmac = \"02:00:00:00:00:01\"\nport = \"c\"\n", "b.toml:4:8: static entry's port c is not one of the ports"),
            ("ports = [\"a\", \"b\"]\n[[static]]\nmac = \"01:00:5e:00:00:01\"\nport = \"a\"\n", "b.toml:3:7: 01:00:5e:00:00:01 is not a station address"),
            ("ports = [\"a\", \"b\"]\n[[static]]\nmac = \"02:00:00:00:01\"\nport = \"a\"\n", "b.toml:3:7: "),
            ("ports = [\"a\", \"b\"]\n[[static]]\nmac = \"02:00:00:00:00:01\"\nport = \"a\"\n[[static]]\nmac = \"02:00:00:00:00:01\"\nport = \"b\"\n", "b.toml:6:7: 02:00:00:00:00:01 is given twice"),
            ("ports = [\"a\", \"b\"]\nfdb_size = 1\n[[static]]\nmac = \"02:00:00:00:00:01\"\nport = \"a\"\n[[static]]\nmac = \"02:00:00:00:00:02\"\nport = \"b\"\n", "b.toml:7:7: 2 static entries and fdb_size = 1: raise fdb_size"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn reads_each_ports_settings_and_the_static_stations() {
        let c = parse(
            "ports = [\"eth4\", \"eth5\", \"eth6\"]\n[port.eth6]\nlearning = false\nmcast_flood = false\n[port.eth4]\nisolated = true\n[[static]]\nmac = \"02:00:00:00:00:01\"\nport = \"eth5\"\n",
        )
        .unwrap();
        let d = PortPolicy::default();
        assert_eq!(
            c.port_settings,
            [PortPolicy { isolated: true, ..d }, d, PortPolicy { learning: false, mcast_flood: false, ..d },]
        );
        assert_eq!(c.statics, [(MacAddr([2, 0, 0, 0, 0, 1]), 1)]);
        let plain = parse("ports = [\"a\", \"b\"]\n").unwrap();
        assert_eq!((plain.port_settings, plain.statics), (vec![d, d], vec![]));
        let storm = parse("ports = [\"a\", \"b\"]\n[port.b]\nstorm_control = 500\n").unwrap();
        assert_eq!(storm.port_settings, [d, PortPolicy { storm_limit: Some(500), ..d }]);
        for bad in ["0", "-1", "1000000001"] {
            let e = parse(&format!("ports = [\"a\", \"b\"]\n[port.b]\nstorm_control = {bad}\n")).unwrap_err();
            assert!(
                e.starts_with("b.toml:3:17: storm_control is flooded frames a second, 1 to 1000000000"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_missing_port_is_reported_where_it_is_written() {
        let c = parse("ports = [\"lo\",\n  \"xfwd-nope\"]\n").unwrap();
        let e = c.check_ports(|n| n == "lo").unwrap_err();
        assert_eq!(
            e.to_string(),
            "b.toml:2:3: port xfwd-nope does not exist in this network namespace (see `ip link show`)"
        );
        assert!(c.check_ports(|_| true).is_ok());
    }
}
