//! SVG plots of a report: each arm's per-core CPU over time with its averages (the reference's
//! graph: idle and softirq per core, 0.5 s samples), and the A/B comparison of each arm's mean
//! with its 95 % confidence interval.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::report::{ArmResult, Report, RunResult};
use super::stats::Summary;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
];

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// Per-core idle and softirq over time for one arm's runs laid end to end, with each series'
/// average as a dashed line.
pub fn cpu_over_time(arm: &ArmResult, title: &str, file: &Path) -> Result<()> {
    let mut points: Vec<(f64, Vec<(f64, f64)>)> = Vec::new(); // (t s, per cpu (idle, softirq))
    let mut offset = 0.0;
    for r in &arm.runs {
        let last = r.cpu.last().map_or(0.0, |s| s.t_ms as f64 / 1000.0);
        for s in &r.cpu {
            points.push((offset + s.t_ms as f64 / 1000.0, s.cpus.iter().map(|c| (c.idle, c.softirq)).collect()));
        }
        offset += last + 0.5;
    }
    let ncpu = points.iter().map(|p| p.1.len()).max().unwrap_or(0);
    let root = SVGBackend::new(file, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..offset.max(1.0), 0.0..100.0)
        .map_err(err)?;
    chart.configure_mesh().x_desc("seconds (runs end to end)").y_desc("% of the core").draw().map_err(err)?;
    for c in 0..ncpu {
        for (k, (label, pick)) in [("idle", 0usize), ("softirq", 1usize)].into_iter().enumerate() {
            let color = PALETTE[(c * 2 + k) % PALETTE.len()];
            let series: Vec<(f64, f64)> =
                points.iter().filter_map(|(t, v)| v.get(c).map(|x| (*t, if pick == 0 { x.0 } else { x.1 }))).collect();
            let avg = series.iter().map(|p| p.1).sum::<f64>() / series.len().max(1) as f64;
            chart
                .draw_series(LineSeries::new(series, color.stroke_width(2)))
                .map_err(err)?
                .label(format!("cpu{c} {label} (avg {avg:.0} %)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            // The average, dashed.
            let dashes: Vec<(f64, f64)> = (0..((offset / 0.5) as usize)).map(|i| (i as f64 * 0.5, avg)).collect();
            chart
                .draw_series(dashes.chunks(2).map(|w| PathElement::new(w.to_vec(), color.mix(0.6).stroke_width(1))))
                .map_err(err)?;
        }
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Each arm's mean of `figure` with its 95 % confidence interval (Student's t), side by side;
/// an arm with no completed run has no bar.
pub fn comparison(report: &Report, figure: &str, label: &str, value: fn(&RunResult) -> f64, file: &Path) -> Result<()> {
    let bars: Vec<(String, f64, f64)> = report
        .arms
        .iter()
        .filter_map(|a| {
            let v: Vec<f64> = a.runs.iter().map(value).collect();
            let s = Summary::of(&v)?;
            let half = if s.n > 1 {
                StudentsT::new(0.0, 1.0, (s.n - 1) as f64).ok()?.inverse_cdf(0.975) * s.stddev / (s.n as f64).sqrt()
            } else {
                0.0
            };
            Some((a.name.clone(), s.mean, half))
        })
        .collect();
    let top = bars.iter().map(|b| b.1 + b.2).fold(0.0, f64::max).max(f64::MIN_POSITIVE) * 1.15;
    let root = SVGBackend::new(file, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let c = &report.conditions;
    let title = format!("{figure}: {} {} {} queue(s) {} flow(s), mean ± 95 % CI", c.mode, c.test, c.queues, c.flows);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..bars.len()).into_segmented(), 0.0..top)
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => names.get(*i).cloned().unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .y_desc(label)
        .draw()
        .map_err(err)?;
    for (i, (_, mean, half)) in bars.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), *mean)],
                color.mix(0.7).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(ErrorBar::new_vertical(
                SegmentValue::CenterOf(i),
                mean - half,
                *mean,
                mean + half,
                BLACK.stroke_width(2),
                12,
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// A frame-size sweep (one report per size, in the order run): per arm the median rate (the
/// NDR where it was searched, else delivered) against the frame size, in Mpps and in Gb/s,
/// one line per arm, with 10G Ethernet's line rate dashed for reference. Returns the files.
pub fn sweep(reports: &[Report], out: &Path, mode: &str) -> Result<Vec<String>> {
    let Some(first) = reports.first() else { return Ok(Vec::new()) };
    let sizes: Vec<(String, f64)> = reports
        .iter()
        .filter_map(|r| {
            let f = super::args::FrameSize::of(&r.conditions)?;
            Some((f.label(), f.mean_bytes(r.conditions.ip == 6)))
        })
        .collect();
    let what = if first.sweep_figure() == "ndr_pps" { "NDR" } else { "delivered" };
    let mut files = Vec::new();
    for (unit, scale) in [("Mpps", None), ("Gb/s", Some(()))] {
        let value = |pps: f64, bytes: f64| if scale.is_some() { pps * bytes * 8.0 / 1e9 } else { pps / 1e6 };
        let series: Vec<(String, Vec<(f64, f64)>)> = first
            .arms
            .iter()
            .map(|a| {
                let points = reports
                    .iter()
                    .zip(&sizes)
                    .enumerate()
                    .filter_map(|(i, (r, (_, bytes)))| {
                        let m = r
                            .stats
                            .iter()
                            .find(|f| f.figure == r.sweep_figure())?
                            .summaries
                            .iter()
                            .find(|(n, _)| *n == a.name)?
                            .1
                            .median;
                        Some((i as f64, value(m, *bytes)))
                    })
                    .collect();
                (a.name.clone(), points)
            })
            .collect();
        let line: Vec<(f64, f64)> = sizes
            .iter()
            .enumerate()
            .map(|(i, (_, b))| (i as f64, value(super::table::line_rate_pps(*b), *b)))
            .collect();
        let top =
            series.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)).chain(line.iter().map(|p| p.1)).fold(0.0, f64::max);
        let name = format!("sweep-{mode}-{}.svg", if scale.is_some() { "gbps" } else { "mpps" });
        let path = out.join(&name);
        let root = SVGBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let title = format!("{mode}: {what} {unit} against frame size, median of runs");
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5..(sizes.len() as f64 - 0.5).max(0.5), 0.0..(top * 1.1).max(f64::MIN_POSITIVE))
            .map_err(err)?;
        let labels: Vec<String> = sizes.iter().map(|s| s.0.clone()).collect();
        chart
            .configure_mesh()
            .x_labels(labels.len().max(1))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("frame bytes (FCS included)")
            .y_desc(unit)
            .draw()
            .map_err(err)?;
        for (k, (arm, points)) in series.into_iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(arm)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled()))).map_err(err)?;
        }
        // The line rate, dashed.
        let dashes: Vec<Vec<(f64, f64)>> = line
            .windows(2)
            .flat_map(|w| {
                (0..10).step_by(2).map(move |j| {
                    let at = |t: f64| (w[0].0 + (w[1].0 - w[0].0) * t, w[0].1 + (w[1].1 - w[0].1) * t);
                    vec![at(f64::from(j) / 10.0), at(f64::from(j + 1) / 10.0)]
                })
            })
            .collect();
        chart
            .draw_series(dashes.into_iter().map(|d| PathElement::new(d, BLACK.stroke_width(1))))
            .map_err(err)?
            .label("10G line rate")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
        files.push(name);
    }
    Ok(files)
}

/// `--latency`: per load, each arm's RTT as a cumulative distribution (the share of pings
/// answered within each time), one line per arm, in `latency-<tag>-<percent>.svg`; the time axis
/// ends at the largest arm's 99.9th percentile (or its largest sample). Returns the files.
pub fn latency_cdfs(report: &Report, out: &Path, tag: &str) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for at in &report.latency {
        let series: Vec<(String, Vec<f64>)> = at
            .arms
            .iter()
            .map(|a| {
                let mut v: Vec<f64> = a.runs.iter().flat_map(|r| r.rtt_ms.iter().copied()).collect();
                v.sort_by(f64::total_cmp);
                (a.name.clone(), v)
            })
            .collect();
        let right = series
            .iter()
            .filter_map(|(_, v)| super::table::quantile(v, 0.999).or_else(|| v.last().copied()))
            .fold(0.0, f64::max)
            .max(0.001);
        let name = format!("latency-{tag}-{}.svg", at.percent);
        let path = out.join(&name);
        let root = SVGBackend::new(&path, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let title =
            format!("{tag}: RTT at {} % of the baseline's NDR ({:.1} kpps), CDF", at.percent, at.rate_pps / 1e3);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..right * 1.05, 0.0..1.0)
            .map_err(err)?;
        chart.configure_mesh().x_desc("RTT, ms").y_desc("share of pings answered within").draw().map_err(err)?;
        for (k, (arm, v)) in series.into_iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let n = v.len().max(1) as f64;
            let points: Vec<(f64, f64)> =
                v.iter().enumerate().map(|(i, x)| (x.min(right * 1.05), (i + 1) as f64 / n)).collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(err)?
                .label(format!("{arm} ({} pings)", v.len()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
        files.push(name);
    }
    Ok(files)
}
