//! The two-machine pieces, played on one machine: `xfwd load` in the clients' namespace against
//! servers in another, `xfwd monitor` in the box, `xfwd report` on what load wrote.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{root_or_skip, serial, XFWD};
use xfwd::bench::report::Report;
use xfwd::rig::Rig;

const RIG_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-router.toml");

#[test]
fn load_monitor_and_report_across_namespaces() {
    if !root_or_skip("load_monitor_and_report_across_namespaces") {
        return;
    }
    let _g = serial();
    let r = Rig::router(1).unwrap();
    let dir = std::env::temp_dir().join(format!("xfwd-remote-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut kernel = r.start_xfwd(XFWD, &["kernel", "router", "--config", RIG_CONFIG]).unwrap();
    Rig::ping_until(&r.h2, "198.18.10.1", Duration::from_secs(5)).unwrap();
    let mon_file = dir.join("box.json");
    let monitor = r
        .boxns
        .command(XFWD)
        .args(["monitor", "--ports", "eth4,eth5", "--time", "3s", "--out", mon_file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let report = dir.join("ref.json");
    for (arm, append) in [("kernel", false), ("again", true)] {
        let mut args = vec![
            "load",
            "--server",
            "198.18.10.1",
            "--server-netns",
            r.h1.name(),
            "--cports",
            "55000,55002",
            "--time",
            "1",
            "--omit",
            "0",
            "--arm",
            arm,
            "--out",
            report.to_str().unwrap(),
        ];
        if append {
            args.push("--append");
        }
        let out = r.h2.command(XFWD).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let rep: Report = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(rep.arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["kernel", "again"]);
    for a in &rep.arms {
        assert_eq!(a.runs[0].flows_bps.len(), 2);
        assert!(a.runs[0].gbps > 0.0);
    }
    let mon = monitor.wait_with_output().unwrap();
    assert!(mon.status.success());
    let text = String::from_utf8_lossy(&mon.stdout);
    assert!(text.contains("cpu0: usr") && text.contains("softirq"), "{text}");
    let m: xfwd::remote::Monitor = serde_json::from_str(&std::fs::read_to_string(&mon_file).unwrap()).unwrap();
    assert!(m.cpu.len() >= 4, "{} samples in 3 s at 0.5 s", m.cpu.len());
    let out = Command::new(XFWD).args(["report", report.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("again vs kernel, gbps"));
    assert!(kernel.stop(libc::SIGTERM, Duration::from_secs(10)).unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}
