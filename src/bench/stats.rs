//! Statistics as ministat does them: a summary of each set of runs, and the difference between
//! two sets with its confidence interval by Student's t on the pooled standard deviation — or
//! the verdict that no difference is proven at that confidence.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// n, min, max, median, mean and sample standard deviation of a set of runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); 0 for fewer than two values.
    pub stddev: f64,
}

impl Summary {
    /// Summarises `values` (None when empty).
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Some(Summary { n, min: v[0], max: v[n - 1], median, mean, stddev: var.sqrt() })
    }
}

/// The difference of a variant against a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Confidence level, e.g. 95.0.
    pub confidence: f64,
    /// Variant mean minus baseline mean.
    pub diff: f64,
    /// Half-width of the confidence interval of `diff`.
    pub half_width: f64,
    /// `diff` as a percentage of the baseline mean (NaN, written `null`, for a baseline of 0).
    #[serde(deserialize_with = "null_is_nan")]
    pub diff_pct: f64,
    /// `half_width` as a percentage of the baseline mean (likewise).
    #[serde(deserialize_with = "null_is_nan")]
    pub half_width_pct: f64,
    /// The pooled standard deviation.
    pub pooled_stddev: f64,
    /// Whether |diff| exceeds the half-width: a difference is proven.
    pub proven: bool,
}

/// A percentage as serde_json writes a NaN (`null`), read back as NaN: a report whose baseline
/// measured 0 (Gb/s in a packet-rate test) must read back as it was written.
fn null_is_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Comparison {
    /// Compares `variant` against `baseline` at `confidence` percent (ministat's method).
    /// None when either has fewer than two values (no variance to pool).
    pub fn of(baseline: &Summary, variant: &Summary, confidence: f64) -> Option<Comparison> {
        if baseline.n < 2 || variant.n < 2 {
            return None;
        }
        let df = (baseline.n + variant.n - 2) as f64;
        let pooled = (((baseline.n - 1) as f64 * baseline.stddev.powi(2)
            + (variant.n - 1) as f64 * variant.stddev.powi(2))
            / df)
            .sqrt();
        let t = StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(1.0 - (1.0 - confidence / 100.0) / 2.0);
        let half_width = t * pooled * (1.0 / baseline.n as f64 + 1.0 / variant.n as f64).sqrt();
        let diff = variant.mean - baseline.mean;
        let pct = |x: f64| if baseline.mean != 0.0 { x * 100.0 / baseline.mean } else { f64::NAN };
        Some(Comparison {
            confidence,
            diff,
            half_width,
            diff_pct: pct(diff),
            half_width_pct: pct(half_width),
            pooled_stddev: pooled,
            proven: diff.abs() > half_width,
        })
    }

    /// ministat's sentence for it.
    pub fn sentence(&self) -> String {
        if self.proven {
            format!(
                "Difference at {:.1}% confidence: {:+.4} +/- {:.4}, {:+.2}% +/- {:.2}% (Student's t, pooled s = {:.4})",
                self.confidence, self.diff, self.half_width, self.diff_pct, self.half_width_pct, self.pooled_stddev
            )
        } else {
            format!("No difference proven at {:.1}% confidence", self.confidence)
        }
    }
}

/// Jain's fairness index of per-flow rates: 1 when all are equal, 1/n when one takes all.
pub fn jain(rates: &[f64]) -> Option<f64> {
    let sum: f64 = rates.iter().sum();
    let sq: f64 = rates.iter().map(|x| x * x).sum();
    (!rates.is_empty() && sq > 0.0).then(|| sum * sum / (rates.len() as f64 * sq))
}

/// The `p`-th percentile (0–100) by nearest rank.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    // ministat's own example data (its README): iguana and chameleon.
    const IGUANA: [f64; 7] = [50.0, 200.0, 150.0, 400.0, 750.0, 400.0, 150.0];
    const CHAMELEON: [f64; 5] = [150.0, 400.0, 720.0, 500.0, 930.0];

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn a_comparison_against_a_baseline_of_zero_reads_back_as_written() {
        let zero = Summary::of(&[0.0, 0.0, 0.0]).unwrap();
        let c = Comparison::of(&zero, &zero, 95.0).unwrap();
        assert!(c.diff_pct.is_nan() && c.half_width_pct.is_nan());
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"diff_pct\":null"), "{json}");
        let back: Comparison = serde_json::from_str(&json).unwrap();
        assert!(back.diff_pct.is_nan() && back.half_width_pct.is_nan() && !back.proven);
        assert_eq!((back.diff, back.half_width), (0.0, 0.0));
    }

    #[test]
    fn summaries_match_ministat() {
        let i = Summary::of(&IGUANA).unwrap();
        assert_eq!((i.n, i.min, i.max, i.median, i.mean), (7, 50.0, 750.0, 200.0, 300.0));
        assert!(close(i.stddev, 238.04761, 1e-4), "{}", i.stddev);
        let c = Summary::of(&CHAMELEON).unwrap();
        assert_eq!((c.n, c.min, c.max, c.median, c.mean), (5, 150.0, 930.0, 500.0, 540.0));
        assert!(close(c.stddev, 299.08193, 1e-4), "{}", c.stddev);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn comparisons_match_ministat() {
        let (i, c) = (Summary::of(&IGUANA).unwrap(), Summary::of(&CHAMELEON).unwrap());
        // `ministat iguana chameleon`: no difference proven at 95 %.
        let at95 = Comparison::of(&i, &c, 95.0).unwrap();
        assert!(!at95.proven);
        assert_eq!(at95.sentence(), "No difference proven at 95.0% confidence");
        // `ministat -c 80 iguana chameleon`: 240 +/- 212.215, 80% +/- 70.7384%, pooled s = 264.159.
        // ministat's t table has three decimals (1.372 for df 10); the exact quantile is 1.37218,
        // hence the tolerance on the interval.
        let at80 = Comparison::of(&i, &c, 80.0).unwrap();
        assert!(at80.proven);
        assert!(close(at80.diff, 240.0, 1e-9));
        assert!(close(at80.half_width, 212.215, 0.05), "{}", at80.half_width);
        assert!(close(at80.diff_pct, 80.0, 1e-9));
        assert!(close(at80.half_width_pct, 70.7384, 0.02), "{}", at80.half_width_pct);
        assert!(close(at80.pooled_stddev, 264.159, 1e-3), "{}", at80.pooled_stddev);
        assert!(Comparison::of(&Summary::of(&[1.0]).unwrap(), &c, 95.0).is_none());
    }

    #[test]
    fn textbook_t_quantile() {
        // Two samples of 5: df = 8, t(0.975, 8) = 2.306; equal stddev 1 → half-width 2.306·√(2/5).
        let a = Summary::of(&[9.0, 10.0, 10.0, 10.0, 11.0]).unwrap();
        let b = Summary::of(&[19.0, 20.0, 20.0, 20.0, 21.0]).unwrap();
        let cmp = Comparison::of(&a, &b, 95.0).unwrap();
        let s = (0.5f64).sqrt();
        assert!(close(cmp.half_width, 2.306_004 * s * (0.4f64).sqrt(), 1e-5), "{}", cmp.half_width);
        assert!(cmp.proven);
    }

    #[test]
    fn fairness_and_percentiles() {
        assert_eq!(jain(&[1.0, 1.0, 1.0, 1.0]), Some(1.0));
        assert!(close(jain(&[1.0, 0.0, 0.0, 0.0]).unwrap(), 0.25, 1e-12));
        assert_eq!(jain(&[]), None);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 1.0), Some(7.0));
    }
}
