//! `xfwd doctor` on the rig: what it reports of veth ports is right, what stops xfwd is an error
//! with its fix, and it changes nothing. Needs root (the rig's namespaces).

mod common;

use std::os::unix::process::CommandExt;

use common::{refuse_bpf_test_runs, root_or_skip, serial, xdp_attached, XFWD};
use xfwd::rig::Rig;

fn doctor(r: &Rig, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    let out = r.boxns.command(XFWD).args(&all).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What must not change: each port's MTU, state, flags and attached programs.
fn link_state(r: &Rig) -> String {
    let out = r.boxns.ip(&["-d", "link", "show"]).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn doctor_reports_the_rigs_ports_and_changes_nothing() {
    if !root_or_skip("doctor_reports_the_rigs_ports_and_changes_nothing") {
        return;
    }
    let _g = serial();
    let r = Rig::bridge(2).unwrap();
    let before = link_state(&r);

    let (code, out, err) = doctor(&r, &["eth4", "eth5", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ports = v["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2);
    for (p, name) in ports.iter().zip(["eth4", "eth5"]) {
        assert_eq!(p["name"], name);
        assert_eq!(p["driver"], "veth");
        assert_eq!((p["rx_queues"].as_u64(), p["tx_queues"].as_u64()), (Some(2), Some(2)), "{p}");
        // This kernel advertises veth's features over netlink: native XDP, no zero-copy.
        assert_eq!((p["xdp_native"].as_bool(), p["zero_copy"].as_bool()), (Some(true), Some(false)), "{p}");
        assert_eq!(p["mtu"], 1500);
        assert_eq!(p["xfwd_max_mtu"].as_u64(), Some(u64::from(xfwd_dataplane::io::frames::xsk::MAX_MTU)));
        assert_eq!(p["queue_index"], "sender-tx-queue");
    }
    for f in v["findings"].as_array().unwrap() {
        assert!(["info", "warn", "error"].contains(&f["severity"].as_str().unwrap()), "{f}");
        assert!(f["code"].is_string() && f["text"].is_string() && f["fix"].is_string(), "{f}");
    }
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["code"] == "copy-mode" && f["port"] == "eth4"));
    // Whether the kernel runs the bench generator's live frames: asked (root), and a finding
    // exactly where it refuses them.
    let live = v["system"]["live_frames"].as_bool().unwrap_or_else(|| panic!("not asked: {}", v["system"]));
    let refused = |v: &serde_json::Value| {
        v["findings"].as_array().unwrap().iter().find(|f| f["code"] == "live-frames-refused").cloned()
    };
    assert_eq!(refused(&v).is_some(), !live, "{}", v["findings"]);
    // A kernel that refuses them (as some of this kind do): said, with the other sender, and
    // no reason to fail.
    let mut cmd = r.boxns.command(XFWD);
    cmd.args(["doctor", "eth4", "eth5", "--json"]);
    // SAFETY: the hook runs between fork and exec and makes two system calls, no allocation.
    unsafe { cmd.pre_exec(refuse_bpf_test_runs) };
    let res = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&res.stdout);
    assert_eq!(res.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&res.stderr));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["system"]["live_frames"], false, "{}", v["system"]);
    let f = refused(&v).unwrap_or_else(|| panic!("{}", v["findings"]));
    assert_eq!(f["severity"], "info");
    assert!(f["text"].as_str().unwrap().contains("Operation not permitted"), "{f}");
    assert!(f["fix"].as_str().unwrap().starts_with("xfwd bench --sender trafgen-xdp"), "{f}");

    // An MTU no UMEM frame carries: an error finding with its fix, exit 1.
    r.boxns.ip(&["link", "set", "eth5", "mtu", "3000"]).unwrap();
    let (code, out, _) = doctor(&r, &["eth4", "eth5"]);
    assert_eq!(code, Some(1), "{out}");
    let max = xfwd_dataplane::io::frames::xsk::MAX_MTU;
    let line = out.lines().find(|l| l.contains("mtu-too-large")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.starts_with("error") && line.contains("eth5: MTU 3000"), "{line}");
    assert!(out.contains(&format!("fix: ip link set eth5 mtu {max}")), "{out}");
    r.boxns.ip(&["link", "set", "eth5", "mtu", "1500"]).unwrap();

    // A port that does not exist: bad usage, one line, exit 2.
    let (code, out, err) = doctor(&r, &["eth4", "eth9"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        ["xfwd: error: eth9: no such interface in this network namespace (see `ip link show`)"]
    );

    // Nothing changed: no program attached, every port as it was.
    assert!(!xdp_attached(&r));
    assert_eq!(link_state(&r), before);
}
