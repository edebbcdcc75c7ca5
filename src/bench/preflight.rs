//! Before a bench: its output folder, the presets, and what the machine must have (tools, root, live
//! frames for the generator).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use xfwd_dataplane::io::probe::frame_gen::{self};

use super::search;
use crate::rig::{self};

use super::args::*;

/// The default output folder: `xfwd-bench-<unix time>` in the current folder.
pub fn default_out() -> PathBuf {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    PathBuf::from(format!("xfwd-bench-{t}"))
}

/// Applies `--quick`.
pub fn preset(args: &mut BenchArgs) {
    if args.quick {
        args.runs = 2;
        args.time = 3;
        args.omit = 0;
    }
    // One frame size at a time; `bench::run` steps through a sweep.
    args.frame = args.frames.first().copied();
}

/// Checks what the harness needs before building anything (a refusal is a usage error).
pub fn preflight(args: &BenchArgs, out: &Path) -> Result<()> {
    preflight_inner(args, out).map_err(|e| crate::UsageError(format!("{e:#}")))?;
    if args.sender == Sender::Xdp {
        live_frames_allowed().map_err(crate::UsageError)?;
    }
    Ok(())
}

/// Whether the kernel runs the live frames of `--sender xdp` (one frame, out of `lo`), asked
/// before any rig is built; `Err` is the one line that says what was refused and what to use.
fn live_frames_allowed() -> std::result::Result<(), String> {
    match frame_gen::live_frames() {
        Ok(()) => Ok(()),
        Err(e @ frame_gen::GenError::LiveFramesRefused(_)) => Err(format!(
            "--sender xdp: {e}; use --sender trafgen-xdp (the box gets the same XDP frames: trafgen's, redirected into the client's port by an XDP program, veth's copy of each socket buffer paid in the client host) or --sender trafgen --box-gro (the box's veth then copies each frame into a page before its XDP program sees it, a cost no NIC has: the XDP paths' box µs includes it)"
        )),
        Err(e) => Err(format!("--sender xdp: could not ask the kernel whether it runs live frames: {e}")),
    }
}

pub(super) fn preflight_inner(args: &BenchArgs, _out: &Path) -> Result<()> {
    for a in &args.arms {
        Arm::parse(a)?;
    }
    if args.runs == 0 || args.time == 0 || args.flows == 0 || args.queues == 0 {
        bail!("--runs, --time, --flows and --queues must be at least 1");
    }
    let packet_rate = !args.frames.is_empty();
    if args.sender != Sender::Trafgen && !packet_rate {
        bail!("--sender {} sends the frames of a packet-rate test: give --frame (64)", args.sender.name());
    }
    if args.omit >= args.time && !packet_rate {
        bail!("--omit must be shorter than --time");
    }
    if !packet_rate && args.flows > rig::MAX_FLOWS {
        bail!("--flows {}: the fixed client ports 55000+k allow at most {} TCP flows", args.flows, rig::MAX_FLOWS);
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    if args.queues > ncpu {
        bail!("--queues {}: this machine has {ncpu} CPU(s); each queue's sender is pinned to its own", args.queues);
    }
    if args.mode.contains(&BenchMode::Bridge) && args.arms.iter().any(|a| a.contains("fib=kernel")) {
        bail!("fib=kernel is an option of the router arms (--mode router)");
    }
    if args.lookups {
        if !args.search.is_empty() || args.dsts > 0 || !args.frames.is_empty() {
            bail!(
                "--lookups sends no traffic: it takes --routes, --routes6 and --seed, not --frame, --dsts or --search"
            );
        }
        return Ok(());
    }
    let scale = args.scale();
    if let Some(why) = scale.refusal() {
        bail!("{why}");
    }
    if scale.any() {
        if args.mode.contains(&BenchMode::Bridge) {
            bail!("--routes, --routes6 and --dsts are the router's (--mode router)");
        }
        if scale.dsts > 0 && !packet_rate {
            bail!("--dsts {}: the destinations are a packet-rate test's (give --frame)", scale.dsts);
        }
        if scale.dsts > 0 && args.sender == Sender::Xdp {
            bail!("--dsts: --sender xdp sends to one destination; use --sender trafgen or trafgen-xdp");
        }
    }
    if !args.search.is_empty() {
        if !packet_rate {
            bail!("--search finds a packet rate: give --frame");
        }
        if !(args.resolution > 0.0 && args.resolution <= 50.0) {
            bail!("--resolution {}: a percentage above 0 and at most 50", args.resolution);
        }
        if args.trial == 0 || args.final_trials > 10 {
            bail!("--trial must be at least 1 s and --final-trials at most 10");
        }
    }
    if !args.latency.is_empty() {
        if !args.search.contains(&search::Goal::Ndr) {
            bail!("--latency runs at shares of the baseline's NDR: add --search ndr");
        }
        if let Some(p) = args.latency.iter().find(|p| !(**p > 0.0 && **p <= 100.0)) {
            bail!("--latency {p}: a percentage of the NDR, above 0 and at most 100");
        }
    }
    if args.sender == Sender::Xdp && args.frames.contains(&FrameSize::Imix) {
        bail!("--frame imix: --sender xdp sends one frame size; use --sender trafgen or trafgen-xdp");
    }
    if args.ip == IpVersion::V6 {
        if args.mode.contains(&BenchMode::Bridge) {
            bail!("--ip 6 runs the router (--mode router): the bridge rig carries IPv4 only");
        }
        if let Some(f) = args.frames.iter().map(|f| f.smallest(true)).find(|&f| f < MIN_FRAME6) {
            bail!("--frame {f}: an IPv6 UDP frame is at least {MIN_FRAME6} bytes with its FCS (a 64-byte frame has no room for IPv6); use --frame {MIN_FRAME6} or more");
        }
    }
    Ok(())
}
