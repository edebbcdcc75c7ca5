//! The zero-loss rate search (`--search ndr,pdr`): the highest offered rate an arm forwards
//! with no loss (NDR: RFC 2544's throughput) and with at most [`PDR_LOSS`] lost (PDR), found
//! by trials at fixed rates, in the manner of RFC 2544 §26.1 and FD.io CSIT's MLRsearch.
//!
//! The search is pure: it asks `trial(rate)` for what was sent and delivered and decides the
//! next rate, so that it is tested without a rig. How it goes, per goal (NDR, then PDR):
//! - one trial flat out gives the upper bound (the most the sender offers) and the rate the
//!   path delivered under overload, which is where the first bisection probe goes. It is never
//!   a pass itself: on the rig a veth pushes back on a sender that outruns its peer (trafgen's
//!   packet socket waits; frames queued in one CPU's softirq are taken in turn), so a flat-out
//!   trial loses nothing where a NIC, which never pushes back, would drop; every pass is a
//!   trial at a fixed, paced rate, as RFC 2544's are;
//! - a trial that loses beyond the goal is repeated once before the upper bound moves (this
//!   machine is noisy: one lost frame in a trial may be another process's); a pass moves the
//!   lower bound;
//! - bisection stops when the bounds are within `resolution` of the upper one; then `final`
//!   trials at the lower bound confirm it, and one that loses (twice) makes it the upper bound
//!   and the search goes on below it;
//! - the PDR's search starts from the NDR, which meets the PDR's goal too.
//!
//! The figure is the rate the passing trial actually offered (the sender's own count over the
//! trial's time), not the rate asked of it.

use anyhow::Result;
use serde::{Deserialize, Serialize};

/// The PDR's loss ratio: at most 0.5 % of the frames offered.
pub const PDR_LOSS: f64 = 0.005;

/// Below this offered rate (packets per second) the search gives up: nothing passes.
pub const MIN_RATE: f64 = 1_000.0;

/// A paced trial whose sender offered less than its asked rate by more than this share did
/// not test that rate (on the rig the sender shares the CPUs with the path under test): it
/// does not pass, whatever it lost.
pub const SHORT: f64 = 0.02;

/// What a search looks for.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Goal {
    /// No frame lost (RFC 2544 throughput).
    Ndr,
    /// At most [`PDR_LOSS`] of the frames lost.
    Pdr,
}

impl Goal {
    /// The most a trial may lose and meet the goal, as a share of what it offered.
    pub fn loss_allowed(self) -> f64 {
        match self {
            Goal::Ndr => 0.0,
            Goal::Pdr => PDR_LOSS,
        }
    }

    /// `ndr`, `pdr`.
    pub fn name(self) -> &'static str {
        match self {
            Goal::Ndr => "ndr",
            Goal::Pdr => "pdr",
        }
    }
}

/// How the search runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Seconds per trial.
    pub trial_s: u32,
    /// The bounds' width, as a share of the upper one, at which bisection stops.
    pub resolution: f64,
    /// Trials at the found rate that must pass (each with its repeat) before it stands.
    pub final_trials: u32,
    /// The most trials one goal's search runs (repeats included); the lower bound then stands.
    pub max_trials: u32,
}

/// What one trial sent and delivered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Counted {
    /// Frames the sender says it sent.
    pub sent: u64,
    /// Frames the server's port received in the trial (and a moment after, for those still
    /// on their way).
    pub delivered: u64,
    /// The trial's length, s.
    pub secs: f64,
}

impl Counted {
    /// The share of the frames sent that were not delivered (never below 0: frames the
    /// server's port received besides the test's cannot make up for lost ones, but do not
    /// count as negative loss either).
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 1.0;
        }
        self.sent.saturating_sub(self.delivered) as f64 / self.sent as f64
    }

    /// The rate actually offered, packets per second.
    pub fn offered_pps(&self) -> f64 {
        self.sent as f64 / self.secs.max(f64::MIN_POSITIVE)
    }
}

/// One trial, as the report keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// `max` (flat out), `ndr`, `pdr`, or `ndr-final` / `pdr-final`.
    pub phase: String,
    /// The rate asked of the sender, packets per second (0: flat out).
    pub asked_pps: u64,
    /// What it sent, delivered, and in how long.
    #[serde(flatten)]
    pub counted: Counted,
    /// Whether it met its phase's goal (`max`: whether nothing was lost).
    pub passed: bool,
    /// Whether the sender fell more than [`SHORT`] below the asked rate (the trial then does
    /// not pass).
    #[serde(default)]
    pub short: bool,
}

/// A search's outcome for one run of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The flat-out trial's offered rate: the search's upper bound.
    pub max_offered_pps: f64,
    /// The NDR found (`None`: not searched, or no rate down to [`MIN_RATE`] passed).
    pub ndr_pps: Option<f64>,
    /// The PDR found (as `ndr_pps`).
    pub pdr_pps: Option<f64>,
    /// Whether a goal was met at the flat-out trial's rate (to within twice the resolution):
    /// the sender, not the path, was the limit.
    pub sender_limited: bool,
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
}

/// Runs the search for `goals` (in the order NDR, PDR whatever the order given) with
/// `trial(rate)` (0: flat out), which sends at that rate for the trial's time and counts.
pub fn search(goals: &[Goal], p: &Params, mut trial: impl FnMut(u64) -> Result<Counted>) -> Result<Outcome> {
    let max = trial(0)?;
    let mut out = Outcome {
        max_offered_pps: max.offered_pps(),
        ndr_pps: None,
        pdr_pps: None,
        sender_limited: false,
        trials: vec![Trial {
            phase: "max".into(),
            asked_pps: 0,
            counted: max,
            passed: max.loss() == 0.0,
            short: false,
        }],
    };
    let overload_delivered = max.delivered as f64 / max.secs.max(f64::MIN_POSITIVE);
    for goal in [Goal::Ndr, Goal::Pdr].into_iter().filter(|g| goals.contains(g)) {
        // The NDR meets the PDR's goal: the PDR is at least it.
        let from = if goal == Goal::Pdr { out.ndr_pps } else { None };
        let found = one_goal(goal, p, from, max.offered_pps(), overload_delivered, &mut out.trials, &mut trial)?;
        if found.is_some_and(|f| f >= max.offered_pps() * (1.0 - 2.0 * p.resolution)) {
            out.sender_limited = true;
        }
        match goal {
            Goal::Ndr => out.ndr_pps = found,
            // A PDR trial asked above the NDR may offer less than the NDR's did (the sender a
            // little short): the PDR is still at least the NDR, which met its goal.
            Goal::Pdr => out.pdr_pps = found.into_iter().chain(from).reduce(f64::max),
        }
    }
    Ok(out)
}

/// One goal's bisection between `from` (a rate known to pass, or none) and `max`, its first
/// probe at `first`; returns the offered rate of the highest passing trial that stood.
fn one_goal(
    goal: Goal,
    p: &Params,
    from: Option<f64>,
    max: f64,
    first: f64,
    trials: &mut Vec<Trial>,
    trial: &mut impl FnMut(u64) -> Result<Counted>,
) -> Result<Option<f64>> {
    let start = trials.len();
    // The lower bound's asked rate and the rate its trial offered.
    let mut lo: Option<(f64, f64)> = from.map(|f| (f, f));
    let mut hi = max;
    let mut probe = match from {
        Some(f) => (f + hi) / 2.0,
        None => first.clamp(MIN_RATE, hi),
    };
    // One attempt: a trial, and its repeat when it loses beyond the goal.
    let mut attempt = |rate: f64, phase: &str, trials: &mut Vec<Trial>| -> Result<Option<f64>> {
        for _ in 0..2 {
            let c = trial(rate.round() as u64)?;
            let short = c.offered_pps() < rate.round() * (1.0 - SHORT);
            let passed = !short && c.loss() <= goal.loss_allowed();
            trials.push(Trial { phase: phase.into(), asked_pps: rate.round() as u64, counted: c, passed, short });
            if passed {
                return Ok(Some(c.offered_pps()));
            }
        }
        Ok(None)
    };
    loop {
        if trials.len() - start >= p.max_trials as usize {
            return Ok(lo.map(|l| l.1));
        }
        let low = lo.map_or(0.0, |l| l.0);
        if hi < MIN_RATE {
            return Ok(None);
        }
        if hi - low <= p.resolution * hi {
            // Converged: the final trials confirm the lower bound, or it becomes the upper.
            let Some((rate, _)) = lo else { return Ok(None) };
            let mut stood = Some(lo.map_or(0.0, |l| l.1));
            for _ in 0..p.final_trials {
                match attempt(rate, &format!("{}-final", goal.name()), trials)? {
                    Some(offered) => stood = stood.map(|s: f64| s.min(offered)),
                    None => {
                        stood = None;
                        break;
                    }
                }
            }
            if stood.is_some() {
                return Ok(stood);
            }
            // Below the rate that did not stand, down to what is known to pass (the PDR's
            // search: the NDR), if anything.
            hi = rate;
            lo = from.map(|f| (f, f));
            if lo.is_some_and(|l| hi - l.0 <= p.resolution * hi) {
                return Ok(from);
            }
            probe = (lo.map_or(0.0, |l| l.0) + hi) / 2.0;
            continue;
        }
        match attempt(probe, goal.name(), trials)? {
            Some(offered) => lo = Some((probe, offered)),
            None => hi = probe,
        }
        probe = (lo.map_or(0.0, |l| l.0) + hi) / 2.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Params = Params { trial_s: 1, resolution: 0.01, final_trials: 1, max_trials: 40 };

    /// A path that forwards everything up to `capacity` packets per second and drops what is
    /// beyond it, from a sender that offers at most `sender` (rate 0: flat out).
    fn path(capacity: f64, sender: f64) -> impl FnMut(u64) -> Result<Counted> {
        move |rate| {
            let offered = if rate == 0 { sender } else { (rate as f64).min(sender) };
            let delivered = offered.min(capacity);
            Ok(Counted { sent: offered as u64, delivered: delivered as u64, secs: 1.0 })
        }
    }

    #[test]
    fn the_ndr_is_the_capacity_to_within_the_resolution() {
        let o = search(&[Goal::Ndr, Goal::Pdr], &P, path(300_000.0, 800_000.0)).unwrap();
        let ndr = o.ndr_pps.unwrap();
        assert!((300_000.0 * (1.0 - 2.0 * P.resolution)..=300_000.0).contains(&ndr), "{ndr}");
        // The PDR allows 0.5 % lost: up to capacity / 0.995.
        let pdr = o.pdr_pps.unwrap();
        assert!(pdr >= ndr && pdr <= 300_000.0 / (1.0 - PDR_LOSS) + 1.0, "{pdr}");
        // A PDR whose final trial fails goes back no lower than the NDR, which meets its goal.
        let mut n = 0;
        let o = search(&[Goal::Ndr, Goal::Pdr], &P, |rate| {
            n += 1;
            let offered = if rate == 0 { 800_000.0 } else { rate as f64 };
            // From the PDR's first trial on, anything above the NDR found loses 1 %.
            let cap = if n > 12 { 300_000.0 * 1.001 } else { 300_000.0 };
            let delivered = if offered > cap { offered * 0.99 } else { offered };
            Ok(Counted { sent: offered as u64, delivered: delivered as u64, secs: 1.0 })
        })
        .unwrap();
        assert!(o.pdr_pps >= o.ndr_pps, "{:?} {:?}: {:?}", o.ndr_pps, o.pdr_pps, o.trials);
        assert!(!o.sender_limited);
        assert_eq!(o.trials[0].phase, "max");
        assert_eq!(o.max_offered_pps, 800_000.0);
        // Bisection is quick: fewer than 40 trials for both, repeats included.
        assert!(o.trials.len() < 40, "{}", o.trials.len());
        assert!(o.trials.iter().any(|t| t.phase == "ndr-final" && t.passed));
    }

    #[test]
    fn a_sender_slower_than_the_path_is_said_to_be_the_limit() {
        let o = search(&[Goal::Ndr], &P, path(1e9, 500_000.0)).unwrap();
        assert_eq!((o.ndr_pps, o.pdr_pps, o.sender_limited), (Some(500_000.0), None, true));
        // The flat-out trial lost nothing, yet the rate stands only after paced trials pass.
        assert!(o.trials[0].passed && o.trials[1..].iter().all(|t| t.asked_pps > 0), "{:?}", o.trials);
        assert!(o.trials.iter().any(|t| t.phase == "ndr-final" && t.passed), "{:?}", o.trials);
    }

    #[test]
    fn a_flat_out_trial_that_lost_nothing_is_no_pass_when_paced_trials_lose() {
        // A port that pushes back: flat out, the sender waits and nothing is lost; paced at a
        // rate, bursts overflow its ring above 250 kpps.
        let o = search(&[Goal::Ndr], &P, |rate| {
            let (sent, delivered) =
                if rate == 0 { (400_000.0, 400_000.0) } else { (rate as f64, (rate as f64).min(250_000.0)) };
            Ok(Counted { sent: sent as u64, delivered: delivered as u64, secs: 1.0 })
        })
        .unwrap();
        let ndr = o.ndr_pps.unwrap();
        assert!((250_000.0 * 0.98..=250_000.0).contains(&ndr) && !o.sender_limited, "{ndr}: {:?}", o.trials);
    }

    #[test]
    fn a_loss_that_does_not_come_again_is_forgiven_once_and_a_lasting_one_moves_the_bound() {
        // The first probe (at the 300 kpps delivered flat out) loses one frame once: noise,
        // which its repeat forgives.
        let mut n = 0;
        let mut inner = path(300_000.0, 800_000.0);
        let noisy = |rate| {
            n += 1;
            let mut c = inner(rate)?;
            if n == 2 {
                c.delivered -= 1;
            }
            Ok(c)
        };
        let o = search(&[Goal::Ndr], &P, noisy).unwrap();
        let t = &o.trials;
        assert_eq!(
            (t[1].asked_pps, t[1].passed, t[2].asked_pps, t[2].passed),
            (300_000, false, 300_000, true),
            "{t:?}"
        );
        let ndr = o.ndr_pps.unwrap();
        assert!((300_000.0 * 0.98..=300_000.0).contains(&ndr), "{ndr}");
        // A probe that loses twice moves the upper bound: the next probe is below it.
        let i = t.iter().position(|x| x.phase == "ndr" && x.asked_pps > 300_000).unwrap();
        assert!(!t[i].passed && !t[i + 1].passed && t[i + 1].asked_pps == t[i].asked_pps, "{t:?}");
        assert!(t[i + 2].asked_pps < t[i].asked_pps, "{t:?}");
    }

    #[test]
    fn a_final_trial_that_loses_sends_the_search_below_it() {
        // The path holds 300 kpps until the search has converged on it (12 trials here), then
        // 200 kpps (something else took the CPU): the final trial at 300 kpps loses twice.
        let mut trials_seen = 0;
        let o = search(&[Goal::Ndr], &P, |rate| {
            trials_seen += 1;
            let cap = if trials_seen > 12 { 200_000.0 } else { 300_000.0 };
            let offered = if rate == 0 { 800_000.0 } else { rate as f64 };
            Ok(Counted { sent: offered as u64, delivered: offered.min(cap) as u64, secs: 1.0 })
        })
        .unwrap();
        let ndr = o.ndr_pps.unwrap();
        assert!((200_000.0 * 0.97..=200_000.0).contains(&ndr), "{ndr}: {:?}", o.trials);
        let failed_final = o.trials.iter().filter(|t| t.phase == "ndr-final" && !t.passed).count();
        assert_eq!(failed_final, 2, "the final trial and its repeat: {:?}", o.trials);
    }

    #[test]
    fn a_trial_whose_sender_fell_short_of_its_rate_does_not_pass() {
        // The sender keeps up to 100 kpps paced (the path's own work takes its CPU above that);
        // nothing is ever lost.
        let o = search(&[Goal::Ndr], &P, |rate| {
            let sent = if rate == 0 { 300_000.0 } else { (rate as f64).min(100_000.0) };
            Ok(Counted { sent: sent as u64, delivered: sent as u64, secs: 1.0 })
        })
        .unwrap();
        let ndr = o.ndr_pps.unwrap();
        assert!((100_000.0 * 0.97..=100_000.0).contains(&ndr), "{ndr}: {:?}", o.trials);
        assert!(o.trials.iter().any(|t| t.short && !t.passed && t.counted.loss() == 0.0), "{:?}", o.trials);
    }

    #[test]
    fn a_path_that_always_loses_has_no_ndr_and_the_search_ends() {
        let o = search(&[Goal::Ndr, Goal::Pdr], &P, |rate| {
            let offered = if rate == 0 { 800_000.0 } else { rate as f64 };
            // 1 % lost at any rate: no NDR, no PDR.
            Ok(Counted { sent: offered as u64, delivered: (offered * 0.99) as u64, secs: 1.0 })
        })
        .unwrap();
        assert_eq!((o.ndr_pps, o.pdr_pps), (None, None));
        assert!(o.trials.len() <= 1 + 2 * P.max_trials as usize, "{}", o.trials.len());
    }

    #[test]
    fn loss_is_a_share_of_what_was_sent_and_never_negative() {
        let c = Counted { sent: 1000, delivered: 995, secs: 2.0 };
        assert!((c.loss() - 0.005).abs() < 1e-12 && c.offered_pps() == 500.0);
        assert_eq!(Counted { sent: 1000, delivered: 1003, secs: 1.0 }.loss(), 0.0);
        assert_eq!(Counted { sent: 0, delivered: 0, secs: 1.0 }.loss(), 1.0);
    }

    #[test]
    fn the_pdr_is_never_below_the_ndr_when_the_sender_offers_a_little_less_than_asked() {
        // A sender that falls short of the asked rate by up to 1.5 % (within SHORT, so its
        // trials count) at random: a PDR trial asked above the NDR may offer less than the NDR's
        // did. The NDR met the PDR's goal, so the PDR is still at least it.
        for seed in 1..=200u64 {
            let mut x = seed;
            let o = search(&[Goal::Ndr, Goal::Pdr], &P, |rate| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                let asked = if rate == 0 { 800_000.0 } else { rate as f64 };
                let offered = asked * (1.0 - 0.015 * u);
                let delivered = if offered > 300_000.0 { offered * 0.99 } else { offered };
                Ok(Counted { sent: offered as u64, delivered: delivered as u64, secs: 1.0 })
            })
            .unwrap();
            assert!(o.pdr_pps >= o.ndr_pps, "seed {seed}: {:?} {:?}: {:?}", o.ndr_pps, o.pdr_pps, o.trials);
        }
    }
}
