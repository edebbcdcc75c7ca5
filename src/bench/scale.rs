//! A router's scale on the rig (`--routes`, `--routes6`, `--dsts`): the same full table and
//! the same destinations' routes in every arm, generated from a seed.
//!
//! The table's prefixes span the address space as a full table's do, outside the
//! benchmarking ranges: they are entries, no frame is sent to them. The traffic's
//! destinations are inside the ranges only (IPv4 198.18.64.0 – 198.19.255.255, IPv6
//! 2001:2:0:8000::/64), each with a host route of its own; every route goes through one of
//! four next hops on the servers' subnet behind `eth5`, which the server host answers for.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use xfwd_dataplane::l3::{Prefix, Prefix6};

use super::tables;

/// The IPv4 benchmarking range (RFC 2544): the rig's addresses and every frame's destination.
pub const RANGE4: &str = "198.18.0.0/15";
/// The IPv6 benchmarking range (RFC 5180).
pub const RANGE6: &str = "2001:2::/48";

/// The next hops of the table's and the destinations' routes, on the servers' subnet behind
/// `eth5`: the server host takes them as addresses of its own ([`host_addresses`]).
pub const NEXT_HOPS4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(198, 18, 10, 11),
    Ipv4Addr::new(198, 18, 10, 12),
    Ipv4Addr::new(198, 18, 10, 13),
    Ipv4Addr::new(198, 18, 10, 14),
];
/// IPv6's, on the servers' 2001:2:0:10::/64.
pub const NEXT_HOPS6: [Ipv6Addr; 4] = [
    Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 0x11),
    Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 0x12),
    Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 0x13),
    Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 0x14),
];

/// The first IPv4 destination: past the rig's subnets (198.18.0.0 – 198.18.63.255).
pub const DST4_FIRST: Ipv4Addr = Ipv4Addr::new(198, 18, 64, 0);
/// IPv4 destinations there are room for: 198.18.64.0 to 198.19.255.255.
pub const DSTS4_MAX: u32 = (1 << 17) - (64 << 8);
/// The first IPv6 destination, in a /64 no rig subnet or route uses.
pub const DST6_FIRST: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0x8000, 0, 0, 0, 0);
/// IPv6 destinations the bench makes at most (the generator counts in the address's last 32
/// bits; a table this large is already beyond what the rig's memory holds in every arm).
pub const DSTS6_MAX: u32 = 1 << 22;

/// The protocol number the bench's routes carry in the kernel's table, so that they are
/// removed at once (`ip route flush proto 199`).
pub const PROTO: u8 = 199;

/// The seed the tables are drawn from unless `--seed` says otherwise.
pub const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The scale a bench runs at: the table's size per family, the traffic's destinations, and
/// the seed the table is drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// IPv4 prefixes of the full table.
    pub routes: u32,
    /// IPv6 prefixes of the full table.
    pub routes6: u32,
    /// Destinations of the traffic, each with its own route (0: the server's address only).
    pub dsts: u32,
    /// Whether the traffic is IPv6 (its destinations are).
    pub v6: bool,
    /// The tables' seed.
    pub seed: u64,
}

impl Scale {
    /// Whether the bench adds anything to the rig's routes.
    pub fn any(&self) -> bool {
        self.routes > 0 || self.routes6 > 0 || self.dsts > 0
    }

    /// Routes in all: the tables' and the destinations'.
    pub fn total(&self) -> u64 {
        u64::from(self.routes) + u64::from(self.routes6) + u64::from(self.dsts)
    }

    /// Why this scale cannot run, in one line (`None`: it can).
    pub fn refusal(&self) -> Option<String> {
        if !self.v6 && self.dsts > DSTS4_MAX {
            return Some(format!(
                "--dsts {}: IPv4 destinations stay inside 198.18.64.0 – 198.19.255.255 (the benchmarking range past the rig's subnets): at most {DSTS4_MAX}",
                self.dsts
            ));
        }
        if self.v6 && self.dsts > DSTS6_MAX {
            return Some(format!("--dsts {}: at most {DSTS6_MAX} IPv6 destinations", self.dsts));
        }
        if !self.v6 && self.routes6 > 0 {
            return Some("--routes6 needs the dual-stack rig: add --ip 6".into());
        }
        None
    }

    /// The traffic's first destination (the others follow it one by one), when it has many.
    pub fn first_dst(&self) -> Option<IpAddr> {
        (self.dsts > 0).then_some(if self.v6 { IpAddr::V6(DST6_FIRST) } else { IpAddr::V4(DST4_FIRST) })
    }

    /// Every route, `line(prefix, next hop)` each: the IPv4 table, the IPv6 table, then the
    /// destinations' host routes; next hops in turn.
    fn each_route(&self, mut line: impl FnMut(&dyn std::fmt::Display, IpAddr)) {
        let range4: Prefix = RANGE4.parse().expect("a prefix");
        let range6: Prefix6 = RANGE6.parse().expect("a prefix");
        for (i, p) in tables::table4(self.routes as usize, self.seed, range4).iter().enumerate() {
            line(p, IpAddr::V4(NEXT_HOPS4[i % 4]));
        }
        for (i, p) in tables::table6(self.routes6 as usize, self.seed, range6).iter().enumerate() {
            line(p, IpAddr::V6(NEXT_HOPS6[i % 4]));
        }
        for i in 0..self.dsts {
            if self.v6 {
                let a = Ipv6Addr::from(u128::from(DST6_FIRST) + u128::from(i));
                line(&format_args!("{a}/128"), IpAddr::V6(NEXT_HOPS6[i as usize % 4]));
            } else {
                let a = Ipv4Addr::from(u32::from(DST4_FIRST) + i);
                line(&format_args!("{a}/32"), IpAddr::V4(NEXT_HOPS4[i as usize % 4]));
            }
        }
    }

    /// The routes as `ip -batch` lines for the kernel, marked with [`PROTO`].
    pub fn kernel_batch(&self) -> String {
        let mut s = String::with_capacity(self.total() as usize * 48);
        self.each_route(|p, via| {
            let _ = writeln!(s, "route replace {p} via {via} proto {PROTO}");
        });
        s
    }

    /// The routes as xfwd's routes file (`PREFIX via ADDRESS` a line).
    pub fn routes_file(&self) -> String {
        let mut s = String::with_capacity(self.total() as usize * 32);
        self.each_route(|p, via| {
            let _ = writeln!(s, "{p} via {via}");
        });
        s
    }

    /// The conditions' words for it.
    pub fn said(&self) -> String {
        let mut parts = Vec::new();
        if self.routes > 0 {
            parts.push(format!(
                "{} IPv4 prefixes outside {RANGE4} and the special-purpose blocks ({})",
                self.routes,
                tables::mix_said(tables::LENGTH_MIX)
            ));
        }
        if self.routes6 > 0 {
            parts.push(format!(
                "{} IPv6 prefixes outside {RANGE6} ({})",
                self.routes6,
                tables::mix_said(tables::LENGTH_MIX6)
            ));
        }
        if self.dsts > 0 {
            let first = self.first_dst().map(|a| a.to_string()).unwrap_or_default();
            parts.push(format!(
                "{} destinations from {first} up, each its own host route, sent in turn (uniform: every destination once per {} frames)",
                self.dsts, self.dsts
            ));
        }
        if parts.is_empty() {
            return String::new();
        }
        format!(
            "table: {}; through 4 next hops on the servers' subnet; the same in every arm, seed {:#x}",
            parts.join("; "),
            self.seed
        )
    }
}

/// The addresses the server host takes for the next hops (so that it answers for them), as
/// `ip addr add` arguments with their prefix length.
pub fn host_addresses(v6: bool) -> Vec<String> {
    let mut a: Vec<String> = NEXT_HOPS4.iter().map(|h| format!("{h}/24")).collect();
    if v6 {
        a.extend(NEXT_HOPS6.iter().map(|h| format!("{h}/64")));
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scale(routes: u32, routes6: u32, dsts: u32, v6: bool) -> Scale {
        Scale { routes, routes6, dsts, v6, seed: SEED }
    }

    #[test]
    fn the_same_seed_gives_the_same_table_and_none_of_it_in_the_benchmarking_ranges() {
        let s = scale(20_000, 5_000, 0, true);
        let a = s.kernel_batch();
        assert_eq!(a, s.kernel_batch(), "reproducible");
        assert_ne!(a, Scale { seed: 7, ..s }.kernel_batch(), "another seed, another table");
        let lines: Vec<&str> = a.lines().collect();
        assert_eq!(lines.len(), 25_000);
        let range4: Prefix = RANGE4.parse().unwrap();
        let range6: Prefix6 = RANGE6.parse().unwrap();
        let mut seen = std::collections::HashSet::new();
        let bogons: Vec<Prefix> = tables::BOGONS4.iter().map(|b| b.parse().unwrap()).collect();
        for l in &lines {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!((w[0], w[1], w[3], w[5], w[6]), ("route", "replace", "via", "proto", "199"), "{l}");
            assert!(seen.insert(w[2]), "{} twice", w[2]);
            if let Ok(p) = w[2].parse::<Prefix>() {
                assert!(!p.overlaps(&range4) && !bogons.iter().any(|b| p.overlaps(b)), "{p}");
                assert!(NEXT_HOPS4.iter().any(|h| h.to_string() == w[4]));
            } else {
                let p: Prefix6 = w[2].parse().unwrap();
                assert!(!p.overlaps(&range6), "{p}");
                assert!(NEXT_HOPS6.iter().any(|h| h.to_string() == w[4]));
            }
        }
        // The routes file holds the same routes.
        let file = s.routes_file();
        assert_eq!(file.lines().count(), 25_000);
        assert!(file.lines().zip(&lines).all(|(f, k)| k.contains(f.split(" via ").next().unwrap())));
    }

    #[test]
    fn the_table_follows_an_internet_tables_length_mix() {
        let range4: Prefix = RANGE4.parse().unwrap();
        let t = tables::table4(100_000, SEED, range4);
        let share = |len: u8| t.iter().filter(|p| p.prefix_len() == len).count() as f64 / t.len() as f64;
        // /24 is 56.7 % of the draws (some repeat and are drawn again, more among the short ones).
        assert!((share(24) - 0.567).abs() < 0.02, "/24: {}", share(24));
        assert!((share(22) - 0.12).abs() < 0.01, "/22: {}", share(22));
        assert!(share(16) > 0.005 && share(32) > 0.0, "/16 {} /32 {}", share(16), share(32));
        let range6: Prefix6 = RANGE6.parse().unwrap();
        let t6 = tables::table6(50_000, SEED, range6);
        let share6 = |len: u8| t6.iter().filter(|p| p.prefix_len() == len).count() as f64 / t6.len() as f64;
        assert!((share6(48) - 0.445).abs() < 0.02, "/48: {}", share6(48));
        assert!((share6(32) - 0.14).abs() < 0.015, "/32: {}", share6(32));
    }

    #[test]
    fn every_destination_has_its_own_route_inside_the_range_past_the_rigs_subnets() {
        let s = scale(0, 0, DSTS4_MAX, false);
        assert_eq!(s.refusal(), None);
        let file = s.routes_file();
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(lines.len(), DSTS4_MAX as usize);
        assert_eq!(lines[0], "198.18.64.0/32 via 198.18.10.11");
        assert_eq!(lines[1], "198.18.64.1/32 via 198.18.10.12");
        assert_eq!(*lines.last().unwrap(), "198.19.255.255/32 via 198.18.10.14");
        let over = scale(0, 0, DSTS4_MAX + 1, false).refusal().unwrap();
        assert!(over.contains("at most 114688"), "{over}");
        let s6 = scale(0, 0, 3, true);
        assert_eq!(
            s6.routes_file(),
            "2001:2:0:8000::/128 via 2001:2:0:10::11\n2001:2:0:8000::1/128 via 2001:2:0:10::12\n2001:2:0:8000::2/128 via 2001:2:0:10::13\n"
        );
        assert_eq!(s6.first_dst(), Some(IpAddr::V6(DST6_FIRST)));
        assert!(scale(0, 1, 0, false).refusal().unwrap().contains("--ip 6"));
        assert!(scale(0, 0, DSTS6_MAX + 1, true).refusal().is_some());
        assert!(!scale(0, 0, 0, false).any() && scale(0, 0, 0, false).said().is_empty());
        assert!(scale(1000, 0, 10, false)
            .said()
            .contains("1000 IPv4 prefixes outside 198.18.0.0/15 and the special-purpose blocks (/8 0.1 %"));
    }
}
