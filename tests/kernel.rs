//! `xfwd kernel …` applies the same configuration to the kernel path and leaves the box exactly
//! as it found it: on SIGTERM, and with `--keep` followed by `xfwd kernel undo`.

mod common;

use std::time::Duration;

use common::{root_or_skip, serial, XFWD};
use xfwd::rig::{self, Rig};

const RIG_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-router.toml");

/// What the box's kernel looks like: addresses, routes, links, permanent neighbours, forwarding.
fn snapshot(r: &Rig) -> String {
    let mut s = String::new();
    for args in [
        &["-o", "addr", "show"][..],
        &["route", "show", "table", "all"],
        &["-o", "link", "show"],
        &["neigh", "show", "nud", "permanent"],
    ] {
        s += &String::from_utf8_lossy(&r.boxns.ip(args).unwrap().stdout);
    }
    s += &String::from_utf8_lossy(&r.boxns.exec(&["sysctl", "net.ipv4.ip_forward"]).unwrap().stdout);
    s
}

#[test]
fn kernel_router_forwards_and_leaves_the_box_as_it_found_it() {
    if !root_or_skip("kernel_router_forwards_and_leaves_the_box_as_it_found_it") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    let before = snapshot(&r);
    let mut k = r.start_xfwd(XFWD, &["kernel", "router", "--config", RIG_CONFIG]).unwrap();
    assert!(k.seen.iter().any(|l| l.trim() == "ip addr add 198.18.10.2/24 dev eth5"), "{:#?}", k.seen);
    Rig::ping_until(&r.h2, "198.18.10.1", common::PATH_UP).unwrap();
    let fwd = r.boxns.exec(&["sysctl", "-n", "net.ipv4.ip_forward"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&fwd.stdout).trim(), "1");
    let st = k.stop(libc::SIGTERM, Duration::from_secs(10)).unwrap();
    assert!(st.success(), "{:#?}", k.seen);
    assert_eq!(snapshot(&r), before, "the box changed");
    assert!(r.h2.exec(&["ping", "-c", "1", "-W", "1", "198.18.10.1"]).is_err(), "still forwarding after undo");

    // --keep applies and exits; undo removes it.
    let out = r.boxns.command(XFWD).args(["kernel", "router", "--config", RIG_CONFIG, "--keep"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Rig::ping_until(&r.h2, "198.18.10.1", common::PATH_UP).unwrap();
    let out = r.boxns.command(XFWD).args(["kernel", "undo", "router", "--config", RIG_CONFIG]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(snapshot(&r), before, "the box changed after --keep and undo");
}

#[test]
fn kernel_bridge_bridges_and_leaves_the_box_as_it_found_it() {
    if !root_or_skip("kernel_bridge_bridges_and_leaves_the_box_as_it_found_it") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(1).unwrap();
    let before = snapshot(&r);
    let mut k = r.start_xfwd(XFWD, &["kernel", "bridge", "eth4", "eth5"]).unwrap();
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    assert!(k.stop(libc::SIGTERM, Duration::from_secs(10)).unwrap().success());
    assert_eq!(snapshot(&r), before, "the box changed");

    let out = r.boxns.command(XFWD).args(["kernel", "bridge", "eth4", "eth5", "--keep"]).output().unwrap();
    assert!(out.status.success());
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    let out = r.boxns.command(XFWD).args(["kernel", "undo", "bridge"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(snapshot(&r), before, "the box changed after --keep and undo");

    // From the bridge's file: its ports and its ageing (ip link's centiseconds).
    let dir = common::TempDir::new("kernel-br");
    let file = dir.join("b.toml");
    std::fs::write(&file, "ports = [\"eth4\", \"eth5\"]\nageing = \"7s\"\n").unwrap();
    let out = r
        .boxns
        .command(XFWD)
        .args(["kernel", "bridge", "--config", file.to_str().unwrap(), "--keep"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let link = r.boxns.ip(&["-d", "link", "show", "xfwdbr0"]).unwrap();
    assert!(String::from_utf8_lossy(&link.stdout).contains("ageing_time 700 "), "{link:?}");
    Rig::ping_until(&r.h1, rig::H2_ADDR, common::PATH_UP).unwrap();
    let out = r.boxns.command(XFWD).args(["kernel", "undo", "bridge"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(snapshot(&r), before, "the box changed after the file's bridge and undo");
}

#[test]
fn kernel_refuses_what_xfwd_refuses() {
    if !root_or_skip("kernel_refuses_what_xfwd_refuses") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    let before = snapshot(&r);
    let dir = common::TempDir::new("kernel");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[interface]]\nname = \"eth5\"\naddresses = [\"198.18.10.2/24\"]\n[[route]]\nprefix = \"10.0.0.1/8\"\nvia = \"198.18.10.1\"\n").unwrap();
    let out = r.boxns.command(XFWD).args(["kernel", "router", "--config", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml:5:10: route prefix 10.0.0.1/8 has host bits set"));
    let out = r.boxns.command(XFWD).args(["kernel", "bridge", "eth4", "eth9"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(snapshot(&r), before);
    // What the kernel has already is neither changed nor, on undo, removed: refused up front.
    r.boxns.ip(&["addr", "add", "198.18.30.1/24", "dev", "eth4"]).unwrap();
    let had = snapshot(&r);
    let out = r.boxns.command(XFWD).args(["kernel", "router", "--config", RIG_CONFIG]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("198.18.30.1 is already configured in the kernel"));
    assert_eq!(snapshot(&r), had, "the existing address is still there, nothing else added");
    r.boxns.ip(&["link", "add", "xfwdbr0", "type", "bridge"]).unwrap();
    let out = r.boxns.command(XFWD).args(["kernel", "bridge", "eth4", "eth5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(r.boxns.ip(&["link", "show", "xfwdbr0"]).is_ok(), "the user's bridge survives");
}
