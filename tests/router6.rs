//! `xfwd router` with IPv6 end to end on the dual-stack reference topology (`Rig::router6`):
//! h1 behind eth5 on 2001:2:0:10::1, h2 behind eth4 on 2001:2:0:30::2 with 2001:2:0:1000::/52
//! routed to it (all inside RFC 5180's 2001:2::/48); the box's kernel holds only link-local addresses and does not forward IPv6, so
//! whatever crosses or answers is xfwd. Needs root; each test builds its own rig and removes it
//! on drop.

mod common;

use std::net::Ipv6Addr;
use std::time::Duration;

use common::{
    capture, control_path, cpus_or_skip, drops_but_aqm, mac_bytes, mac_of, root_or_skip, send_raw, serial, show, stats,
    stop_clean, wait_line, XFWD,
};
use etherparse::{Ipv6Header, PacketBuilder};
use xfwd::rig::{self, Rig, XfwdProcess};

const RIG_CONFIG6: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-router6.toml");
const H1: &str = "2001:2:0:10::1";
const H2: &str = "2001:2:0:30::2";
const H2_BEHIND: &str = "2001:2:0:1000::2";

fn start(r: &Rig, control: &str, extra: &[&str]) -> XfwdProcess {
    let mut args = vec!["router", "--config", RIG_CONFIG6, "--control", control];
    args.extend_from_slice(extra);
    r.start_xfwd(XFWD, &args).unwrap()
}

fn ping(from: &rig::Netns, args: &[&str]) -> String {
    let out = from.command("ping").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits (up to 10 s) until `show neighbors` contains `what`; returns the last output.
fn wait_neighbor(control: &str, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n = show(control, "neighbors");
        if n.contains(what) || std::time::Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn drop_count(s: &xfwd_dataplane::io::Report, port: usize, reason: &str) -> u64 {
    s.ports[port].total.drops.iter().find(|(k, _)| k == reason).map_or(0, |(_, v)| *v)
}

#[test]
fn ping6_and_tcp_cross_both_ways_and_a_static_route_with_xfwds_own_neighbour_discovery() {
    if !root_or_skip("ping6_and_tcp_cross_both_ways_and_a_static_route_with_xfwds_own_neighbour_discovery")
        || !cpus_or_skip("ping6_and_tcp_cross_both_ways_and_a_static_route_with_xfwds_own_neighbour_discovery", 2)
    {
        return;
    }
    let _g = serial();
    let r = Rig::router6(1).unwrap();
    let control = control_path("rt6-ref");
    let mut x = start(&r, &control, &[]);
    // No static neighbours: the first packets wait for xfwd's own solicitations, and the
    // hosts resolve the router's addresses from its advertisements.
    Rig::ping_until(&r.h2, H1, common::PATH_UP).unwrap();
    Rig::ping_until(&r.h1, H2, common::PATH_UP).unwrap();
    Rig::ping_until(&r.h1, H2_BEHIND, common::PATH_UP).unwrap();
    let neighbors = show(&control, "neighbors");
    assert!(neighbors.contains(&format!("{H1} dev eth5 lladdr {}", mac_of(&r.h1, "eth0"))), "{neighbors}");
    assert!(neighbors.contains(&format!("{H2} dev eth4 lladdr {}", mac_of(&r.h2, "eth0"))), "{neighbors}");
    // A host that asks for the router's address learns it from an advertisement with the
    // Router flag (an entry made from xfwd's own solicitation carries no flag, so it is
    // flushed first).
    r.h1.ip(&["-6", "neigh", "flush", "dev", "eth0"]).unwrap();
    Rig::ping_until(&r.h1, H2, common::PATH_UP).unwrap();
    let neigh = r.h1.ip(&["-6", "neigh", "show", "2001:2:0:10::2"]).unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout).into_owned();
    assert!(neigh.contains(&mac_of(&r.boxns, "eth5")) && neigh.contains("router"), "h1's entry: {neigh}");
    let s = stats(&control);
    let ndp = |n: &str| s.ndp.iter().find(|(k, _)| k == n).map_or(0, |(_, v)| *v);
    // xfwd asked for a neighbour at least once (h2 asked for the router first, and was learnt
    // from its solicitation, as Linux learns), answered both hosts, and learnt both.
    assert!(ndp("requests-sent") >= 1 && ndp("replies-sent") >= 2 && ndp("learnt") >= 2, "{:?}", s.ndp);
    assert!(ndp("glean-sent") >= 1, "the first ping waited for resolution and was then sent: {:?}", s.ndp);
    // The box's own addresses answer echo requests.
    Rig::ping_until(&r.h2, "2001:2:0:30::1", common::PATH_UP).unwrap();
    Rig::ping_until(&r.h2, "2001:2:0:10::2", common::PATH_UP).unwrap();

    // TCP across, the reference method's shape: two flows with fixed client ports.
    let tcp = rig::iperf3_tcp(&r.h1, &r.h2, H1, 2, 2, 1).unwrap();
    assert!(tcp.flows_bps.iter().all(|&b| b > 0.0), "a flow moved nothing: {:?}", tcp.flows_bps);
    let s = stats(&control);
    for p in &s.ports {
        assert_eq!(drops_but_aqm(&p.total), [], "{}: {:?}", p.name, p.total.drops);
    }
    stop_clean(&mut x);
}

#[test]
fn hop_limit_no_route_packet_too_big_and_unresolvable_get_their_icmpv6_errors() {
    if !root_or_skip("hop_limit_no_route_packet_too_big_and_unresolvable_get_their_icmpv6_errors") {
        return;
    }
    let _g = serial();
    let r = Rig::router6(1).unwrap();
    // eth4 (towards h2) with a 1,400-byte MTU; h1's link stays at 1,500.
    r.boxns.ip(&["link", "set", "eth4", "mtu", "1400"]).unwrap();
    let control = control_path("rt6-icmp");
    let mut x = start(&r, &control, &[]);
    Rig::ping_until(&r.h1, H2, common::PATH_UP).unwrap();
    // traceroute6's first probe: Time Exceeded from the address Linux would pick.
    let out = ping(&r.h1, &["-c", "1", "-W", "2", "-t", "1", H2]);
    assert!(out.contains("From 2001:2:0:10::2") && out.contains("Time exceeded: Hop limit"), "{out}");
    // A prefix the router does not know.
    let out = ping(&r.h1, &["-c", "1", "-W", "2", "2001:2:0:999::7"]);
    assert!(out.contains("From 2001:2:0:10::2") && out.contains("Destination unreachable: No route"), "{out}");
    // 1,500 bytes of IPv6 towards the 1,400-byte egress: Packet Too Big carrying 1400.
    let out = ping(&r.h1, &["-c", "1", "-W", "2", "-s", "1452", "-M", "do", H2]);
    assert!(out.contains("From 2001:2:0:10::2") && out.contains("Packet too big: mtu=1400"), "{out}");
    // A neighbour that never answers: Address Unreachable once resolution gives up.
    let out = ping(&r.h1, &["-c", "1", "-W", "6", "2001:2:0:30::99"]);
    assert!(
        out.contains("From 2001:2:0:10::2") && out.contains("Destination unreachable: Address unreachable"),
        "{out}"
    );
    let s = stats(&control);
    assert_eq!(drop_count(&s, 0, "hop-limit-exceeded"), 1, "{:?}", s.ports[0].total.drops);
    assert_eq!(drop_count(&s, 0, "no-route"), 1, "{:?}", s.ports[0].total.drops);
    assert_eq!(drop_count(&s, 0, "packet-too-big"), 1, "{:?}", s.ports[0].total.drops);
    let ndp = |n: &str| s.ndp.iter().find(|(k, _)| k == n).map_or(0, |(_, v)| *v);
    assert_eq!((ndp("unresolved"), ndp("host-unreachable-sent")), (1, 1), "{:?}", s.ndp);
    stop_clean(&mut x);
}

/// What one arm did with the crafted packets: the frames that reached h1 (forwarded, sorted),
/// the ICMPv6 errors h2 got from the router as (type, code, rest word, source, the quoted
/// packet), and the targets of the solicited neighbour advertisements h2 got (sorted). Both
/// quote as much as fits in 1,280 bytes, so the whole quote is compared.
type Observed = (Vec<Vec<u8>>, Vec<(u8, u8, u32, Ipv6Addr, Vec<u8>)>, Vec<Ipv6Addr>);

fn observe(r: &Rig, frames: &[Vec<u8>]) -> Observed {
    // The captures run 4 s past the second send: on a loaded machine the frames an arm holds
    // while it resolves its next hop, and the answers, can take seconds to come out.
    let window = Duration::from_millis(5000);
    let at_h1 = capture(r.h1.name(), "eth0", window);
    let at_h2 = capture(r.h2.name(), "eth0", window);
    // Give neighbour discovery a moment in either arm: send each frame twice, a second apart.
    send_raw(r.h2.name(), "eth0", frames.to_vec());
    std::thread::sleep(Duration::from_millis(1000));
    send_raw(r.h2.name(), "eth0", frames.to_vec());
    let ipv6 = |f: &[u8]| f.len() > 14 + 40 + 8 && f[12..14] == [0x86, 0xdd];
    let mut h1: Vec<Vec<u8>> = at_h1
        .join()
        .unwrap()
        .into_iter()
        .filter(|f| ipv6(f) && f[14 + 6] == 17 && f[14 + 40 + 8..].starts_with(b"xfwd-diff"))
        .collect();
    h1.sort();
    let at_h2 = at_h2.join().unwrap();
    // Solicited (the S flag): not the announcements either arm may make of its own accord; and
    // not h2's own (the capture sees what h2 sends too).
    let h2_mac = mac_bytes(&r.h2, "eth0");
    let mut advertised: Vec<Ipv6Addr> = at_h2
        .iter()
        .filter(|f| ipv6(f) && f[6..12] != h2_mac && f.len() >= 14 + 64)
        .filter(|f| f[14 + 6] == 58 && f[14 + 40] == 136 && f[14 + 44] & 0x40 != 0)
        .map(|f| Ipv6Addr::from(<[u8; 16]>::try_from(&f[14 + 48..14 + 64]).unwrap()))
        .collect();
    advertised.sort();
    let h2 = at_h2
        .into_iter()
        .filter(|f| ipv6(f) && f[14 + 6] == 58 && f[14 + 40] < 128)
        .filter_map(|f| {
            let (h, rest) = Ipv6Header::from_slice(&f[14..]).ok()?;
            let src = Ipv6Addr::from(h.source);
            // The router's: from its address on h2's side or its link-local one (h1's own
            // errors, Port Unreachable for the UDP probes, cross the router too).
            if src != "2001:2:0:30::1".parse::<Ipv6Addr>().unwrap() && !src.is_unicast_link_local() {
                return None;
            }
            Some((rest[0], rest[1], u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]), src, rest[8..].to_vec()))
        })
        .collect();
    (h1, h2, advertised)
}

#[test]
fn differential_against_the_kernel_ipv6_router() {
    if !root_or_skip("differential_against_the_kernel_ipv6_router") {
        return;
    }
    let _g = serial();
    let r = Rig::router6(1).unwrap();
    // A smaller MTU towards h1 in both arms, for Packet Too Big.
    r.boxns.ip(&["link", "set", "eth5", "mtu", "1400"]).unwrap();
    r.h1.ip(&["link", "set", "eth0", "mtu", "1400"]).unwrap();
    // A link-local source h2 owns, so that both arms can send it its error.
    r.h2.ip(&["addr", "add", "fe80::99/64", "dev", "eth0", "nodad"]).unwrap();
    // A link-local gateway with bits 16 to 31 set, which Linux takes as it is.
    r.h1.ip(&["addr", "add", "fe80:3::23/64", "dev", "eth0", "nodad"]).unwrap();
    let (h2_mac, box_mac) = (mac_bytes(&r.h2, "eth0"), mac_bytes(&r.boxns, "eth4"));
    let ip = |s: &str| s.parse::<Ipv6Addr>().unwrap().octets();
    let udp = |src: &str, dst: &str, hops: u8, len: usize| {
        let mut payload = b"xfwd-diff".to_vec();
        payload.resize(len, 0x5a);
        let mut v = Vec::new();
        PacketBuilder::ethernet2(h2_mac, box_mac)
            .ipv6(ip(src), ip(dst), hops)
            .udp(40000, 9)
            .write(&mut v, &payload)
            .unwrap();
        v
    };
    let frames = vec![
        udp(H2, H1, 64, 32),                 // forwarded
        udp(H2_BEHIND, H1, 2, 40),           // forwarded, hop limit 2 → 1
        udp(H2, H1, 1, 32),                  // Time Exceeded
        udp(H2, "2001:2:0:999::5", 64, 36),  // Destination Unreachable, no route
        udp(H2, H1, 64, 1500 - 48),          // Packet Too Big, MTU 1400
        udp("fe80::99", H1, 64, 44),         // beyond scope of the source address
        udp("::1", H1, 64, 32),              // martian source: dropped
        udp("ff02::1", H1, 64, 32),          // multicast source: dropped
        udp(H2, "2001:2:0:4000::1", 64, 48), // forwarded to the gateway fe80:3::23
    ];
    // Neighbour solicitations for the box's addresses on eth4, unicast: one with a source
    // link-layer option of the Ethernet length (8 bytes), answered; one whose option says 16
    // bytes, discarded (RFC 4861 7.1.1), whatever its target.
    let box_ll = {
        let out = r.boxns.exec(&["ip", "-6", "-o", "addr", "show", "dev", "eth4", "scope", "link"]).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let a = text.split_whitespace().skip_while(|w| *w != "inet6").nth(1).unwrap();
        a.split('/').next().unwrap().to_owned()
    };
    let solicit = |target: &str, option: &[u8]| {
        let mut body = ip(target).to_vec();
        body.extend_from_slice(option);
        let mut v = Vec::new();
        PacketBuilder::ethernet2(h2_mac, box_mac)
            .ipv6(ip(H2), ip(target), 255)
            .icmpv6(etherparse::Icmpv6Type::Unknown { type_u8: 135, code_u8: 0, bytes5to8: [0; 4] })
            .write(&mut v, &body)
            .unwrap();
        v
    };
    let mut frames = frames;
    frames.push(solicit("2001:2:0:30::1", &[&[1, 1][..], &h2_mac].concat()));
    frames.push(solicit(&box_ll, &[&[1, 2][..], &h2_mac, &[0; 8]].concat()));

    // Kernel arm: the same addresses and route in the box's kernel, IPv6 forwarding on, no
    // ICMPv6 rate limit to blur the comparison.
    for (a, dev) in [("2001:2:0:10::2/64", "eth5"), ("2001:2:0:30::1/64", "eth4")] {
        r.boxns.ip(&["-6", "addr", "add", a, "dev", dev, "nodad"]).unwrap();
    }
    r.boxns.ip(&["-6", "route", "add", "2001:2:0:1000::/52", "via", H2]).unwrap();
    let fe80_3 = ["2001:2:0:4000::/52", "via", "fe80:3::23", "dev", "eth5"];
    r.boxns.ip(&[&["-6", "route", "add"][..], &fe80_3].concat()).unwrap();
    for k in ["net.ipv6.conf.all.forwarding=1", "net.ipv6.icmp.ratelimit=0"] {
        r.boxns.exec(&["sysctl", "-qw", k]).unwrap();
    }
    let kernel = observe(&r, &frames);
    r.boxns.ip(&[&["-6", "route", "del"][..], &fe80_3].concat()).unwrap();
    for dev in ["eth4", "eth5"] {
        r.boxns.ip(&["-6", "addr", "flush", "dev", dev, "scope", "global"]).unwrap();
    }
    r.boxns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=0"]).unwrap();
    for h in [&r.h1, &r.h2] {
        h.ip(&["-6", "neigh", "flush", "dev", "eth0"]).unwrap();
    }

    let dir = std::env::temp_dir().join(format!("xfwd-diff6-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("router.toml");
    let route = "\n[[route]]\nprefix = \"2001:2:0:4000::/52\"\nvia = \"fe80:3::23\"\ndev = \"eth5\"\n";
    std::fs::write(&config, std::fs::read_to_string(RIG_CONFIG6).unwrap() + route).unwrap();
    let control = control_path("rt6-diff");
    let mut x = r
        .start_xfwd(XFWD, &["router", "--config", config.to_str().unwrap(), "--control", &control, "--queues", "1"])
        .unwrap();
    let ours = observe(&r, &frames);
    stop_clean(&mut x);

    // The XDP path: the second send of each forwarded frame finds its neighbour (a link-local
    // gateway among them) in the program's maps, so what it forwards is the program's.
    for h in [&r.h1, &r.h2] {
        h.ip(&["-6", "neigh", "flush", "dev", "eth0"]).unwrap();
    }
    r.hosts_napi().unwrap();
    let args = ["router", "--config", config.to_str().unwrap(), "--control", &control, "--queues", "1"];
    let mut x = r.start_xfwd(XFWD, &[&args[..], &["--path", "xdp"]].concat()).unwrap();
    let xdp_path = observe(&r, &frames);
    let eth4 = stats(&control).ports.into_iter().find(|p| p.name == "eth4").unwrap();
    let in_program = common::port_xdp(&eth4, "xdp-forwarded");
    stop_clean(&mut x);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(in_program >= 3, "the XDP path forwarded {in_program} of the frames itself");

    // Neighbour solicitations: the same answered, each twice.
    let good: Ipv6Addr = "2001:2:0:30::1".parse().unwrap();
    assert_eq!(kernel.2, [good, good], "the kernel's answers");
    assert_eq!(ours.2, kernel.2, "neighbour advertisements differ");
    // Forwarded frames: identical bytes (hop limit, both MACs), each seen twice.
    assert_eq!(kernel.0.len(), 6, "kernel forwarded: {}", kernel.0.len());
    assert_eq!(ours.0, kernel.0, "forwarded bytes differ");
    // ICMPv6 errors: same type, code, MTU, source address and quoted packet.
    let (mut k, mut o) = (kernel.1.clone(), ours.1.clone());
    k.sort();
    o.sort();
    assert_eq!(k.len(), 8, "kernel ICMPv6 errors: {k:?}");
    assert_eq!(o, k, "ICMPv6 errors differ");
    assert_eq!(xdp_path.0, kernel.0, "forwarded bytes differ on the XDP path");
    assert_eq!(xdp_path.2, kernel.2, "neighbour advertisements differ on the XDP path");
    let mut x = xdp_path.1.clone();
    x.sort();
    assert_eq!(x, k, "ICMPv6 errors differ on the XDP path");
}

#[test]
fn sighup_applies_a_new_ipv6_route_and_static_neighbour() {
    if !root_or_skip("sighup_applies_a_new_ipv6_route_and_static_neighbour") {
        return;
    }
    let _g = serial();
    let r = Rig::router6(1).unwrap();
    let dir = std::env::temp_dir().join(format!("xfwd-reload6-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("router.toml");
    let base = std::fs::read_to_string(RIG_CONFIG6).unwrap();
    std::fs::write(&config, &base).unwrap();
    let control = control_path("rt6-hup");
    let mut x = r.start_xfwd(XFWD, &["router", "--config", config.to_str().unwrap(), "--control", &control]).unwrap();
    // h2 also answers on 2001:2:0:2000::2, a prefix the router has no route for yet.
    r.h2.ip(&["-6", "addr", "add", "2001:2:0:2000::2/64", "dev", "eth0", "nodad"]).unwrap();
    Rig::ping_until(&r.h1, H2, common::PATH_UP).unwrap();
    let out = ping(&r.h1, &["-c", "1", "-W", "2", "2001:2:0:2000::2"]);
    assert!(out.contains("Destination unreachable: No route"), "before the reload: {out}");

    let h2_mac = mac_of(&r.h2, "eth0");
    let extra = format!(
        "\n[[route]]\nprefix = \"2001:2:0:2000::/52\"\nvia = \"{H2}\"\n\n[[neighbor]]\nip = \"{H2}\"\nmac = \"{h2_mac}\"\n"
    );
    std::fs::write(&config, base.clone() + &extra).unwrap();
    x.proc.signal(libc::SIGHUP);
    wait_line(&mut x, "xfwd: reloaded", 0);
    Rig::ping_until(&r.h1, "2001:2:0:2000::2", common::PATH_UP).unwrap();
    assert!(show(&control, "routes").contains(&format!("2001:2:0:2000::/52 via {H2} dev eth4")));
    // The ARP thread takes the static neighbour in its own time.
    let permanent = format!("{H2} dev eth4 lladdr {h2_mac} PERMANENT");
    let neighbors = wait_neighbor(&control, &permanent);
    assert!(neighbors.contains(&permanent), "{neighbors}");

    // A broken IPv6 route is refused with its position; the running tables stay.
    std::fs::write(&config, base + "\n[[route]]\nprefix = \"2001:2:0:3000::/52\"\nvia = \"fe80::1\"\n").unwrap();
    x.proc.signal(libc::SIGHUP);
    let refused = wait_line(&mut x, "xfwd: warning: reload refused", 0);
    assert!(refused.contains("router.toml:") && refused.contains("say which interface"), "{refused}");
    Rig::ping_until(&r.h1, "2001:2:0:2000::2", common::PATH_UP).unwrap();
    stop_clean(&mut x);
    std::fs::remove_dir_all(&dir).unwrap();
}
