//! The XDP program itself, run on single frames with `BPF_PROG_TEST_RUN`: no namespace, no
//! traffic, nothing attached (loading a BPF program needs root). The frames come in on `lo`,
//! registered as port 0; no socket is registered, so a frame the program hands to a worker
//! comes back as `XDP_PASS`, counted `pass-no-socket`, which tells it apart from the frames it
//! keeps for the kernel (`pass-kernel`) or drops.

mod common;

use xfwd_dataplane::io::program::xdp::{ProgramMode, Steer, XdpCounter, XdpError, XdpProgram, MAX_FRAME};
use xfwd_dataplane::io::{DataPath, PortInfo};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;

/// An IPv4 frame of `len` bytes to 198.18.1.2 (not the box's: to be routed), behind `tag`
/// (TCI) when given, EtherType `inner` under the tag.
fn frame(len: usize, tag: Option<u16>, inner: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x05, 0x02, 0, 0, 0, 0, 0x01];
    if let Some(tci) = tag {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&inner.to_be_bytes());
    let [hi, lo] = ((len - f.len()) as u16).to_be_bytes();
    f.extend_from_slice(&[0x45, 0, hi, lo, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 1, 2]);
    f.resize(len, 0xAB);
    f
}

fn load(mode: ProgramMode<'_>, path: DataPath) -> (XdpProgram, u32) {
    let lo = PortInfo::read("lo").unwrap();
    let ifindex = lo.ifindex;
    (XdpProgram::load(&[lo], (mode, path), Steer::ByQueue, None).unwrap(), ifindex)
}

fn counts(p: &XdpProgram) -> Vec<(&'static str, u64)> {
    let row = p.counter_reader().unwrap().port(0);
    XdpCounter::ALL.iter().map(|c| (c.name(), row[*c as usize])).filter(|(_, n)| *n > 0).collect()
}

#[test]
fn the_neighbour_maps_hold_as_many_neighbours_as_the_limits_say() {
    if !common::root_or_skip("the_neighbour_maps_hold_as_many_neighbours_as_the_limits_say") {
        return;
    }
    let lo = PortInfo::read("lo").unwrap();
    for n in [16, 100_000] {
        let mode = (ProgramMode::Router { local: &[], neighbors: n }, DataPath::Xdp);
        let p = XdpProgram::load(std::slice::from_ref(&lo), mode, Steer::ByQueue, None).unwrap();
        assert_eq!(p.fast_maps().unwrap().neighbor_room(), (n as usize, n as usize));
    }
}

#[test]
fn the_router_takes_a_priority_tag_off_and_keeps_other_tags_for_the_kernel() {
    if !common::root_or_skip("the_router_takes_a_priority_tag_off_and_keeps_other_tags_for_the_kernel") {
        return;
    }
    let (mut p, lo) = load(ProgramMode::Router { local: &[], neighbors: 64 }, DataPath::AfXdp);
    // VID 0, priority 5: routed as the untagged frame it stands for.
    let tagged = frame(100, Some(0xA000), 0x0800);
    let (verdict, out) = p.test_run(&tagged, lo, 0).unwrap();
    assert_eq!(verdict, XDP_PASS);
    assert_eq!(out, [&tagged[..12], &tagged[16..]].concat(), "the tag is gone, the MACs and the packet kept");
    assert_eq!(counts(&p), [("pass-no-socket", 1), ("priority-untagged", 1)]);
    // IPv6 behind a priority tag too (a global destination).
    let mut v6 = vec![0x02, 0, 0, 0, 0, 0x05, 0x02, 0, 0, 0, 0, 0x01, 0x81, 0, 0, 0, 0x86, 0xdd, 0x60];
    v6.resize(18 + 40, 0);
    v6[18 + 24..18 + 26].copy_from_slice(&[0x20, 0x01]);
    let (verdict, out) = p.test_run(&v6, lo, 0).unwrap();
    assert_eq!((verdict, out.len()), (XDP_PASS, v6.len() - 4));
    assert_eq!(counts(&p), [("pass-no-socket", 2), ("priority-untagged", 2)]);
    // A real VLAN (VID 5), and ARP behind a priority tag: the kernel's, untouched.
    for f in [frame(100, Some(0x0005), 0x0800), frame(100, Some(0x0000), 0x0806)] {
        let (verdict, out) = p.test_run(&f, lo, 0).unwrap();
        assert_eq!((verdict, out), (XDP_PASS, f));
    }
    assert_eq!(counts(&p), [("pass-no-socket", 2), ("pass-kernel", 2), ("priority-untagged", 2)]);
}

#[test]
fn the_bridge_forwards_priority_tagged_frames_as_they_are() {
    if !common::root_or_skip("the_bridge_forwards_priority_tagged_frames_as_they_are") {
        return;
    }
    let (mut p, lo) = load(ProgramMode::Bridge, DataPath::AfXdp);
    let tagged = frame(100, Some(0xA000), 0x0800);
    let (verdict, out) = p.test_run(&tagged, lo, 0).unwrap();
    assert_eq!((verdict, out), (XDP_PASS, tagged));
    assert_eq!(counts(&p), [("pass-no-socket", 1)]);
}

#[test]
fn a_frame_longer_than_a_socket_takes_is_dropped_and_counted_in_both_modes() {
    if !common::root_or_skip("a_frame_longer_than_a_socket_takes_is_dropped_and_counted_in_both_modes") {
        return;
    }
    for mode in [ProgramMode::Router { local: &[], neighbors: 64 }, ProgramMode::Bridge] {
        let (mut p, lo) = load(mode, DataPath::AfXdp);
        let longest = MAX_FRAME as usize;
        assert_eq!(p.test_run(&frame(longest, None, 0x0800), lo, 0).unwrap().0, XDP_PASS, "{mode:?}");
        assert_eq!(p.test_run(&frame(longest + 1, None, 0x0800), lo, 0).unwrap().0, XDP_DROP, "{mode:?}");
        assert_eq!(p.test_run(&frame(3000, None, 0x0800), lo, 0).unwrap().0, XDP_DROP, "{mode:?}");
        assert_eq!(counts(&p), [("pass-no-socket", 1), ("drop-too-long", 2)], "{mode:?}");
    }
}

#[test]
fn a_program_loaded_for_the_af_xdp_path_holds_none_of_the_xdp_path_and_cannot_turn_it_on() {
    if !common::root_or_skip("a_program_loaded_for_the_af_xdp_path_holds_none_of_the_xdp_path_and_cannot_turn_it_on") {
        return;
    }
    for mode in [ProgramMode::Router { local: &[], neighbors: 64 }, ProgramMode::Bridge] {
        let (plain, _) = load(mode, DataPath::AfXdp);
        let (full, _) = load(mode, DataPath::Xdp);
        let (without, with) = (plain.instructions().unwrap(), full.instructions().unwrap());
        // The XDP path is most of the program (the routes, the neighbours, the rewrite, the
        // stations): the verifier removed it, not a few branches of it.
        assert!(without * 2 < with, "{mode:?}: {without} instructions without the XDP path, {with} with it");
        let maps = plain.fast_maps().unwrap();
        assert!(matches!(maps.set_path(true), Err(XdpError::NotBuilt)), "{mode:?}");
        maps.set_path(false).unwrap();
        full.fast_maps().unwrap().set_path(true).unwrap();
    }
}

/// The XDP path (router mode): the program forwards the common case itself, byte for byte as
/// the workers' decision would, and hands every exception to the workers untouched.
mod xdp_path {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use xfwd_dataplane::action::{Action, SCRATCH_LEN};
    use xfwd_dataplane::io::program::dir4::Followed;
    use xfwd_dataplane::io::program::xdp::{FastMaps, LocalKind, ProgramMode, Steer, XdpProgram};
    use xfwd_dataplane::io::{DataPath, PortInfo};
    use xfwd_dataplane::l3::fib::no_advice;
    use xfwd_dataplane::l3::tables::{scope6, Mirrored4, Path, RouteKind};
    use xfwd_dataplane::l3::testing::{port, ETH4, ETH5};
    use xfwd_dataplane::l3::Prefix;
    use xfwd_dataplane::l3::{
        self, Key6, NeighborTable, NeighborTable6, RouteTarget, RouterState, RouterTables, V4, V6,
    };
    use xfwd_dataplane::routes::incremental::Incremental;
    use xfwd_dataplane::wire::checksum;
    use xfwd_dataplane::wire::ipv4::Ipv4Packet;
    use xfwd_dataplane::wire::ipv6::Ipv6Packet;
    use xfwd_dataplane::wire::MacAddr;
    use xfwd_dataplane::PortId;

    use super::{counts, XDP_PASS};

    const XDP_REDIRECT: u32 = 4;
    const GW: MacAddr = MacAddr([2, 0, 0, 0, 0x30, 2]);
    const HOST: MacAddr = MacAddr([2, 0, 0, 0, 0x30, 7]);
    const SENDER: MacAddr = MacAddr([2, 0, 0, 0, 0x10, 1]);
    const LINK_GW: MacAddr = MacAddr([2, 0, 0, 0, 0x30, 0x12]);

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn ip6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The reference router: a frame arrives on port 0 (eth5, here `lo`); 198.19.0.0/16 goes
    /// through 198.18.30.2 (resolved) and 198.20.0.0/16 through 198.18.30.3 (not), both on
    /// port 1 (eth4); 198.18.30.7 is a resolved host on eth4's subnet. IPv6 alike, on RFC
    /// 5180's 2001:2::/48: 2001:2:100::/48 through 2001:2:0:30::2 (resolved), 2001:2:200::/48
    /// through link-local fe80::2 on eth4 (resolved there), 2001:2:300::/48 through
    /// 2001:2:0:30::3 (not), 2001:2:0:30::7 a resolved host.
    struct World {
        p: XdpProgram,
        maps: FastMaps,
        lo: u32,
        t: RouterTables,
        n: NeighborTable,
        n6: NeighborTable6,
    }

    fn world() -> World {
        let lo = PortInfo::read("lo").unwrap();
        let ifindex = lo.ifindex;
        let local = [
            (ip("198.18.10.2").into(), LocalKind::Address),
            (ip("198.18.30.1").into(), LocalKind::Address),
            (ip6("2001:2:0:10::2").into(), LocalKind::Address),
            (ip6("2001:2:0:30::1").into(), LocalKind::Address),
        ];
        let p = XdpProgram::load(
            &[lo],
            (ProgramMode::Router { local: &local, neighbors: 64 }, DataPath::Xdp),
            Steer::ByQueue,
            None,
        )
        .unwrap();
        let statics = [
            ("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2"))),
            ("198.20.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.3"))),
        ];
        let statics6 = [
            ("2001:2:100::/48".parse().unwrap(), RouteTarget::via(ip6("2001:2:0:30::2"))),
            ("2001:2:200::/48".parse().unwrap(), RouteTarget::Via { gw: ip6("fe80::2"), dev: Some(PortId(1)) }),
            ("2001:2:300::/48".parse().unwrap(), RouteTarget::via(ip6("2001:2:0:30::3"))),
        ];
        let ports = vec![
            port("eth5", ETH5, &["198.18.10.2/24", "2001:2:0:10::2/64"]),
            port("eth4", ETH4, &["198.18.30.1/24", "2001:2:0:30::1/64"]),
        ];
        let t = RouterTables::build_dual(ports, &statics, &statics6, no_advice).unwrap();
        let n = NeighborTable::new(64);
        n.insert(ip("198.18.30.2"), GW, PortId(1), false).unwrap();
        n.insert(ip("198.18.30.7"), HOST, PortId(1), false).unwrap();
        let n6 = NeighborTable6::new6(64);
        n6.insert(Key6::global(ip6("2001:2:0:30::2")), GW, PortId(1), false).unwrap();
        n6.insert(scope6(ip6("fe80::2"), PortId(1)), LINK_GW, PortId(1), false).unwrap();
        n6.insert(Key6::global(ip6("2001:2:0:30::7")), HOST, PortId(1), false).unwrap();
        let mut maps: FastMaps = p.fast_maps().unwrap();
        // Both ports are `lo` to the devmap: BPF_PROG_TEST_RUN redirects nothing.
        maps.set_port(PortId(0), ifindex, ETH5, (true, false), xfwd_dataplane::io::frame_max(1500)).unwrap();
        maps.set_port(PortId(1), ifindex, ETH4, (true, false), xfwd_dataplane::io::frame_max(1500)).unwrap();
        maps.load(&t, &n, &n6).unwrap();
        maps.set_path(true).unwrap();
        World { p, maps, lo: ifindex, t, n, n6 }
    }

    /// A UDP packet of `ip_len` bytes from `src` to `dst` with `ttl`, to eth5's MAC, in a frame
    /// of at least `frame_len` bytes (the rest padding).
    fn udp(src: &str, dst: &str, ttl: u8, ip_len: usize, frame_len: usize) -> Vec<u8> {
        let mut f = vec![0u8; (14 + ip_len).max(frame_len)];
        f[0..6].copy_from_slice(&ETH5.0);
        f[6..12].copy_from_slice(&SENDER.0);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        Ipv4Packet::emit(&mut f[14..14 + ip_len], ip_len as u16, 7, ttl, 17, ip(src), ip(dst)).unwrap();
        f
    }

    /// A UDP packet with a payload of `payload` bytes from `src` to `dst` with hop limit
    /// `hops`, to eth5's MAC, in a frame of at least `frame_len` bytes (the rest padding).
    fn udp6(src: &str, dst: &str, hops: u8, payload: usize, frame_len: usize) -> Vec<u8> {
        let mut f = vec![0u8; (14 + 40 + payload).max(frame_len)];
        f[0..6].copy_from_slice(&ETH5.0);
        f[6..12].copy_from_slice(&SENDER.0);
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        Ipv6Packet::emit(&mut f[14..14 + 40 + payload], payload as u16, 17, hops, &ip6(src), &ip6(dst)).unwrap();
        f
    }

    /// The workers' decision on `frame`, and the frame as it leaves.
    fn workers(w: &World, frame: &[u8]) -> (Action, Vec<u8>) {
        let mut f = frame.to_vec();
        let mut st = RouterState::new(0, 1);
        let mut scratch = [0u8; SCRATCH_LEN];
        let a = if frame[12..14] == [0x86, 0xdd] {
            l3::decide::<V6>(&mut f, PortId(0), &w.t, &w.n, &w.n6, &mut st, 0, &mut scratch)
        } else {
            l3::decide::<V4>(&mut f, PortId(0), &w.t, &w.n, &w.n6, &mut st, 0, &mut scratch)
        };
        if let Action::ForwardTrimmed { len, .. } = a {
            f.truncate(usize::from(len));
        }
        (a, f)
    }

    #[test]
    fn the_common_case_is_forwarded_in_the_program_as_the_workers_forward_it() {
        if !crate::common::root_or_skip("the_common_case_is_forwarded_in_the_program_as_the_workers_forward_it") {
            return;
        }
        let mut w = world();
        let cases = [
            ("through a resolved gateway", udp("198.18.10.1", "198.19.1.1", 64, 100, 0)),
            ("to a resolved host on link", udp("198.18.10.1", "198.18.30.7", 64, 100, 0)),
            ("TTL 2 (the last hop that forwards)", udp("198.18.10.1", "198.19.1.1", 2, 100, 0)),
            ("padding past the packet trimmed", udp("198.18.10.1", "198.19.1.1", 64, 28, 200)),
            ("padded to Ethernet's minimum, kept", udp("198.18.10.1", "198.19.1.1", 64, 28, 60)),
            ("exactly the egress MTU", udp("198.18.10.1", "198.19.1.1", 64, 1500, 0)),
        ];
        for (why, frame) in &cases {
            let (verdict, out) = w.p.test_run(frame, w.lo, 0).unwrap();
            let (action, expected) = workers(&w, frame);
            assert!(
                matches!(action, Action::Forward(PortId(1)) | Action::ForwardTrimmed { port: PortId(1), .. }),
                "{why}: {action:?}"
            );
            assert_eq!(verdict, XDP_REDIRECT, "{why}");
            assert_eq!(out, expected, "{why}: the program's frame is the workers'");
            assert!(Ipv4Packet::new_checked(&out[14..]).unwrap().checksum_ok(), "{why}");
        }
        assert_eq!(counts(&w.p), [("xdp-forwarded", cases.len() as u64)]);
    }

    #[test]
    fn every_exception_goes_to_the_workers_untouched() {
        if !crate::common::root_or_skip("every_exception_goes_to_the_workers_untouched") {
            return;
        }
        let mut w = world();
        let mut bad_checksum = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        bad_checksum[14 + 10] ^= 0xff;
        // A 24-byte header: two NOPs, then the end of the options (RFC 791), checksummed.
        let mut options = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        options.splice(34..34, [1, 1, 0, 0]);
        options[14] = 0x46;
        options[16..18].copy_from_slice(&104u16.to_be_bytes());
        options[24..26].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&options[14..38]);
        options[24..26].copy_from_slice(&c.to_be_bytes());
        let mut not_ours = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        not_ours[5] ^= 1;
        let cases = [
            ("TTL 1: Time Exceeded", udp("198.18.10.1", "198.19.1.1", 1, 100, 0)),
            ("no route: Net Unreachable", udp("198.18.10.1", "203.0.113.9", 64, 100, 0)),
            ("unresolved gateway: gleaned", udp("198.18.10.1", "198.20.1.1", 64, 100, 0)),
            ("unresolved host: gleaned", udp("198.18.10.1", "198.18.30.9", 64, 100, 0)),
            ("above the egress MTU", udp("198.18.10.1", "198.19.1.1", 64, 1501, 0)),
            ("from the box's own address", udp("198.18.10.2", "198.19.1.1", 64, 100, 0)),
            ("from a martian source", udp("127.0.0.1", "198.19.1.1", 64, 100, 0)),
            ("to a link-local destination", udp("198.18.10.1", "169.254.1.1", 64, 100, 0)),
            ("a bad header checksum", bad_checksum),
            ("IP options", options),
            ("to another MAC than the port's", not_ours),
        ];
        for (why, frame) in &cases {
            let (verdict, out) = w.p.test_run(frame, w.lo, 0).unwrap();
            assert_eq!((verdict, &out), (XDP_PASS, frame), "{why}: to the worker (no socket here: passed), untouched");
            // What the workers then do is theirs (tests/router.rs); all but the options case
            // are frames they do not forward as they came.
            let (action, _) = workers(&w, frame);
            let forwarded = matches!(action, Action::Forward(_) | Action::ForwardTrimmed { .. });
            assert_eq!(forwarded, *why == "IP options", "{why}: {action:?}");
        }
        assert_eq!(counts(&w.p), [("pass-no-socket", cases.len() as u64)]);
    }

    #[test]
    fn the_common_case_of_ipv6_is_forwarded_in_the_program_as_the_workers_forward_it() {
        if !crate::common::root_or_skip("the_common_case_of_ipv6_is_forwarded_in_the_program_as_the_workers_forward_it")
        {
            return;
        }
        let mut w = world();
        let src = "2001:2:0:10::1";
        let cases = [
            ("through a resolved gateway", udp6(src, "2001:2:100::1", 64, 100, 0), GW),
            ("through a link-local gateway, keyed with its port", udp6(src, "2001:2:200::1", 64, 100, 0), LINK_GW),
            ("to a resolved host on link", udp6(src, "2001:2:0:30::7", 64, 100, 0), HOST),
            ("hop limit 2 (the last hop that forwards)", udp6(src, "2001:2:100::1", 2, 100, 0), GW),
            ("padding past the packet trimmed", udp6(src, "2001:2:100::1", 64, 8, 200), GW),
            ("exactly the egress MTU", udp6(src, "2001:2:100::1", 64, 1460, 0), GW),
        ];
        for (why, frame, mac) in &cases {
            let (verdict, out) = w.p.test_run(frame, w.lo, 0).unwrap();
            let (action, expected) = workers(&w, frame);
            assert!(
                matches!(action, Action::Forward(PortId(1)) | Action::ForwardTrimmed { port: PortId(1), .. }),
                "{why}: {action:?}"
            );
            assert_eq!(verdict, XDP_REDIRECT, "{why}");
            assert_eq!(out, expected, "{why}: the program's frame is the workers'");
            assert_eq!((&out[..6], out[14 + 7]), (&mac.0[..], frame[14 + 7] - 1), "{why}");
        }
        assert_eq!(counts(&w.p), [("xdp-forwarded", cases.len() as u64)]);
    }

    #[test]
    fn every_ipv6_exception_goes_to_the_workers_untouched() {
        if !crate::common::root_or_skip("every_ipv6_exception_goes_to_the_workers_untouched") {
            return;
        }
        let mut w = world();
        let src = "2001:2:0:10::1";
        let mut not_ours = udp6(src, "2001:2:100::1", 64, 100, 0);
        not_ours[5] ^= 1;
        let mut jumbo = udp6(src, "2001:2:100::1", 64, 100, 0);
        jumbo[14 + 4..14 + 6].copy_from_slice(&[0, 0]);
        jumbo[14 + 6] = 0; // behind a hop-by-hop header, as a jumbogram is (RFC 2675)
        let mut truncated = udp6(src, "2001:2:100::1", 64, 100, 0);
        truncated.truncate(14 + 40 + 50);
        let mut version = udp6(src, "2001:2:100::1", 64, 100, 0);
        version[14] = 0x40;
        let cases = [
            ("hop limit 1: Time Exceeded", udp6(src, "2001:2:100::1", 1, 100, 0)),
            ("no route: Destination Unreachable", udp6(src, "3fff::1", 64, 100, 0)),
            ("unresolved gateway: neighbour discovery", udp6(src, "2001:2:300::1", 64, 100, 0)),
            ("unresolved host: neighbour discovery", udp6(src, "2001:2:0:30::9", 64, 100, 0)),
            ("above the egress MTU: Packet Too Big", udp6(src, "2001:2:100::1", 64, 1461, 0)),
            ("from a link-local source: beyond scope", udp6("fe80::1", "2001:2:100::1", 64, 100, 0)),
            ("from the unspecified address", udp6("::", "2001:2:100::1", 64, 100, 0)),
            ("from an IPv4-mapped address", udp6("::ffff:198.18.10.1", "2001:2:100::1", 64, 100, 0)),
            ("to the loopback address", udp6(src, "::1", 64, 100, 0)),
            ("an echo request to the box", {
                let mut f = udp6(src, "2001:2:0:30::1", 64, 8, 0);
                f[14 + 6] = 58;
                f[14 + 40] = 128;
                f
            }),
            ("a jumbogram's payload length", jumbo),
            ("cut short", truncated),
            ("not version 6", version),
            ("to another MAC than the port's", not_ours),
        ];
        for (why, frame) in &cases {
            let (verdict, out) = w.p.test_run(frame, w.lo, 0).unwrap();
            assert_eq!((verdict, &out), (XDP_PASS, frame), "{why}: to the worker (no socket here: passed), untouched");
            let (action, _) = workers(&w, frame);
            let forwarded = matches!(action, Action::Forward(_) | Action::ForwardTrimmed { .. });
            assert!(!forwarded, "{why}: the workers do not forward it as it came either: {action:?}");
        }
        assert_eq!(counts(&w.p), [("pass-no-socket", cases.len() as u64)]);
    }

    #[test]
    fn an_ipv6_link_local_gateway_is_looked_up_on_its_port_only() {
        if !crate::common::root_or_skip("an_ipv6_link_local_gateway_is_looked_up_on_its_port_only") {
            return;
        }
        let mut w = world();
        let frame = udp6("2001:2:0:10::1", "2001:2:200::1", 64, 100, 0);
        assert_eq!(w.p.test_run(&frame, w.lo, 0).unwrap().0, XDP_REDIRECT);
        // fe80::2 known on port 0 only: another router; the route's (port 1) is unresolved.
        w.maps.remove_neighbor6(scope6(ip6("fe80::2"), PortId(1)), PortId(1));
        w.maps.set_neighbor6(scope6(ip6("fe80::2"), PortId(0)), PortId(0), LINK_GW).unwrap();
        assert_eq!(w.p.test_run(&frame, w.lo, 0).unwrap(), (XDP_PASS, frame.clone()), "to the workers");
        // A reload that sends 2001:2:200::/48 through a global gateway instead: swapped whole.
        let statics6 = [("2001:2:200::/48".parse().unwrap(), RouteTarget::via(ip6("2001:2:0:30::7")))];
        let t2 = RouterTables::build_dual(w.t.ports.clone(), &[], &statics6, no_advice).unwrap();
        w.maps.load_routes(&l3::export::fib6(&t2)).unwrap();
        let (v, out) = w.p.test_run(&frame, w.lo, 0).unwrap();
        assert_eq!((v, &out[..6]), (XDP_REDIRECT, &HOST.0[..]), "the new table's gateway");
        // And back, entry by entry.
        let writes = w.maps.update_routes(&l3::export::fib6(&t2), &l3::export::fib6(&w.t)).unwrap();
        assert_eq!(writes, 3, "one route changed, two added");
        assert_eq!(w.p.test_run(&frame, w.lo, 0).unwrap().0, XDP_PASS);
    }

    #[test]
    fn a_gateways_address_claimed_on_another_port_is_another_neighbour() {
        if !crate::common::root_or_skip("a_gateways_address_claimed_on_another_port_is_another_neighbour") {
            return;
        }
        // A host on port 0 claims the address of port 1's gateway (a spoofed ARP request the
        // kernel answers with an entry on port 0; the workers' table keeps it beside the
        // gateway's): the program keeps sending the gateway's frames to the gateway.
        let mut w = world();
        let via_gw = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        let via_gw6 = udp6("2001:2:0:10::1", "2001:2:100::1", 64, 100, 0);
        let spoofer = MacAddr([2, 0, 0, 0, 0x66, 0x66]);
        let before = [w.p.test_run(&via_gw, w.lo, 0).unwrap(), w.p.test_run(&via_gw6, w.lo, 0).unwrap()];
        assert!(before.iter().all(|(v, _)| *v == XDP_REDIRECT), "both gateways resolved on port 1");
        w.maps.set_neighbor(ip("198.18.30.2"), PortId(0), spoofer).unwrap();
        w.maps.set_neighbor6(Key6::global(ip6("2001:2:0:30::2")), PortId(0), spoofer).unwrap();
        for (frame, was) in [(&via_gw, &before[0]), (&via_gw6, &before[1])] {
            assert_eq!(&w.p.test_run(frame, w.lo, 0).unwrap(), was, "to the gateway, as before");
        }
        // The gateway's own entry gone, the claim on port 0 does not stand in for it.
        w.maps.remove_neighbor(ip("198.18.30.2"), PortId(1));
        w.maps.remove_neighbor6(Key6::global(ip6("2001:2:0:30::2")), PortId(1));
        for frame in [&via_gw, &via_gw6] {
            assert_eq!(w.p.test_run(frame, w.lo, 0).unwrap(), (XDP_PASS, frame.clone()), "to the workers");
        }
    }

    #[test]
    fn an_egress_that_takes_no_redirects_leaves_its_frames_to_the_workers() {
        if !crate::common::root_or_skip("an_egress_that_takes_no_redirects_leaves_its_frames_to_the_workers") {
            return;
        }
        let mut w = world();
        let frame = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        w.maps.set_port(PortId(1), w.lo, ETH4, (false, false), xfwd_dataplane::io::frame_max(1500)).unwrap();
        assert_eq!(w.p.test_run(&frame, w.lo, 0).unwrap(), (XDP_PASS, frame.clone()), "to the workers, untouched");
        w.maps.set_port(PortId(1), w.lo, ETH4, (true, false), xfwd_dataplane::io::frame_max(1500)).unwrap();
        assert_eq!(w.p.test_run(&frame, w.lo, 0).unwrap().0, XDP_REDIRECT, "ready again: the program's");
        assert_eq!(counts(&w.p), [("pass-no-socket", 1), ("xdp-forwarded", 1)]);
    }

    #[test]
    fn a_neighbour_change_is_one_write_and_a_reload_swaps_the_whole_table() {
        if !crate::common::root_or_skip("a_neighbour_change_is_one_write_and_a_reload_swaps_the_whole_table") {
            return;
        }
        let mut w = world();
        let via_gw = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        let verdict = |w: &mut World, f: &[u8]| w.p.test_run(f, w.lo, 0).unwrap();
        assert_eq!(verdict(&mut w, &via_gw).0, XDP_REDIRECT);
        // The gateway forgotten: its routes are the workers' (they glean), with no route written.
        w.maps.remove_neighbor(ip("198.18.30.2"), PortId(1));
        assert_eq!(verdict(&mut w, &via_gw), (XDP_PASS, via_gw.clone()));
        // Learnt again with another MAC: forwarded to that one.
        let new_mac = MacAddr([2, 0, 0, 0, 0x30, 0x22]);
        w.maps.set_neighbor(ip("198.18.30.2"), PortId(1), new_mac).unwrap();
        let (v, out) = verdict(&mut w, &via_gw);
        assert_eq!((v, &out[..6]), (XDP_REDIRECT, &new_mac.0[..]));
        // Kernel mode's tables (`routes::incremental`), made whole: 198.19.0.0/16 now through
        // 198.18.30.7 (a resolved host), 198.20.0.0/16 gone. The program copies the FIB whole.
        let via = |p: &str, gw: &str| Mirrored4 {
            prefix: p.parse().unwrap(),
            kind: RouteKind::Unicast,
            paths: vec![Path { gw: Some(ip(gw).into()), port: Some(PortId(1)), weight: 1 }],
            mtu: 0,
            protocol: 4,
            local_table: false,
        };
        let (p19, p20): (Prefix, Prefix) = ("198.19.0.0/16".parse().unwrap(), "198.20.0.0/16".parse().unwrap());
        let second = [via("198.19.0.0/16", "198.18.30.7")];
        let mut inc = Incremental::full(w.t.ports.clone(), second.to_vec(), &[], (0, 1), no_advice).unwrap();
        let memory_before = w.maps.routes_memory();
        assert_eq!(w.maps.follow4(&inc.live()).unwrap(), Followed::Copied);
        assert_eq!(w.maps.follow4(&inc.live()).unwrap(), Followed::Same, "the tables it holds");
        let (v, out) = verdict(&mut w, &via_gw);
        assert_eq!((v, &out[..6]), (XDP_REDIRECT, &HOST.0[..]), "the new table's gateway");
        assert!(memory_before.is_some() && w.maps.routes_memory().is_some(), "the table's memory is read");
        // Changed prefix by prefix, as the kernel's changes come (the route changes, 198.20/16
        // returns): the set not in the slot holds the world's tables, not in this chain, so
        // it is copied into whole once; from then on the program repaints the prefixes the
        // tables say changed.
        let first = [via("198.19.0.0/16", "198.18.30.2"), via("198.20.0.0/16", "198.18.30.3")];
        let publish = |inc: &mut Incremental, routes: &[Mirrored4]| {
            inc.set4(p19, routes.iter().find(|r| r.prefix == p19)).unwrap();
            inc.set4(p20, routes.iter().find(|r| r.prefix == p20)).unwrap();
            inc.publish(true).unwrap().unwrap()
        };
        let t = publish(&mut inc, &first);
        assert_eq!(w.maps.follow4(&t).unwrap(), Followed::Copied);
        let (v, out) = verdict(&mut w, &via_gw);
        assert_eq!((v, &out[..6]), (XDP_REDIRECT, &new_mac.0[..]));
        // Back and forth twice more: each change painted into the table not in the slot (which
        // first catches up with the change before), then swapped in.
        let to_gone = udp("198.18.10.1", "198.20.1.1", 64, 100, 0);
        w.maps.set_neighbor(ip("198.18.30.3"), PortId(1), MacAddr([2, 0, 0, 0, 0x30, 0x33])).unwrap();
        let forwarded_there = verdict(&mut w, &to_gone).0;
        assert_eq!(forwarded_there, XDP_REDIRECT, "198.20.0.0/16 is routed in the first table");
        for _ in 0..2 {
            let t = publish(&mut inc, &second);
            assert_eq!(w.maps.follow4(&t).unwrap(), Followed::Painted(2));
            let (v, out) = verdict(&mut w, &via_gw);
            assert_eq!((v, &out[..6]), (XDP_REDIRECT, &HOST.0[..]), "the second table's gateway");
            assert_eq!(verdict(&mut w, &to_gone), (XDP_PASS, to_gone.clone()), "no route: the workers'");
            // Published twice before the program follows: both changes, from the chain.
            publish(&mut inc, &first);
            let t = publish(&mut inc, &first);
            assert_eq!(w.maps.follow4(&t).unwrap(), Followed::Painted(2));
            let (v, out) = verdict(&mut w, &via_gw);
            assert_eq!((v, &out[..6]), (XDP_REDIRECT, &new_mac.0[..]), "the first table's gateway");
            assert_eq!(verdict(&mut w, &to_gone).0, XDP_REDIRECT);
        }
        // Tables from elsewhere (a reload from the file): copied whole.
        assert_eq!(w.maps.follow4(&w.t).unwrap(), Followed::Copied);
        assert_eq!(verdict(&mut w, &to_gone).0, XDP_REDIRECT);
    }

    #[test]
    fn equal_cost_groups_are_forwarded_in_the_program_each_flow_through_the_workers_member() {
        if !crate::common::root_or_skip(
            "equal_cost_groups_are_forwarded_in_the_program_each_flow_through_the_workers_member",
        ) {
            return;
        }
        let mut w = world();
        // Four gateways, each with its own MAC; 198.19/16 over all four, 198.20/16 over two
        // with weights 1 and 3.
        let gws = ["198.18.30.2", "198.18.30.3", "198.18.30.4", "198.18.30.5"];
        let mac = |i: usize| MacAddr([2, 0, 0, 0, 0x40, i as u8]);
        let path = |gw: &str, weight| Path { gw: Some(ip(gw).into()), port: Some(PortId(1)), weight };
        let route = |p: &str, paths| Mirrored4 {
            prefix: p.parse().unwrap(),
            kind: RouteKind::Unicast,
            paths,
            mtu: 0,
            protocol: 4,
            local_table: false,
        };
        let routes = [
            route("198.19.0.0/16", gws.iter().map(|g| path(g, 1)).collect()),
            route("198.20.0.0/16", vec![path(gws[0], 1), path(gws[1], 3)]),
        ];
        let n = NeighborTable::new(64);
        for (i, g) in gws.iter().enumerate() {
            n.insert(ip(g), mac(i), PortId(1), false).unwrap();
        }
        let t = RouterTables::build_mirrored(w.t.ports.clone(), &routes, &[], no_advice).unwrap();
        w.maps.load(&t, &n, &w.n6).unwrap();
        (w.t, w.n) = (t, n);
        // Flows of every kind the hash tells apart: UDP and TCP by their ports, ICMP and GRE
        // by addresses alone, fragments (first, middle, last) without their ports.
        let mut frames = Vec::new();
        for i in 0..512u32 {
            let dst = if i % 3 == 0 {
                format!("198.20.{}.{}", i % 7, i % 200 + 1)
            } else {
                format!("198.19.{}.{}", i % 11, i % 250 + 1)
            };
            let src = format!("198.18.10.{}", i % 5 + 10);
            let mut f = udp(&src, &dst, 64, 100, 0);
            f[23] = [17, 6, 1, 47][(i % 4) as usize];
            f[34..36].copy_from_slice(&(1024 + i as u16 * 7).to_be_bytes());
            f[36..38].copy_from_slice(&(53 + i as u16 % 5).to_be_bytes());
            match i % 13 {
                0 => f[20] = 0x20,                             // more fragments, offset 0
                1 => f[20..22].copy_from_slice(&[0x20, 0x10]), // a middle one
                2 => f[21] = 0x20,                             // the last
                _ => {}
            }
            f[24..26].copy_from_slice(&[0, 0]);
            let c = checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            frames.push(f);
        }
        let mut seen = std::collections::BTreeMap::new();
        for (i, frame) in frames.iter().enumerate() {
            let (verdict, out) = w.p.test_run(frame, w.lo, 0).unwrap();
            let (action, expected) = workers(&w, frame);
            assert!(matches!(action, Action::Forward(PortId(1))), "frame {i}: {action:?}");
            assert_eq!(verdict, XDP_REDIRECT, "frame {i}: forwarded in the program");
            assert_eq!(out, expected, "frame {i}: through the member the workers pick, byte for byte");
            *seen.entry((frame[30..32].to_vec(), out[5])).or_insert(0) += 1;
        }
        assert_eq!(counts(&w.p), [("xdp-forwarded", frames.len() as u64)]);
        // The premise: flows went through every member (198.19/16 through all four gateways,
        // 198.20/16 through both, the second about three times as often).
        let through = |net: u8, gw: u8| seen.get(&(vec![198, net], gw)).copied().unwrap_or(0);
        assert!((0..4).all(|g| through(19, g) > 20), "{seen:?}");
        assert!(through(20, 0) > 10 && through(20, 1) > 2 * through(20, 0), "{seen:?}");
    }

    #[test]
    fn an_ipv4_table_beyond_the_programs_room_goes_to_the_workers_and_is_not_tried_again() {
        if !crate::common::root_or_skip(
            "an_ipv4_table_beyond_the_programs_room_goes_to_the_workers_and_is_not_tried_again",
        ) {
            return;
        }
        let mut w = world();
        let via_gw = udp("198.18.10.1", "198.19.1.1", 64, 100, 0);
        assert_eq!(w.p.test_run(&via_gw, w.lo, 0).unwrap().0, XDP_REDIRECT);
        // One /25 in each of one /24 more than the program's table has groups for.
        let groups = xfwd_dataplane::io::program::dir4::GROUPS;
        let mut statics = vec![("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2")))];
        statics.extend((0..=groups as u32).map(|i| {
            (Prefix::truncate(Ipv4Addr::from(0x0b00_0000 + (i << 8)), 25), RouteTarget::via(ip("198.18.30.2")))
        }));
        let big = RouterTables::build(w.t.ports.clone(), &statics).unwrap();
        assert!(big.v4.fib.groups_used() > groups);
        let e = w.maps.follow4(&big).unwrap_err().to_string();
        assert!(e.contains("workers forward every IPv4 frame"), "{e}");
        assert_eq!(w.p.test_run(&via_gw, w.lo, 0).unwrap(), (XDP_PASS, via_gw.clone()), "the workers'");
        assert_eq!(w.maps.follow4(&big).unwrap(), Followed::Same, "refused once, not tried again");
        assert_eq!(w.maps.follow4(&w.t).unwrap(), Followed::Copied);
        assert_eq!(w.p.test_run(&via_gw, w.lo, 0).unwrap().0, XDP_REDIRECT, "the program's again");
    }
}

/// The bridge's XDP path: frames between stations the program knows on their ports are
/// forwarded (or flooded) in the program; everything the workers must learn, drop or flood
/// themselves comes back as `XDP_PASS`, untouched.
mod bridge_xdp_path {
    use std::time::Duration;

    use xfwd_dataplane::io::program::xdp::{FastMaps, ProgramMode, XdpCounter, XdpProgram};
    use xfwd_dataplane::io::DataPath;
    use xfwd_dataplane::wire::MacAddr;
    use xfwd_dataplane::PortId;

    use super::{counts, load, XDP_PASS};

    const XDP_REDIRECT: u32 = 4;
    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);
    const C: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xc]);
    const NO_MAC: MacAddr = MacAddr([0; 6]);

    fn eth(dst: MacAddr, src: MacAddr, len: usize) -> Vec<u8> {
        let mut f = [dst.0, src.0].concat();
        f.extend_from_slice(&[0x08, 0x00]);
        f.resize(len, 0x5a);
        f
    }

    /// The program with its path on, both ports `lo` to the devmap (BPF_PROG_TEST_RUN
    /// redirects nothing), each taking frames of up to `max_frame` bytes, and frames coming in
    /// on port 0: A is there, B behind port 1, C behind port 0 as well.
    fn world(max_frame: u32) -> (XdpProgram, FastMaps, u32) {
        let (p, lo) = load(ProgramMode::Bridge, DataPath::Xdp);
        let maps = p.fast_maps().unwrap();
        for port in [PortId(0), PortId(1)] {
            maps.set_port(port, lo, NO_MAC, (true, false), max_frame).unwrap();
        }
        maps.set_station(A, PortId(0)).unwrap();
        maps.set_station(B, PortId(1)).unwrap();
        maps.set_station(C, PortId(0)).unwrap();
        maps.set_flood(max_frame).unwrap();
        maps.set_path(true).unwrap();
        (p, maps, lo)
    }

    #[test]
    fn known_stations_are_forwarded_and_flooded_in_the_program_and_the_rest_goes_to_the_workers() {
        if !crate::common::root_or_skip(
            "known_stations_are_forwarded_and_flooded_in_the_program_and_the_rest_goes_to_the_workers",
        ) {
            return;
        }
        let (mut p, maps, lo) = world(100);
        let mut run = |f: &[u8]| {
            let (verdict, out) = p.test_run(f, lo, 0).unwrap();
            assert_eq!(out, f, "a bridge leaves the frame as it came");
            verdict
        };
        let to_b = eth(B, A, 60);
        maps.set_path(false).unwrap();
        assert_eq!(run(&to_b), XDP_PASS, "the path is off: the workers'");
        maps.set_path(true).unwrap();
        assert_eq!(run(&to_b), XDP_REDIRECT, "A to B, both known");
        assert_eq!(run(&eth(B, A, 100)), XDP_REDIRECT, "as long as port 1 takes");
        assert_eq!(run(&eth(MacAddr::BROADCAST, A, 100)), XDP_REDIRECT, "broadcast from a known station");
        assert_eq!(run(&eth(MacAddr([2, 0, 0, 0, 0, 0xd]), A, 60)), XDP_REDIRECT, "to an unknown station");
        let workers = [
            ("from an unknown station: the workers learn it", eth(B, MacAddr([2, 0, 0, 0, 0, 0xe]), 60)),
            ("from a station known on another port: the workers move it", eth(A, B, 60)),
            ("to a station behind the ingress port: the workers drop it", eth(C, A, 60)),
            ("from a group address: the workers drop it", eth(B, MacAddr([3, 0, 0, 0, 0, 1]), 60)),
            ("longer than port 1 takes: the workers drop and count it", eth(B, A, 101)),
            ("a flood longer than a port takes: the workers flood it", eth(MacAddr::BROADCAST, A, 101)),
        ];
        for (why, f) in &workers {
            assert_eq!(run(f), XDP_PASS, "{why}");
        }
        // A port that takes no redirects: nothing to it, and no flooding, in the program.
        maps.set_port(PortId(1), lo, NO_MAC, (false, false), 100).unwrap();
        maps.set_flood(0).unwrap();
        assert_eq!(run(&to_b), XDP_PASS, "egress not ready");
        assert_eq!(run(&eth(MacAddr::BROADCAST, A, 60)), XDP_PASS, "flooding left to the workers");
        let n = |c: XdpCounter| counts(&p).iter().find(|(k, _)| *k == c.name()).map_or(0, |(_, v)| *v);
        assert_eq!((n(XdpCounter::Forwarded), n(XdpCounter::Flooded)), (2, 2));
        assert_eq!(n(XdpCounter::PassNoSocket), 1 + workers.len() as u64 + 2);
    }

    #[test]
    fn known_unicast_between_two_isolated_ports_goes_to_the_workers() {
        if !crate::common::root_or_skip("known_unicast_between_two_isolated_ports_goes_to_the_workers") {
            return;
        }
        let (mut p, maps, lo) = world(100);
        let mut run = |f: &[u8]| p.test_run(f, lo, 0).unwrap().0;
        let to_b = eth(B, A, 60);
        let isolate = |which: [bool; 2]| {
            for (i, iso) in which.into_iter().enumerate() {
                maps.set_port(PortId(i as u8), lo, NO_MAC, (true, iso), 100).unwrap();
            }
        };
        isolate([true, false]);
        assert_eq!(run(&to_b), XDP_REDIRECT, "from an isolated port to one that is not");
        isolate([false, true]);
        assert_eq!(run(&to_b), XDP_REDIRECT, "to an isolated port from one that is not");
        isolate([true, true]);
        assert_eq!(run(&to_b), XDP_PASS, "isolated to isolated: the workers drop it as isolated");
        isolate([false, false]);
        assert_eq!(run(&to_b), XDP_REDIRECT);
    }

    #[test]
    fn the_program_marks_the_stations_it_forwards_from() {
        if !crate::common::root_or_skip("the_program_marks_the_stations_it_forwards_from") {
            return;
        }
        let (mut p, maps, lo) = world(xfwd_dataplane::io::frame_max(1500));
        // Both written now; more than a second later (the program marks a station at most
        // once a second), a frame from A marks A, not B.
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(p.test_run(&eth(B, A, 60), lo, 0).unwrap().0, XDP_REDIRECT);
        let stations = maps.stations();
        let ago =
            |mac: MacAddr| stations.iter().find(|(m, _, _)| *m == mac).map(|&(_, port, ago)| (port, ago)).unwrap();
        let ((port_a, a), (port_b, b)) = (ago(A), ago(B));
        assert_eq!((port_a, port_b), (PortId(0), PortId(1)));
        // The stamps are the coarse monotonic clock's (a tick apart at most: 10 ms at HZ=100):
        // two readings 1.1 s apart may differ by a tick less.
        assert!(b >= Duration::from_millis(1100 - 10), "B, not forwarded from, was written {b:?} ago");
        assert!(a + Duration::from_millis(1000) < b, "A marked after the sleep: {a:?} ago, B {b:?} ago");
    }
}
