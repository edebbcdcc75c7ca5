//! A short `xfwd bench` on the rig, both modes, both arms, one run each, TCP and 64-byte
//! packet rate: the reports parse and their numbers are consistent. (Figures belong to the
//! benchmark itself; this only proves the harness measures something real.)

mod common;

use std::process::Command;

use common::{root_or_skip, serial, XFWD};
use xfwd::bench::report::Report;

fn run_bench(out: &std::path::Path, extra: &[&str]) -> Vec<Report> {
    let mut args =
        vec!["bench", "--mode", "router,bridge", "--arm", "kernel,xfwd", "--runs", "1", "--time", "2", "--omit", "0"];
    args.extend_from_slice(extra);
    let o = out.to_str().unwrap();
    args.extend_from_slice(&["--out", o]);
    let res = Command::new(XFWD).args(&args).output().unwrap();
    assert!(
        res.status.success(),
        "xfwd bench failed: {}\n{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    let table = String::from_utf8_lossy(&res.stdout);
    assert!(table.contains("router ") && table.contains("bridge "), "{table}");
    ["router", "bridge"]
        .iter()
        .map(|m| {
            let text = std::fs::read_to_string(out.join(format!("report-{m}.json"))).unwrap();
            serde_json::from_str::<Report>(&text).unwrap()
        })
        .collect()
}

fn check_common(r: &Report) {
    assert_eq!(r.schema, 1);
    assert_eq!(r.arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["kernel", "xfwd"]);
    assert!(!r.conditions.kernel.is_empty() && r.conditions.cpus >= 1);
    for arm in &r.arms {
        assert_eq!(arm.runs.len(), 1);
        let run = &arm.runs[0];
        assert!(run.packets > 0 && run.busy_cpu_s > 0.0 && run.us_per_packet > 0.0, "{}: {run:?}", arm.name);
        assert!(run.cpu.len() >= 2, "{}: {} CPU samples in 2 s", arm.name, run.cpu.len());
        for s in &run.cpu {
            for c in &s.cpus {
                let sum = c.usr + c.sys + c.softirq + c.idle + c.other;
                assert!(sum == 0.0 || (sum - 100.0).abs() < 0.01, "CPU shares sum to {sum}");
            }
        }
        if arm.name == "xfwd" {
            assert!(run.queue_rx.iter().flatten().sum::<u64>() > 0, "xfwd counted frames per queue");
        }
    }
}

#[test]
fn a_short_ab_run_gives_consistent_reports() {
    if !root_or_skip("a_short_ab_run_gives_consistent_reports") {
        return;
    }
    let _g = serial();
    let dir = std::env::temp_dir().join(format!("xfwd-bench-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    for r in run_bench(&dir.join("tcp"), &["--flows", "2"]) {
        check_common(&r);
        for arm in &r.arms {
            let run = &arm.runs[0];
            assert!(run.gbps > 0.0 && run.flows_bps.len() == 2, "{}: {run:?}", arm.name);
            assert!((run.gbps * 1e9 - run.flows_bps.iter().sum::<f64>()).abs() < 1.0);
        }
    }
    for r in run_bench(&dir.join("udp"), &["--frame", "64", "--rate", "20000", "--flows", "16"]) {
        check_common(&r);
        for arm in &r.arms {
            let run = &arm.runs[0];
            // The generator's own rate is this machine's speed; that it was measured is the point.
            assert!(run.offered_pps > 0.0, "{}: offered {}", arm.name, run.offered_pps);
            assert!(run.delivered_pps <= run.offered_pps * 1.01, "{}: delivered more than offered: {run:?}", arm.name);
            assert!((0.0..=1.0).contains(&run.loss));
        }
    }
    // The saved reports render again, with their plots.
    let res = Command::new(XFWD)
        .args(["report", dir.join("udp/report-router.json").to_str().unwrap(), "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    assert!(dir.join("ab-router-delivered_pps.svg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
