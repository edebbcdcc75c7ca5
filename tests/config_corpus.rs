//! The bad-configuration corpus: every file in tests/fixtures/bad-configs is refused by
//! `xfwd router --check` (no root, nothing touched) with exit code 2 and one line naming the
//! file, line and column (where the error has a place) and what is wrong.

use std::process::Command;

const XFWD: &str = env!("CARGO_BIN_EXE_xfwd");
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bad-configs");

/// (file, what the error line says after `FILE:`).
const CORPUS: &[(&str, &str)] = &[
    ("01-unclosed-table.toml", "1:"),
    ("02-bad-string.toml", "2:"),
    ("03-unknown-top-key.toml", "1:1: unknown field `colour`"),
    ("04-unknown-interface-key.toml", "3:1: unknown field `mtu`"),
    ("05-addresses-not-a-list.toml", "3:13:"),
    ("06-name-not-a-string.toml", "2:8:"),
    ("07-queues-not-a-number.toml", "5:10:"),
    ("08-missing-name.toml", "1:1: missing field `name`"),
    ("09-duplicate-key.toml", "3:1:"),
    ("10-unknown-route-key.toml", "6:1: unknown field `gateway`"),
    ("11-no-interface.toml", "no [[interface]]"),
    ("12-empty-addresses.toml", "3:13: interface lo has no addresses"),
    ("13-address-without-length.toml", "3:14: `198.18.99.1` is not an address with a prefix length"),
    ("14-address-bad-length.toml", "3:14: prefix length 40 is out of range"),
    ("15-network-address.toml", "3:14: 198.18.99.0 is the network address"),
    ("16-broadcast-address.toml", "3:14: 198.18.99.255 is the broadcast address"),
    ("17-martian-address.toml", "3:14: 127.0.0.2 cannot be a router address"),
    ("18-not-an-ip.toml", "3:14: `198.18.999.1` is not an IPv4 address"),
    ("19-duplicate-interface.toml", "6:8: interface lo is configured twice"),
    ("20-overlapping-subnets.toml", "7:14: 198.18.99.7/16 overlaps 198.18.99.1/24 on lo"),
    ("21-repeated-address.toml", "3:32: 198.18.99.1/24 repeats 198.18.99.1/24 on lo"),
    ("22-route-host-bits.toml", "5:10: route prefix 10.0.0.1/8 has host bits set; did you mean 10.0.0.0/8?"),
    ("23-route-bad-prefix.toml", "5:10: route prefix `10.0.0.0` is not an IPv4 prefix"),
    ("24-route-no-target.toml", "5:10: route 10.0.0.0/8 needs `via"),
    ("25-route-both-targets.toml", "7:7: an IPv4 route takes `via` or `dev`, not both"),
    ("26-gateway-off-link.toml", "6:7: next hop 192.0.2.1 is not on any connected subnet"),
    ("27-gateway-is-the-box.toml", "6:7: next hop 198.18.99.1 is the box's own address on lo"),
    ("28-dev-unknown.toml", "6:7: dev eth9 is not a configured [[interface]]"),
    ("29-route-twice.toml", "9:10: route 10.0.0.0/8 is given twice"),
    ("30-neighbor-bad-mac.toml", "6:7: `02:00:00:00:00` is not a MAC address"),
    ("31-neighbor-multicast-mac.toml", "6:7: 01:00:5e:00:00:01 is not a station address"),
    ("32-neighbor-off-link.toml", "5:6: neighbor 192.0.2.1 is not on any connected subnet"),
    ("33-neighbor-twice.toml", "9:6: neighbor 198.18.99.2 is given twice"),
    ("34-bad-poll.toml", "5:8: workers.poll `sometimes` is not one of busy, adaptive"),
    ("35-bad-xdp-mode.toml", "5:12: workers.xdp_mode `offload` is not one of native, generic, auto"),
    ("36-zero-queues.toml", "5:10: workers.queues must be at least 1"),
    ("37-zero-neighbors.toml", "5:13: limits.neighbors must be at least 1"),
    ("38-huge-glean.toml", "5:15: limits.glean_queue is at most 4096"),
    ("39-unknown-interface.toml", "6:8: interface xfwdcorpus2 does not exist"),
    ("40-routes-file-missing.toml", "1:15: routes_file"),
    ("41-aqm-target-above-interval.toml", "5:10: aqm.target (200ms) must be below aqm.interval (100ms)"),
    ("42-bad-aqm-mode.toml", "5:8: aqm.mode `red` is not one of fq-codel, codel, off"),
    ("43-ipv6-link-local-address.toml", "3:32: fe80::1 is link-local: the port has one already"),
    ("44-ipv6-overlapping-prefixes.toml", "3:35: 2001:2:0:10::9/48 overlaps 2001:2:0:10::1/64 on lo"),
    ("45-ipv6-gateway-off-link.toml", "6:7: next hop 2001:9::1 is not on any connected IPv6 prefix"),
    ("46-ipv6-link-local-gateway-without-dev.toml", "6:7: next hop fe80::1 is link-local: say which interface"),
    ("47-ipv6-neighbor-link-local.toml", "5:6: neighbor fe80::2 is link-local"),
    (
        "48-ipv6-route-host-bits.toml",
        "5:10: route prefix 2001:2:100::1/48 has host bits set; did you mean 2001:2:100::/48?",
    ),
    ("49-kernel-fib-with-addresses.toml", "6:13: with [fib] source = \"kernel\" the addresses are the kernel's"),
    ("50-kernel-fib-with-route.toml", "8:10: with [fib] source = \"kernel\" the kernel's routes are used"),
    ("51-kernel-fib-with-neighbor.toml", "8:6: with [fib] source = \"kernel\" the kernel's neighbour table is used"),
    ("52-fib-bad-source.toml", "2:10: [fib] source = \"bgp\": use \"config\""),
    ("53-fib-table-without-kernel.toml", "2:9: [fib] table names a kernel routing table"),
    ("54-interface-without-addresses.toml", "2:8: interface lo has no addresses"),
    ("55-route-equal-to-connected.toml", "5:10: route 198.18.99.0/24 is the connected subnet of lo (198.18.99.1/24)"),
    (
        "56-ipv4-route-link-local-gateway-without-dev.toml",
        "6:7: next hop fe80::1 is link-local: say which interface it is on with `dev`",
    ),
];

#[test]
fn every_broken_file_is_refused_at_its_place_with_exit_2() {
    let on_disk = std::fs::read_dir(DIR).unwrap().count();
    assert_eq!(on_disk, CORPUS.len(), "every file in the corpus has an expectation");
    assert!(CORPUS.len() >= 30);
    for (file, expect) in CORPUS {
        let path = format!("{DIR}/{file}");
        let out = Command::new(XFWD).args(["router", "--config", &path, "--check"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert_eq!(err.lines().count(), 1, "{file}: one line: {err}");
        let want =
            format!("xfwd: error: {path}{}{expect}", if expect.starts_with(char::is_numeric) { ":" } else { ": " });
        assert!(err.starts_with(&want), "{file}:\n  got  {err}  want {want}");
    }
}
