//! The bench's frame generator (`xfwd_dataplane::io::frame_gen`): its program gives each frame
//! the next flow's source port with a valid checksum, and in live-frames mode the frames reach
//! the peer veth as frames (its NAPI poll takes them, and no socket or skb copy on the way).

mod common;

use common::{in_netns, mac_bytes, root_or_skip, serial, until, EVENTUALLY};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use xfwd::rig::Rig;
use xfwd_dataplane::io::frame_gen::{ifindex, udp_frame, FrameGen, UdpSpec};
use xfwd_dataplane::io::poll_time::PollTimer;
use xfwd_dataplane::wire::MacAddr;

/// `XDP_TX`.
const XDP_TX: u32 = 3;

fn spec(src: &str, dst: &str) -> UdpSpec {
    UdpSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        src_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        sport: 1024,
        dport: 9,
        wire_len: 64,
    }
}

/// The frame's UDP source port, and whether its checksum verifies.
fn port_and_checksum(f: &[u8]) -> (u16, bool) {
    let p = SlicedPacket::from_ethernet(f).unwrap();
    let Some(TransportSlice::Udp(udp)) = p.transport else { panic!("not UDP") };
    let want = match p.net {
        Some(NetSlice::Ipv4(ip)) => udp.to_header().calc_checksum_ipv4(&ip.header().to_header(), udp.payload()),
        Some(NetSlice::Ipv6(ip)) => udp.to_header().calc_checksum_ipv6(&ip.header().to_header(), udp.payload()),
        _ => panic!("not IP"),
    };
    (udp.source_port(), want.unwrap() == udp.checksum())
}

#[test]
fn each_generated_frame_is_the_template_with_the_next_flows_port_and_a_valid_checksum() {
    if !root_or_skip("each_generated_frame_is_the_template_with_the_next_flows_port_and_a_valid_checksum") {
        return;
    }
    for (src, dst) in [("198.18.0.1", "198.18.1.1"), ("2001:2::1", "2001:2:0:1::1")] {
        let (frame, off) = udp_frame(&spec(src, dst)).unwrap();
        let mut g = FrameGen::new(frame.clone(), off, 3).unwrap();
        let mut ports = Vec::new();
        for k in 0..7u8 {
            // What a page the kernel recycles may hold: the previous frame as a router left it
            // (other MACs, TTL) or anything else. The program writes the headers whole.
            let mut buffer = frame.clone();
            for b in &mut buffer[..off + 8] {
                *b = b.wrapping_add(k + 1);
            }
            // lo: a run that sends nothing needs a device to name, not to send on.
            let (verdict, out) = g.run_once(1, &buffer).unwrap();
            assert_eq!(verdict, XDP_TX, "{src}");
            assert_eq!(out.len(), frame.len());
            let (port, ok) = port_and_checksum(&out);
            assert!(ok, "{src}: port {port}: checksum wrong");
            // Nothing but the port and the checksum changed.
            assert_eq!(out[..off], frame[..off], "{src}");
            assert_eq!(out[off + 2..off + 6], frame[off + 2..off + 6], "{src}");
            assert_eq!(out[off + 8..], frame[off + 8..], "{src}");
            ports.push(port);
        }
        // One CPU's count (the test thread may move between runs: each CPU counts its own).
        assert!(ports.iter().all(|p| (1024..1027).contains(p)), "{src}: {ports:?}");
        assert!(ports.windows(2).any(|w| w[0] != w[1]), "{src}: the flows' ports vary: {ports:?}");
    }
}

#[test]
fn live_frames_reach_the_peer_port_as_frames_its_poll_takes() {
    if !root_or_skip("live_frames_reach_the_peer_port_as_frames_its_poll_takes") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    // eth4 needs NAPI to take frames sent by XDP (veth drops them otherwise).
    r.boxns.exec(&["ethtool", "-K", "eth4", "gro", "on"]).unwrap();
    let timer = PollTimer::start(&r.box_ports().unwrap()).unwrap();
    let before = timer.read().unwrap()[0];
    let rx4 = r.boxns.link_stat("eth4", "rx_packets").unwrap();
    let mut s = spec("198.18.0.1", "198.18.0.2");
    s.src_mac = MacAddr(mac_bytes(&r.h1, "eth0"));
    s.dst_mac = MacAddr(mac_bytes(&r.boxns, "eth4"));
    let (frame, off) = udp_frame(&s).unwrap();
    const N: u32 = 2_000;
    let host = r.h1.name().to_owned();
    in_netns(&host, move || {
        let eth0 = ifindex("eth0").unwrap();
        let mut g = FrameGen::new(frame, off, 16).unwrap();
        // In batches a veth's ring (256) holds, each taken by the poll its send raised.
        for _ in 0..N / 100 {
            g.send(eth0, 100).unwrap();
        }
    })
    .join()
    .unwrap();
    // Nine in ten at least: a veth drops what its 256-frame ring cannot hold, which a machine
    // busy enough to delay the port's poll could make happen.
    let most = u64::from(N) * 9 / 10;
    until(EVENTUALLY, "eth4 to count the frames", || r.boxns.link_stat("eth4", "rx_packets").unwrap() >= rx4 + most);
    until(EVENTUALLY, "eth4's polls to have taken them", || timer.read().unwrap()[0].since(&before).frames >= most);
}
