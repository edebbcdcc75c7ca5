//! The A/B harness: the kernel path against xfwd by the reference method, on a rig it builds.
//!
//! [`args`] is what a bench is asked; [`harness`] runs the arms; [`traffic`] sets each arm up
//! and sends its traffic; [`measure`] measures one run; [`preflight`] checks the machine first;
//! [`stats`] does ministat's statistics; [`cpu`] samples per-core CPU; [`report`] is
//! `report.json`'s schema; [`plot`] draws the SVGs; [`table`] prints the table; [`scale`] gives
//! the router a full table and many destinations, drawn by [`tables`]; [`search`] finds the
//! zero-loss rates; [`lookups`] times lookups over a whole table.

pub mod args;
pub mod cpu;
pub mod harness;
pub mod lookups;
pub mod measure;
pub mod plot;
pub mod preflight;
pub mod report;
pub mod scale;
pub mod search;
pub mod stats;
pub mod table;
pub mod tables;
pub mod traffic;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use args::BenchArgs;
use report::Report;

/// Writes the plots of `report` into `out`, their names starting with `tag` (the mode, and
/// the frame size in a sweep); returns their file names.
pub fn plots(report: &Report, out: &Path, tag: &str) -> Result<Vec<String>> {
    let mode = tag;
    let mut files = Vec::new();
    for arm in &report.arms {
        // Arm names carry option values (a binary's path with `bin=`): only safe characters
        // go into the file name.
        let safe: String =
            arm.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect();
        let name = format!("cpu-{mode}-{safe}.svg");
        let title = format!("{mode} / {}: per-core idle and softirq, 0.5 s samples", arm.name);
        plot::cpu_over_time(arm, &title, &out.join(&name))?;
        files.push(name);
    }
    let tcp = report.conditions.test == "tcp";
    let (fig, label, f): (&str, &str, fn(&report::RunResult) -> f64) = if tcp {
        ("gbps", "Gb/s (sum of senders)", |r| r.gbps)
    } else {
        ("delivered_pps", "packets/s delivered", |r| r.delivered_pps)
    };
    let name = format!("ab-{mode}-{fig}.svg");
    plot::comparison(report, fig, label, f, &out.join(&name))?;
    files.push(name);
    files.extend(plot::latency_cdfs(report, out, mode)?);
    let name = format!("ab-{mode}-cpu-per-packet.svg");
    plot::comparison(
        report,
        "µs per packet",
        "busy CPU µs per delivered packet",
        |r| r.us_per_packet,
        &out.join(&name),
    )?;
    files.push(name);
    Ok(files)
}

/// `xfwd bench`. Every run of every arm and mode is attempted; when some failed, the table,
/// reports and plots are written all the same (statistics over the runs that completed) and
/// the command then fails, naming them.
pub fn run(args: &BenchArgs) -> Result<()> {
    let mut args = args.clone();
    preflight::preset(&mut args);
    let out = args.out.clone().unwrap_or_else(preflight::default_out);
    preflight::preflight(&args, &out)?;
    if args.lookups {
        return lookups::run(&args, &out);
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut progress = |msg: &str| crate::render::progress(&format!("xfwd bench: {msg} …"));
    // Ctrl-C stops between runs (and the traffic of the current one), then the rigs are removed.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))?;
    }
    let mut reports = Vec::new();
    let mut files = Vec::new();
    for mode in args.mode.clone() {
        // One report per frame size: a sweep runs them one after the other.
        let frames: Vec<Option<args::FrameSize>> =
            if args.frames.is_empty() { vec![None] } else { args.frames.iter().copied().map(Some).collect() };
        let sweep = frames.len() > 1;
        let mut of_mode = Vec::new();
        for frame in frames {
            let args = BenchArgs { frame, ..args.clone() };
            let tag = match frame {
                Some(f) if sweep => format!("{mode}-{}", f.label()),
                _ => mode.to_string(),
            };
            let report = harness::run_mode(&args, mode, &out, &tag, &stop, &mut progress)?;
            crate::render::progress_done();
            let plotted = plots(&report, &out, &tag)?;
            println!("{}", table::render(&report));
            println!("  plots: {}", plotted.join(", "));
            files.push(format!("report-{tag}.json"));
            of_mode.push(report);
        }
        if sweep {
            println!("{}", table::sweep(&of_mode));
            let plotted = plot::sweep(&of_mode, &out, &mode.to_string())?;
            println!("  plots: {}", plotted.join(", "));
        }
        reports.extend(of_mode);
    }
    println!("reports: {} in {} (schema {}); plots beside them", files.join(", "), out.display(), report::SCHEMA);
    let failed = failed_runs(&reports);
    anyhow::ensure!(
        failed.is_empty(),
        "{} run(s) failed ({}); the table above and the reports say why",
        failed.len(),
        failed.join(", ")
    );
    Ok(())
}

/// `router kernel run 2` for each failed run of `reports`.
fn failed_runs(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .flat_map(|r| {
            r.arms.iter().flat_map(move |a| {
                a.failed.iter().map(move |f| format!("{} {} run {}", r.conditions.mode, a.name, f.run))
            })
        })
        .collect()
}

/// `xfwd report FILE… [--monitor ARM=FILE]…`: the table and plots again from saved reports.
/// With monitors (what `xfwd monitor` wrote on the box while `xfwd load` ran arm ARM), each
/// arm's runs get the box's CPU samples, busy CPU and cost per packet, written back into the
/// report file.
pub fn report_files(files: &[PathBuf], out: Option<&Path>, monitors: &[(String, PathBuf)]) -> Result<()> {
    let monitors: Vec<(String, crate::remote::Monitor)> = monitors
        .iter()
        .map(|(arm, path)| {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let m: crate::remote::Monitor = serde_json::from_str(&text)
                .with_context(|| format!("{}: not what xfwd monitor writes", path.display()))?;
            Ok((arm.clone(), m))
        })
        .collect::<Result<_>>()?;
    for f in files {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let mut r: Report =
            serde_json::from_str(&text).with_context(|| format!("{}: not an xfwd report", f.display()))?;
        anyhow::ensure!(
            r.schema <= report::SCHEMA,
            "{}: schema {} is newer than this xfwd reads ({})",
            f.display(),
            r.schema,
            report::SCHEMA
        );
        for (name, m) in &monitors {
            let names = arm_names(&r);
            let arm =
                r.arms.iter_mut().find(|a| &a.name == name).with_context(|| {
                    format!("--monitor {name}=…: {} has no arm {name} (it has {names})", f.display())
                })?;
            for problem in crate::remote::join_monitor(arm, m) {
                eprintln!("xfwd report: warning: {problem}");
                if !r.warnings.contains(&problem) {
                    r.warnings.push(problem);
                }
            }
        }
        r.compute_stats();
        if !monitors.is_empty() {
            std::fs::write(f, serde_json::to_string_pretty(&r)?).with_context(|| format!("writing {}", f.display()))?;
        }
        println!("{}", table::render(&r));
        let dir = out.map(Path::to_path_buf).unwrap_or_else(|| f.parent().map(Path::to_path_buf).unwrap_or_default());
        let files = plots(&r, &dir, &r.conditions.mode)?;
        println!("  plots: {} in {}", files.join(", "), dir.display());
    }
    Ok(())
}

fn arm_names(r: &Report) -> String {
    r.arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use report::{test_report, test_run, ArmResult, FailedRun};

    #[test]
    fn failed_runs_are_named_and_plots_survive_an_arm_with_none_completed() {
        let r = test_report(vec![
            ArmResult { name: "kernel".into(), runs: vec![test_run(1, 4.0, 100)], failed: Vec::new() },
            ArmResult {
                name: "xfwd".into(),
                runs: Vec::new(),
                failed: vec![FailedRun { run: 1, error: "x".into() }, FailedRun { run: 2, error: "y".into() }],
            },
        ]);
        assert_eq!(failed_runs(std::slice::from_ref(&r)), ["router xfwd run 1", "router xfwd run 2"]);
        assert!(failed_runs(&[test_report(vec![ArmResult::new("kernel")])]).is_empty());
        let dir = std::env::temp_dir().join(format!("xfwd-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = plots(&r, &dir, "router").unwrap();
        assert!(files.iter().all(|f| dir.join(f).exists()), "{files:?}");
        // Every arm failed: still plots, with no bars.
        let none = test_report(vec![ArmResult { runs: Vec::new(), ..r.arms[1].clone() }]);
        plots(&none, &dir, "router").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
