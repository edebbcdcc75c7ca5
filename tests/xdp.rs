//! The XDP program itself, run on single frames with `BPF_PROG_TEST_RUN`: no namespace, no
//! traffic, nothing attached (loading a BPF program needs root). The frames come in on `lo`,
//! registered as port 0; no socket is registered, so a frame the program hands to a worker
//! comes back as `XDP_PASS`, counted `pass-no-socket`, which tells it apart from the frames it
//! keeps for the kernel (`pass-kernel`) or drops.

mod common;

use xfwd_dataplane::io::xdp::{ProgramMode, Steer, XdpCounter, XdpProgram, MAX_FRAME};
use xfwd_dataplane::io::PortInfo;

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

fn load(mode: ProgramMode<'_>) -> (XdpProgram, u32) {
    let lo = PortInfo::read("lo").unwrap();
    let ifindex = lo.ifindex;
    (XdpProgram::load(&[lo], mode, Steer::ByQueue, None).unwrap(), ifindex)
}

fn counts(p: &XdpProgram) -> Vec<(&'static str, u64)> {
    let row = p.counter_reader().unwrap().port(0);
    XdpCounter::ALL.iter().map(|c| (c.name(), row[*c as usize])).filter(|(_, n)| *n > 0).collect()
}

#[test]
fn the_router_takes_a_priority_tag_off_and_keeps_other_tags_for_the_kernel() {
    if !common::root_or_skip("the_router_takes_a_priority_tag_off_and_keeps_other_tags_for_the_kernel") {
        return;
    }
    let (mut p, lo) = load(ProgramMode::Router { local: &[] });
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
    let (mut p, lo) = load(ProgramMode::Bridge);
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
    for mode in [ProgramMode::Router { local: &[] }, ProgramMode::Bridge] {
        let (mut p, lo) = load(mode);
        let longest = MAX_FRAME as usize;
        assert_eq!(p.test_run(&frame(longest, None, 0x0800), lo, 0).unwrap().0, XDP_PASS, "{mode:?}");
        assert_eq!(p.test_run(&frame(longest + 1, None, 0x0800), lo, 0).unwrap().0, XDP_DROP, "{mode:?}");
        assert_eq!(p.test_run(&frame(3000, None, 0x0800), lo, 0).unwrap().0, XDP_DROP, "{mode:?}");
        assert_eq!(counts(&p), [("pass-no-socket", 1), ("drop-too-long", 2)], "{mode:?}");
    }
}
