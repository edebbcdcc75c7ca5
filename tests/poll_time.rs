//! The NAPI poll timer (`xfwd_dataplane::io::probe::poll_time`) on the rig: it times the polls of the
//! ports it is given and no other, counts the frames they took, and leaves a port without NAPI
//! untimed (that port's frames go through the CPU's backlog), which is what makes the bench
//! give no box figure rather than a figure that left frames out.

mod common;

use common::{mac_bytes, raw_frame, root_or_skip, send_raw, serial, until, EVENTUALLY};
use xfwd::rig::Rig;
use xfwd_dataplane::io::probe::poll_time::PollTimer;

#[test]
fn the_poll_timer_times_the_given_ports_with_napi_and_leaves_a_port_without_napi_untimed() {
    if !root_or_skip("the_poll_timer_times_the_given_ports_with_napi_and_leaves_a_port_without_napi_untimed") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    // eth4 gets NAPI (GRO on); eth5 keeps veth's default, GRO off: no NAPI.
    r.boxns.exec(&["ethtool", "-K", "eth4", "gro", "on"]).unwrap();
    r.boxns.exec(&["ethtool", "-K", "eth5", "gro", "off"]).unwrap();
    let ports = r.box_ports().unwrap();
    // Only eth4 is given to the timer at first: eth5's slot is checked through a second timer.
    let timer = PollTimer::start(&ports).unwrap();
    let before = timer.read().unwrap();
    assert_eq!(before.len(), 2);

    const N: usize = 500;
    let frame = |ns: &xfwd::rig::Netns, marker| {
        let src = mac_bytes(ns, "eth0");
        // To a unicast MAC nobody has: the box's kernel takes it in and drops it.
        raw_frame([0x02, 0, 0, 0, 0, 0x99], src, 0x88b5, marker)
    };
    send_raw(r.h1.name(), "eth0", vec![frame(&r.h1, 1); N]);
    send_raw(r.h2.name(), "eth0", vec![frame(&r.h2, 2); N]);

    // The frames are polled in the softirq their sending raised, before or soon after the send
    // returns: wait for them rather than assume when.
    until(EVENTUALLY, "eth4's polls to take the frames sent to it", || {
        timer.read().unwrap()[0].since(&before[0]).frames >= N as u64
    });
    // And eth5's frames through the backlog (received, not timed).
    until(EVENTUALLY, "eth5 to receive the frames sent to it", || {
        r.boxns.link_stat("eth5", "rx_packets").unwrap() >= N as u64
    });
    let after = timer.read().unwrap();
    let (eth4, eth5) = (after[0].since(&before[0]), after[1].since(&before[1]));
    assert!(eth4.frames >= N as u64 && eth4.polls >= 1 && eth4.ns > 0, "eth4: {eth4:?}");
    // A poll takes at most its budget (64) of frames: the polls were counted, not the batches.
    assert!(eth4.polls * 64 >= eth4.frames, "eth4: {eth4:?}");
    assert_eq!(eth5.frames, 0, "eth5 has no NAPI: its {N} frames went through the backlog, untimed");

    // A timer given only eth5 times nothing of eth4's polls.
    drop(timer);
    let only5 = PollTimer::start(&ports[1..]).unwrap();
    let b = only5.read().unwrap();
    let rx4 = r.boxns.link_stat("eth4", "rx_packets").unwrap();
    send_raw(r.h1.name(), "eth0", vec![frame(&r.h1, 3); N]);
    until(EVENTUALLY, "eth4 to take the second frames in", || {
        r.boxns.link_stat("eth4", "rx_packets").unwrap() >= rx4 + N as u64
    });
    let a = only5.read().unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].since(&b[0]).frames, 0, "eth4's polls are not eth5's: {:?}", a[0].since(&b[0]));
}
