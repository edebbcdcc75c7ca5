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
    Rig::ping_until(&r.h2, "198.18.10.1", common::PATH_UP).unwrap();
    let mon_file = dir.join("box.json");
    let monitor = r
        .boxns
        .command(XFWD)
        .args(["monitor", "--ports", "eth4,eth5", "--out", mon_file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
            "2",
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
    // The monitor runs until told to stop, as on the board (`ip netns exec` became xfwd: same pid).
    let _ = Command::new("kill").args(["-INT", &monitor.id().to_string()]).status();
    let mon = monitor.wait_with_output().unwrap();
    assert!(mon.status.success());
    // Its stderr is a pipe: no progress line redrawn with escape codes (a terminal gets one).
    assert!(!mon.stderr.contains(&0x1b), "{}", String::from_utf8_lossy(&mon.stderr));
    let text = String::from_utf8_lossy(&mon.stdout);
    assert!(text.contains("cpu0: usr") && text.contains("softirq"), "{text}");
    let m: xfwd::remote::Monitor = serde_json::from_str(&std::fs::read_to_string(&mon_file).unwrap()).unwrap();
    assert!(!m.cpu.is_empty() && m.started_unix_ms.is_some() && m.packets.len() >= 2, "{m:?}");
    // Before the join the load's runs carry no CPU: they were not measured on this side.
    assert!(rep.arms.iter().all(|a| a.runs.iter().all(|r| r.cpu.is_empty())));
    let mon = mon_file.to_str().unwrap();
    let out = Command::new(XFWD)
        .args([
            "report",
            report.to_str().unwrap(),
            "--monitor",
            &format!("kernel={mon}"),
            "--monitor",
            &format!("again={mon}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("again vs kernel, gbps"));
    // The report now holds, for every run, the box's samples during it, the busy CPU they add
    // up to, the packets the box received and what each cost — and the plots have data.
    // A run in which no sample of the monitor falls (its sampling thread starved for the whole
    // run on a loaded machine) is named instead, never joined with made-up figures.
    let joined: Report = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let t0 = m.started_unix_ms.unwrap();
    let mut every_run_sampled = true;
    for a in &joined.arms {
        for run in &a.runs {
            // The monitor is started first, but on a loaded machine it can take its first
            // sample after the load's first run began: such a run is named, not joined.
            let Some(from) = run.started_unix_ms.unwrap().checked_sub(t0) else {
                every_run_sampled = false;
                assert!(run.cpu.is_empty(), "{}: {run:?}", a.name);
                let named = format!("{} run {}: it began before the monitor did", a.name, run.run);
                assert!(said.contains(&named), "{named} not said: {said}");
                continue;
            };
            let to = run.ended_unix_ms.unwrap() - t0;
            let half = m.interval_ms / 2;
            if m.cpu.iter().any(|s| s.t_ms > from + half && s.t_ms <= to + half) {
                assert!(!run.cpu.is_empty() && run.cpu_avg.len() == m.cpu[0].cpus.len(), "{}: {run:?}", a.name);
                assert!(run.busy_cpu_s > 0.0 && run.packets > 0 && run.us_per_packet > 0.0, "{}: {run:?}", a.name);
            } else {
                every_run_sampled = false;
                assert!(run.cpu.is_empty(), "{}: {run:?}", a.name);
                let named = format!("{} run {}: no monitor sample falls in it", a.name, run.run);
                assert!(said.contains(&named), "{named} not said: {said}");
            }
        }
    }
    if every_run_sampled {
        assert!(
            joined.stats.iter().any(|f| f.figure == "us_per_packet" && f.summaries.len() == 2),
            "{:?}",
            joined.stats
        );
    }
    let bad = Command::new(XFWD)
        .args(["report", report.to_str().unwrap(), "--monitor", &format!("nope={mon}")])
        .output()
        .unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("has no arm nope"));
    assert!(kernel.stop(libc::SIGTERM, Duration::from_secs(10)).unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}
