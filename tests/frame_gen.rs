//! The bench's frame senders (`xfwd_dataplane::io::probe::frame_gen`): the generator's program gives
//! each frame the next flow's source port with a valid checksum, and in live-frames mode the
//! frames reach the peer veth as frames (its NAPI poll takes them, and no socket or skb copy on
//! the way); a kernel's refusal of live frames is told apart from any other failure; and the
//! other sender's hop (`--sender trafgen-xdp`), which needs no live frames, hands a packet
//! socket's frames to the port's peer as XDP frames too.

mod common;

use common::{
    in_netns, live_frames_or_skip, mac_bytes, raw_frame, refuse_bpf_test_runs, root_or_skip, send_raw, serial, until,
    DevCounters, EVENTUALLY,
};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use xfwd::rig::Rig;
use xfwd_dataplane::io::probe::frame_gen::{ifindex, live_frames, udp_frame, FrameGen, GenError, UdpSpec};
use xfwd_dataplane::io::probe::poll_time::PollTimer;
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
    let test = "live_frames_reach_the_peer_port_as_frames_its_poll_takes";
    if !root_or_skip(test) || !live_frames_or_skip(test) {
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

#[test]
fn a_kernel_that_refuses_live_frames_is_told_apart_from_a_failed_run() {
    if !root_or_skip("a_kernel_that_refuses_live_frames_is_told_apart_from_a_failed_run") {
        return;
    }
    // Under a filter that makes every BPF_PROG_TEST_RUN fail with EPERM, as such a kernel
    // answers a live run: the question gets the refusal, named.
    let (probe, plain) = std::thread::spawn(|| {
        refuse_bpf_test_runs().unwrap();
        let (frame, off) = udp_frame(&spec("198.18.0.1", "198.18.0.2")).unwrap();
        let plain = FrameGen::new(frame.clone(), off, 1).unwrap().run_once(1, &frame).map(|_| ());
        (live_frames(), plain)
    })
    .join()
    .unwrap();
    match probe {
        Err(GenError::LiveFramesRefused(said)) => assert!(said.contains("Operation not permitted"), "{said}"),
        other => panic!("expected the refusal, got {other:?}"),
    }
    // The same errno on a run that sends nothing is a failed run, not the machine's refusal of
    // live frames.
    assert!(matches!(plain, Err(GenError::Run(_))), "{plain:?}");
    // Without the filter the question is answered either way, never with another error.
    match live_frames() {
        Ok(()) | Err(GenError::LiveFramesRefused(_)) => {}
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_xdp_hop_hands_a_packet_sockets_frames_to_the_ports_peer_as_xdp_frames() {
    if !root_or_skip("the_xdp_hop_hands_a_packet_sockets_frames_to_the_ports_peer_as_xdp_frames") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    // eth4 needs NAPI to take XDP frames (veth drops them otherwise).
    r.boxns.exec(&["ethtool", "-K", "eth4", "gro", "on"]).unwrap();
    let timer = PollTimer::start(&r.box_ports().unwrap()).unwrap();
    // To a unicast MAC nobody has: the box's kernel takes each in and drops it.
    let frame = raw_frame([0x02, 0, 0, 0, 0, 0x99], mac_bytes(&r.h1, "eth0"), 0x88b5, 1);
    const N: u64 = 500;

    // Straight out of eth0, a packet socket's frames are socket buffers: eth0 redirects none.
    let before = DevCounters::read(&r.h1, "eth0");
    let rx4 = r.boxns.link_stat("eth4", "rx_packets").unwrap();
    // Nine in ten at least: a veth drops what its 256-frame ring cannot hold, which a machine
    // busy enough to delay a poll could make happen; none go any other way.
    let most = N * 9 / 10;
    send_raw(r.h1.name(), "eth0", vec![frame.clone(); N as usize]);
    until(EVENTUALLY, "eth4 to take the frames sent out of eth0", || {
        r.boxns.link_stat("eth4", "rx_packets").unwrap() >= rx4 + most
    });
    let plain = DevCounters::read(&r.h1, "eth0").since(&before);
    assert_eq!(plain.tx_queues("xdp_xmit"), 0, "{plain}");

    // Through the hop: the same frames leave eth0 as XDP frames (veth's ndo_xdp_xmit), and the
    // box's port takes them in its polls.
    let hop = r.h1.xdp_hop(1).unwrap();
    let before = DevCounters::read(&r.h1, "eth0");
    let polled = timer.read().unwrap()[0];
    send_raw(r.h1.name(), xfwd::rig::HOP_DEV, vec![frame; N as usize]);
    until(EVENTUALLY, "eth0 to send the hop's frames as XDP frames", || {
        DevCounters::read(&r.h1, "eth0").since(&before).tx_queues("xdp_xmit") >= most
    });
    until(EVENTUALLY, "eth4's polls to take them", || timer.read().unwrap()[0].since(&polled).frames >= most);
    let sent = DevCounters::read(&r.h1, "eth0").since(&before);
    assert!(sent.tx_queues("xdp_xmit") <= N, "{sent}");
    assert_eq!(sent.tx_queues("xdp_xmit_errors"), 0, "{sent}");

    // Dropped, the hop goes: the device and its program.
    drop(hop);
    let out = r.h1.ip(&["-o", "link", "show"]).unwrap();
    let links = String::from_utf8_lossy(&out.stdout);
    assert!(!links.contains("gen0") && !links.contains("gen1"), "{links}");
}
