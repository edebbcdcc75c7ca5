//! `xfwd router` with `[fib] source = "kernel"` on the reference topology (see `Rig::router`):
//! the box's kernel holds the addresses and routes, its forwarding off, so whatever crosses
//! the box is xfwd's, forwarded by the kernel's routes as they change. Needs root; each test
//! builds its own rig and removes it on drop.

mod common;

use std::time::{Duration, Instant};

use common::{control_path, root_or_skip, serial, show, stats, stop_clean, XFWD};
use xfwd::rig::{self, Rig, XfwdProcess};

const KERNEL_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-kernel.toml");

/// The router rig with the box's addresses in its kernel and the kernel's forwarding off.
fn kernel_rig() -> Rig {
    let r = Rig::router(1).unwrap();
    for (a, dev) in
        [("198.18.10.2/24", "eth5"), ("198.18.11.2/24", "eth5"), ("198.18.30.1/24", "eth4"), ("198.18.31.1/24", "eth4")]
    {
        r.boxns.ip(&["addr", "add", a, "dev", dev]).unwrap();
    }
    r.boxns.write_file("/proc/sys/net/ipv4/ip_forward", "0").unwrap();
    r
}

fn start(r: &Rig, control: &str) -> XfwdProcess {
    r.start_xfwd(XFWD, &["router", "--config", KERNEL_CONFIG, "--control", control]).unwrap()
}

fn ping(from: &rig::Netns, args: &[&str]) -> String {
    let out = from.command("ping").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `show routes` satisfies `f` (the mirror applies changes within milliseconds;
/// the bound is generous for a loaded machine).
fn routes_until(control: &str, f: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let s = show(control, "routes");
        if f(&s) || start.elapsed() > Duration::from_secs(5) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_kernels_routes_are_forwarded_by_xfwd_as_they_change() {
    if !root_or_skip("the_kernels_routes_are_forwarded_by_xfwd_as_they_change") {
        return;
    }
    let _g = serial();
    let r = kernel_rig();
    // h2 holds 198.19.1.1 behind it; only a route in the box leads there.
    r.h2.ip(&["addr", "add", "198.19.1.1/32", "dev", "lo"]).unwrap();
    r.h1.ip(&["route", "add", "198.19.0.0/16", "via", "198.18.10.2"]).unwrap();
    let control = control_path("kf-basic");
    let mut x = start(&r, &control);
    // Connected routes from the kernel's addresses; the kernel resolves the neighbours.
    Rig::ping_until(&r.h1, "198.18.30.2", Duration::from_secs(5)).unwrap();
    let routes = show(&control, "routes");
    assert!(routes.contains("198.18.30.0/24 dev eth4 src 198.18.30.1 proto kernel"), "{routes}");
    assert!(routes.contains("local 198.18.30.1/32 dev eth4 proto kernel table local"), "{routes}");
    assert!(routes.contains("(mirrored from the kernel)"), "{routes}");
    let neigh = r.boxns.ip(&["neigh", "show", "198.18.30.2"]).unwrap();
    assert!(String::from_utf8_lossy(&neigh.stdout).contains("lladdr"), "the kernel resolved h2");
    // The kernel does not forward: the next answer is xfwd's.
    let out = ping(&r.h1, &["-c", "1", "-W", "1", "198.19.1.1"]);
    assert!(out.contains("Destination Net Unreachable"), "no route yet: {out}");

    // `ip route add` reaches the workers.
    r.boxns.ip(&["route", "add", "198.19.0.0/16", "via", "198.18.30.2", "proto", "static"]).unwrap();
    let routes = routes_until(&control, |s| s.contains("198.19.0.0/16"));
    assert!(routes.contains("198.19.0.0/16 via 198.18.30.2 dev eth4 src 198.18.30.1 proto static"), "{routes}");
    Rig::ping_until(&r.h1, "198.19.1.1", Duration::from_secs(5)).unwrap();

    // The kernel's route types, answered as the kernel answers them.
    r.boxns.ip(&["route", "add", "prohibit", "198.19.1.0/24"]).unwrap();
    routes_until(&control, |s| s.contains("prohibit 198.19.1.0/24"));
    let out = ping(&r.h1, &["-c", "1", "-W", "1", "198.19.1.1"]);
    assert!(out.contains("From 198.18.10.2") && out.contains("Packet filtered"), "prohibit: {out}");
    r.boxns.ip(&["route", "replace", "unreachable", "198.19.1.0/24"]).unwrap();
    routes_until(&control, |s| s.contains("unreachable 198.19.1.0/24"));
    let out = ping(&r.h1, &["-c", "1", "-W", "1", "198.19.1.1"]);
    assert!(out.contains("Destination Host Unreachable"), "unreachable: {out}");
    r.boxns.ip(&["route", "replace", "blackhole", "198.19.1.0/24"]).unwrap();
    routes_until(&control, |s| s.contains("blackhole 198.19.1.0/24"));
    let out = ping(&r.h1, &["-c", "1", "-W", "1", "198.19.1.1"]);
    assert!(out.contains("100% packet loss") && !out.contains("From "), "blackhole: silent: {out}");
    r.boxns.ip(&["route", "del", "198.19.1.0/24"]).unwrap();
    routes_until(&control, |s| !s.contains("198.19.1.0/24"));
    Rig::ping_until(&r.h1, "198.19.1.1", Duration::from_secs(5)).unwrap();

    // A route out of an interface xfwd does not own: nobody forwards it.
    r.boxns.ip(&["link", "add", "other0", "type", "veth", "peer", "name", "other1"]).unwrap();
    r.boxns.ip(&["link", "set", "other0", "up"]).unwrap();
    r.boxns.ip(&["route", "add", "198.19.2.0/24", "dev", "other0"]).unwrap();
    let routes = routes_until(&control, |s| s.contains("198.19.2.0/24"));
    assert!(routes.contains("198.19.2.0/24 dev (not a port)") && routes.contains("not forwarded"), "{routes}");
    let out = ping(&r.h1, &["-c", "1", "-W", "1", "198.19.2.1"]);
    assert!(out.contains("Destination Net Unreachable"), "{out}");

    // Withdrawn: Net Unreachable again.
    r.boxns.ip(&["route", "del", "198.19.0.0/16"]).unwrap();
    routes_until(&control, |s| !s.contains("198.19.0.0/16"));
    let out = ping(&r.h1, &["-c", "1", "-W", "1", "198.19.1.1"]);
    assert!(out.contains("Destination Net Unreachable"), "withdrawn: {out}");

    let s = stats(&control);
    let k = s.kernel.expect("kernel mirror stats");
    assert!(k.updates >= 8, "{k:?}");
    assert!(k.latency_us.is_some(), "{k:?}");
    let drops = &s.ports[0].total.drops;
    let count = |n: &str| drops.iter().find(|(k, _)| k == n).map(|(_, v)| *v).unwrap();
    assert!(count("prohibited") >= 1 && count("unreachable-route") >= 1 && count("blackhole") >= 1, "{drops:?}");
    assert!(count("egress-not-owned") >= 1 && count("no-route") >= 2, "{drops:?}");
    stop_clean(&mut x);
    assert_eq!(
        String::from_utf8_lossy(&r.boxns.exec(&["cat", "/proc/sys/net/ipv4/ip_forward"]).unwrap().stdout).trim(),
        "0"
    );
}
