//! Ports: the network interfaces xfwd drives, found and checked before anything is touched.
//!
//! Facts are read from sysfs (`/sys/class/net/NAME/...`), which `ip netns exec` remounts for the
//! namespace it enters, so they describe the interfaces this process sees.

use std::fs;
use std::net::Ipv6Addr;
use std::path::PathBuf;

use crate::wire::MacAddr;

/// What was found out about a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Interface name.
    pub name: String,
    /// Kernel interface index.
    pub ifindex: u32,
    /// MTU (IP payload size, without the Ethernet header).
    pub mtu: u32,
    /// Number of RX queues.
    pub rx_queues: u32,
    /// Administratively up.
    pub up: bool,
    /// Link detected.
    pub carrier: bool,
    /// The interface's MAC address.
    pub mac: MacAddr,
    /// Its driver as `ethtool -i` names it (`None` where it does not answer).
    pub driver: Option<String>,
    /// Its link-local IPv6 address, as the kernel gave it (`None` without IPv6, or before the
    /// kernel made one).
    pub link_local: Option<Ipv6Addr>,
}

/// The link-local address of interface `ifindex` in `/proc/net/if_inet6`'s text (lines of
/// 32 hex digits of address, then index, prefix length, scope and flags in hex, then the name;
/// scope 0x20 is link). A tentative address (flag 0x40: duplicate address detection still
/// running) is taken only when there is no other.
pub fn link_local_of(if_inet6: &str, ifindex: u32) -> Option<Ipv6Addr> {
    const SCOPE_LINK: u32 = 0x20;
    const TENTATIVE: u32 = 0x40;
    let mut found: Option<(bool, Ipv6Addr)> = None;
    for line in if_inet6.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [addr, index, _, scope, flags, ..] = w[..] else { continue };
        let hex = |t: &str| u32::from_str_radix(t, 16).ok();
        if hex(index) != Some(ifindex) || hex(scope) != Some(SCOPE_LINK) || addr.len() != 32 {
            continue;
        }
        let Ok(bits) = u128::from_str_radix(addr, 16) else { continue };
        let tentative = hex(flags).is_some_and(|f| f & TENTATIVE != 0);
        if found.is_none_or(|(t, _)| t && !tentative) {
            found = Some((tentative, Ipv6Addr::from(bits)));
        }
    }
    found.map(|(_, a)| a)
}

/// Why a port cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{port}: {kind}")]
pub struct PortError {
    /// The port's name as given.
    pub port: String,
    /// What is wrong with it.
    pub kind: PortErrorKind,
}

/// The kinds of [`PortError`].
#[derive(Debug, thiserror::Error)]
pub enum PortErrorKind {
    /// No interface of that name in this network namespace; the one whose name is nearest,
    /// when one is clearly nearest.
    #[error(
        "no such interface in this network namespace{} (see `ip link show`)",
        .nearest.as_deref().map(|n| format!("; did you mean {n}?")).unwrap_or_default()
    )]
    NotFound {
        /// The interface the name is likely a typo of.
        nearest: Option<String>,
    },
    /// Given twice on the command line.
    #[error("given more than once; name each port once")]
    Duplicate,
    /// Administratively down.
    #[error("is administratively down; bring it up first: ip link set {0} up")]
    Down(String),
    /// Its MTU does not fit a UMEM frame.
    #[error("MTU {mtu} is larger than a UMEM frame can carry ({max}); lower it: ip link set {name} mtu {max}")]
    MtuTooLarge {
        /// The interface name.
        name: String,
        /// Its MTU.
        mtu: u32,
        /// The largest MTU xfwd can carry.
        max: u32,
    },
    /// Fewer RX queues than workers asked for.
    #[error("has {has} RX queue(s), {want} asked for; frames on a queue without a socket would be lost to the forwarder (lower --queues, or raise the port's queues: ethtool -L {name} combined {want})")]
    TooFewQueues {
        /// The interface name.
        name: String,
        /// Its RX queue count.
        has: u32,
        /// The number of queues asked for.
        want: u32,
    },
    /// The XDP program could not be attached.
    #[error("cannot take XDP: {0}")]
    Xdp(String),
    /// An AF_XDP socket could not be created or bound.
    #[error("cannot bind an AF_XDP socket on queue {queue}: {cause}")]
    Socket {
        /// The queue.
        queue: u32,
        /// What the kernel said.
        cause: String,
    },
    /// A sysfs attribute could not be read or parsed.
    #[error("cannot read {path}: {cause}")]
    Sysfs {
        /// The attribute's path.
        path: String,
        /// What went wrong.
        cause: String,
    },
}

/// The name of interface `ifindex` in this network namespace, if there is one.
pub fn name_of(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes if_indextoname may write, NUL included.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success `buf` holds a NUL-terminated name.
    Some(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

impl PortError {
    /// A [`PortError`] for `port`.
    pub fn new(port: &str, kind: PortErrorKind) -> PortError {
        PortError { port: port.to_owned(), kind }
    }
}

fn attr(name: &str, attr: &str) -> Result<String, PortError> {
    let path: PathBuf = ["/sys/class/net", name, attr].iter().collect();
    fs::read_to_string(&path).map(|s| s.trim().to_owned()).map_err(|e| {
        PortError::new(name, PortErrorKind::Sysfs { path: path.display().to_string(), cause: e.to_string() })
    })
}

fn parse<T: std::str::FromStr>(name: &str, a: &str, text: &str) -> Result<T, PortError> {
    text.parse().map_err(|_| {
        PortError::new(
            name,
            PortErrorKind::Sysfs { path: format!("/sys/class/net/{name}/{a}"), cause: format!("unexpected `{text}`") },
        )
    })
}

/// Whether the interface `name` exists in this network namespace.
pub fn exists(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('/')
        && name != "."
        && name != ".."
        && PathBuf::from("/sys/class/net").join(name).exists()
}

/// The error for a port `name` that does not exist, with the interface it is likely a typo of.
pub fn not_found(name: &str) -> PortError {
    let names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    PortError::new(name, PortErrorKind::NotFound { nearest: nearest(name, &names).map(str::to_owned) })
}

/// The name among `names` that `typed` is one slip from (a letter wrong, missing, extra, or
/// two swapped: `eht5` for `eth5`; two for names of more than four letters), when exactly one
/// is nearest; a tie (`eth9` between `eth4` and `eth5`) suggests nothing.
pub fn nearest<'a>(typed: &str, names: &'a [String]) -> Option<&'a str> {
    let limit = if typed.chars().count() > 4 { 2 } else { 1 };
    let mut scored: Vec<(usize, &str)> =
        names.iter().map(|n| (edit_distance(typed, n), n.as_str())).filter(|&(d, _)| d <= limit).collect();
    scored.sort_unstable();
    match scored.as_slice() {
        [(d, n), rest @ ..] if rest.first().is_none_or(|(d2, _)| d2 > d) => Some(n),
        _ => None,
    }
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbouring characters, each one step.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

impl PortInfo {
    /// Reads what sysfs says about `name`.
    pub fn read(name: &str) -> Result<PortInfo, PortError> {
        if !exists(name) {
            return Err(not_found(name));
        }
        let ifindex = parse(name, "ifindex", &attr(name, "ifindex")?)?;
        let mtu = parse(name, "mtu", &attr(name, "mtu")?)?;
        let flags_text = attr(name, "flags")?;
        let flags = u32::from_str_radix(flags_text.trim_start_matches("0x"), 16).map_err(|_| {
            PortError::new(name, PortErrorKind::Sysfs { path: "flags".into(), cause: flags_text.clone() })
        })?;
        let up = flags & libc::IFF_UP as u32 != 0;
        // Reading `carrier` of a down interface fails with EINVAL: that is "no carrier".
        let carrier = attr(name, "carrier").map(|c| c == "1").unwrap_or(false);
        let mac = parse(name, "address", &attr(name, "address")?)?;
        let queues_dir = format!("/sys/class/net/{name}/queues");
        let rx_queues = fs::read_dir(&queues_dir)
            .map_err(|e| PortError::new(name, PortErrorKind::Sysfs { path: queues_dir.clone(), cause: e.to_string() }))?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count() as u32;
        let driver = super::drivers::driver_name(name);
        let link_local = fs::read_to_string("/proc/net/if_inet6").ok().and_then(|t| link_local_of(&t, ifindex));
        Ok(PortInfo { name: name.to_owned(), ifindex, mtu, rx_queues, up, carrier, mac, driver, link_local })
    }
}

/// Checks the requested ports before anything is touched: each exists, is named once, is up
/// and has an MTU that fits `max_mtu`. Returns their facts, in the order given.
pub fn check_ports(names: &[String], max_mtu: u32) -> Result<Vec<PortInfo>, PortError> {
    let mut out: Vec<PortInfo> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(PortError::new(name, PortErrorKind::Duplicate));
        }
        let info = PortInfo::read(name)?;
        if !info.up {
            return Err(PortError::new(name, PortErrorKind::Down(name.clone())));
        }
        if info.mtu > max_mtu {
            return Err(PortError::new(
                name,
                PortErrorKind::MtuTooLarge { name: name.clone(), mtu: info.mtu, max: max_mtu },
            ));
        }
        out.push(info);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_read_without_root() {
        // Every network namespace has `lo`; reading sysfs needs no privilege.
        let lo = PortInfo::read("lo").unwrap();
        assert!(lo.ifindex >= 1);
        assert!(lo.rx_queues >= 1);
        assert_eq!(lo.mac, MacAddr([0; 6]));
    }

    #[test]
    fn the_link_local_address_is_read_from_if_inet6() {
        let text = "\
20010002000000300000000000000001 05 40 00 80 eth4
fe800000000000000000000000000099 05 40 20 c0 eth4
fe800000000000000000000000000004 05 40 20 80 eth4
fe800000000000000000000000000005 06 40 20 80 eth5
00000000000000000000000000000001 01 80 10 80 lo
";
        let ip = |s: &str| s.parse::<Ipv6Addr>().ok();
        assert_eq!(link_local_of(text, 5), ip("fe80::4"), "the link scope, not tentative (0x40)");
        assert_eq!(link_local_of(text, 6), ip("fe80::5"));
        assert_eq!(link_local_of(text, 1), None, "loopback has none");
        assert_eq!(
            link_local_of(&text.replace("05 40 20 80", "05 40 20 c0"), 5),
            ip("fe80::99"),
            "tentative if all are"
        );
        assert_eq!(link_local_of("garbage\n", 5), None);
    }

    #[test]
    fn a_mistyped_port_is_matched_to_the_one_name_it_is_a_slip_from() {
        let names: Vec<String> = ["lo", "eth4", "eth5", "enp3s0f1", "br0"].iter().map(|n| n.to_string()).collect();
        assert_eq!(nearest("eht5", &names), Some("eth5"), "two letters swapped");
        assert_eq!(nearest("eth55", &names), Some("eth5"), "one too many");
        assert_eq!(nearest("th4", &names), Some("eth4"), "one missing");
        assert_eq!(nearest("enp3s0f2", &names), Some("enp3s0f1"));
        assert_eq!(nearest("enps30f", &names), Some("enp3s0f1"), "two slips in a long name");
        assert_eq!(nearest("eth9", &names), None, "eth4 and eth5 are as near: no guess");
        assert_eq!(nearest("wlan0", &names), None);
        assert_eq!(nearest("xfwd-no-such0", &names), None);
        let e = PortErrorKind::NotFound { nearest: Some("eth5".into()) };
        assert_eq!(
            PortError::new("eht5", e).to_string(),
            "eht5: no such interface in this network namespace; did you mean eth5? (see `ip link show`)"
        );
    }

    #[test]
    fn missing_and_duplicate_ports_are_named() {
        let e = check_ports(&["xfwd-no-such0".into()], 1500).unwrap_err();
        assert_eq!(e.port, "xfwd-no-such0");
        assert!(matches!(e.kind, PortErrorKind::NotFound { nearest: None }));
        assert!(e.to_string().starts_with("xfwd-no-such0: no such interface"));
        let e = check_ports(&["lo".into(), "lo".into()], 70000).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::Duplicate), "{e}");
        assert!(!exists("../lo"));
    }

    #[test]
    fn mtu_over_the_frame_is_refused_with_the_fix() {
        // lo has a 65536 MTU: far more than a 2 KiB frame carries.
        let e = check_ports(&["lo".into()], 1500).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::MtuTooLarge { .. }), "{e}");
        assert!(e.to_string().contains("ip link set lo mtu 1500"), "{e}");
    }
}
