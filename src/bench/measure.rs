//! One run measured: the traffic with the CPU sampled and the box's own clock, the rig's
//! counters before and after, what xfwd counted.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use xfwd_dataplane::io::probe::poll_time::{PollTime, PollTimer};
use xfwd_dataplane::io::program::xdp::XdpCounter;
use xfwd_dataplane::io::view::EGRESS_REFUSED;
use xfwd_dataplane::load::LoopTotals;

use super::cpu::{self, Sampler};
use super::report::{BoxCost, RunResult, XfwdRun};
use super::stats::jain;
use crate::rig::{Rig, XfwdProcess};

use super::args::*;
use super::traffic::*;

#[allow(clippy::too_many_arguments, reason = "one run's whole description")]
pub(super) fn measure(
    args: &BenchArgs,
    r: &Rig,
    p: &Endpoints,
    run: u32,
    xfwd: Option<&XfwdProcess>,
    control: &str,
    frame: Option<FrameSize>,
    poll: Option<&PollTimer>,
) -> Result<RunResult> {
    let idle = measure_idle(p)?;
    let sampler = Sampler::start(Duration::from_millis(500))?;
    let pings = start_pings(p.client, p.server_addr)?;
    // The workers' loop accounting and the XDP path's frames at the start, to give what the
    // run alone cost them and what it sent through each path.
    let start = match xfwd {
        Some(_) => {
            let rep = xfwd_report(control)?;
            (rep.queues.iter().map(|q| q.load).collect(), xdp_path_counts(&rep))
        }
        None => (Vec::new(), None),
    };
    let pid = xfwd.map(|x| x.proc.child.id());
    let box_before = BoxClock::read(poll, pid)?;
    let before = Counters::read(r, p)?;
    let started = Instant::now();
    let mut generated = None;
    let flows = match frame {
        None => tcp_flows(args, r, p)?,
        Some(FrameSize::Bytes(size)) if args.sender == Sender::Xdp => {
            generated = Some(generate_frames(args, r, p, size)?);
            Flows::default()
        }
        Some(size) => {
            generated = send_frames(args, r, p, size)?;
            Flows::default()
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let mut rates = Counters::read(r, p)?.since(&before, secs, frame.is_some());
    if let Some(sent) = generated {
        // The sender's own count: what it handed to the client's port (or, trafgen-xdp, to
        // the hop before it). veth's port counters are no count of it: with an XDP program at
        // the box's port, the client's `tx_dropped` also counts the peer's XDP transmit errors
        // (the XDP path's arm: 37,197 of them over a run whose 60,000 frames all arrived).
        rates.offered_pps = sent as f64 / secs;
        rates.loss = loss(rates.offered_pps, rates.delivered_pps);
    }
    let box_cost = BoxClock::read(poll, pid)?.since(&box_before);
    let (rtt_ms, pings_sent) = stop_pings(pings);
    if frame.is_some() {
        // The server's port counted the pings' requests too (those answered, to within the
        // few sent after the counters were read): they are not the test's frames.
        rates.delivered_pps = (rates.delivered_pps - rtt_ms.len() as f64 / secs).max(0.0);
        rates.loss = loss(rates.offered_pps, rates.delivered_pps);
    }
    let cpu = sampler.stop();
    let (queue_rx, xfwd_run) = match xfwd {
        Some(_) => xfwd_after(control, &start)?,
        None => (Vec::new(), None),
    };
    Ok(RunResult {
        run,
        gbps: flows.bps.iter().sum::<f64>() / 1e9,
        // What each server received in the measured time, not what each sender wrote: with
        // hundreds of flows the senders' socket buffers hold gigabytes that count as sent.
        fairness: jain(&flows.received),
        received_gbps: (!flows.received.is_empty())
            .then(|| flows.received.iter().sum::<f64>() * 8.0 / f64::from(args.time.max(1)) / 1e9),
        flows_bps: flows.bps,
        flows_rtt: flows.rtt,
        offered_pps: rates.offered_pps,
        delivered_pps: rates.delivered_pps,
        loss: rates.loss,
        packets: rates.packets,
        busy_cpu_s: rates.busy_cpu_s,
        us_per_packet: if rates.packets > 0 { rates.busy_cpu_s * 1e6 / rates.packets as f64 } else { 0.0 },
        box_cost,
        cpu_avg: cpu::averages(&cpu),
        cpu,
        queue_rx,
        rtt_ms,
        pings_sent,
        rtt_idle_ms: idle.rtt_ms,
        idle_busy_cores: idle.busy_cores,
        // On the rig the CPU is sampled here, in the same run: no other machine's samples to match.
        started_unix_ms: None,
        ended_unix_ms: None,
        xfwd: xfwd_run,
        table_load_s: None,
        ready_s: None,
        search: None,
    })
}

/// The box's own clocks at one instant: its ports' NAPI polls (the kernel's part, on every
/// path) and xfwd's threads (none in the kernel arm).
struct BoxClock {
    /// Both box ports' polls, summed (`None`: the timer is not running).
    pub(super) polls: Option<PollTime>,
    /// xfwd's threads' CPU time, ns.
    pub(super) process_ns: Option<u64>,
}

impl BoxClock {
    /// Reads them now.
    fn read(poll: Option<&PollTimer>, pid: Option<u32>) -> Result<BoxClock> {
        let polls = match poll {
            Some(t) => Some(t.read()?.iter().fold(PollTime::default(), |sum, p| sum.plus(p))),
            None => None,
        };
        Ok(BoxClock { polls, process_ns: pid.map(process_cpu_ns).transpose()? })
    }

    /// What the box spent from `before` to this reading.
    fn since(&self, before: &BoxClock) -> Option<BoxCost> {
        let polls = self.polls?.since(&before.polls?);
        Some(BoxCost {
            poll_ns: polls.ns,
            polls: polls.polls,
            polled_frames: polls.frames,
            process_ns: self.process_ns.zip(before.process_ns).map(|(a, b)| a.saturating_sub(b)),
        })
    }
}

/// The CPU time of every thread of process `pid` so far, ns (the first field of each thread's
/// /proc/PID/task/TID/schedstat; a thread that ended between two readings takes its time
/// with it, and xfwd's threads live as long as the run).
fn process_cpu_ns(pid: u32) -> Result<u64> {
    let dir = format!("/proc/{pid}/task");
    let mut sum = 0;
    for task in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let path = task?.path().join("schedstat");
        // A thread that ended since the listing has no file any more: its time is gone.
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let ns: u64 = text
            .split_whitespace()
            .next()
            .and_then(|w| w.parse().ok())
            .with_context(|| format!("{}: `{}`", path.display(), text.trim()))?;
        sum += ns;
    }
    Ok(sum)
}

/// The path before the traffic: how busy the machine is, and its RTT.
struct Idle {
    /// Busy cores over a second, from /proc/stat.
    pub(super) busy_cores: Option<f64>,
    /// RTTs of [`IDLE_PINGS`] pings, ms.
    pub(super) rtt_ms: Vec<f64>,
}

/// Measures the idle path: the machine's busy cores over a second, then half a second of the
/// same pings as under load (a ping that cannot run gives no sample, not an error).
fn measure_idle(p: &Endpoints) -> Result<Idle> {
    let (i0, t0) = (busy_jiffies()?, Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let busy_cores = Some((busy_jiffies()? - i0) as f64 / 100.0 / t0.elapsed().as_secs_f64());
    // The same pings as under load, for half a second.
    let idle = p
        .client
        .command("nice")
        .args([
            "-n",
            &PINGER_NICE.to_string(),
            "ping",
            "-c",
            &IDLE_PINGS.to_string(),
            "-i",
            &ping_interval(),
            "-W",
            "1",
            p.server_addr,
        ])
        .output();
    let rtt_ms = idle.map(|o| parse_ping_rtts(&String::from_utf8_lossy(&o.stdout))).unwrap_or_default();
    Ok(Idle { busy_cores, rtt_ms })
}

/// The machine's busy ticks and the rig's frame counters, at one instant.
struct Counters {
    /// [`busy_jiffies`].
    pub(super) busy: u64,
    /// Frames the hosts received (both ends of the path).
    pub(super) delivered: u64,
    /// Frames the client sent.
    pub(super) offered: u64,
    /// Frames the server received.
    pub(super) server_rx: u64,
}

/// What the counters say of a run.
struct Rates {
    /// Frames the hosts received.
    pub(super) packets: u64,
    /// CPU time the whole machine was busy, s.
    pub(super) busy_cpu_s: f64,
    /// Packet rate: frames sent by the client, and received by the server, per second (TCP:
    /// none offered, and the hosts' frames).
    pub(super) offered_pps: f64,
    pub(super) delivered_pps: f64,
    /// The share of the offered frames not delivered (0 when none were counted).
    pub(super) loss: f64,
}

impl Counters {
    /// Reads them now.
    fn read(r: &Rig, p: &Endpoints) -> Result<Counters> {
        let busy = busy_jiffies()?;
        let (delivered, offered) =
            (rx_packets(&r.h1, "eth0") + rx_packets(&r.h2, "eth0"), tx_offered(p.client, "eth0"));
        Ok(Counters { busy, delivered, offered, server_rx: rx_packets(p.server, "eth0") })
    }

    /// The rates from `before` to these counters, `secs` apart, of a packet-rate run (`udp`)
    /// or a TCP run.
    fn since(&self, before: &Counters, secs: f64, udp: bool) -> Rates {
        let packets = self.delivered.saturating_sub(before.delivered);
        let (offered_pps, delivered_pps) = if udp {
            (
                self.offered.saturating_sub(before.offered) as f64 / secs,
                self.server_rx.saturating_sub(before.server_rx) as f64 / secs,
            )
        } else {
            (0.0, packets as f64 / secs)
        };
        Rates {
            packets,
            busy_cpu_s: self.busy.saturating_sub(before.busy) as f64 / 100.0,
            offered_pps,
            delivered_pps,
            loss: loss(offered_pps, delivered_pps),
        }
    }
}

/// The share of the offered frames not delivered (0 when none were counted).
pub(super) fn loss(offered_pps: f64, delivered_pps: f64) -> f64 {
    if offered_pps > 0.0 {
        (1.0 - delivered_pps / offered_pps).max(0.0)
    } else {
        0.0
    }
}

/// What a running xfwd says after a run: the frames each queue of the first two ports
/// received, and its own counters with its workers' accounting and the XDP path's frames since
/// `start`.
fn xfwd_after(
    control: &str,
    (load0, xdp0): &(Vec<LoopTotals>, Option<XdpPathCounts>),
) -> Result<(Vec<Vec<u64>>, Option<XfwdRun>)> {
    let rep = xfwd_report(control)?;
    let queue_rx = rep.ports.iter().take(2).map(|p| p.per_queue.iter().map(|q| q.rx_frames).collect()).collect();
    let mut run = xfwd_run_of(&rep);
    run.workers = rep.queues.iter().zip(load0).map(|(q, l0)| q.load.since(l0)).collect();
    let xdp = xdp_path_counts(&rep);
    let base = xdp0.unwrap_or_default();
    run.in_program = xdp.map(|c| c.in_program.saturating_sub(base.in_program));
    run.egress_refused = xdp.map(|c| c.refused.saturating_sub(base.refused));
    Ok((queue_rx, Some(run)))
}

/// The XDP path's frames so far, over every port.
#[derive(Debug, Clone, Copy, Default)]
struct XdpPathCounts {
    /// Forwarded or flooded by the program itself.
    pub(super) in_program: u64,
    /// Of those, refused by the egress's driver (veth: its peer's ring full).
    pub(super) refused: u64,
}

/// The XDP path's frames so far (`None`: the AF_XDP path).
fn xdp_path_counts(rep: &xfwd_dataplane::io::Report) -> Option<XdpPathCounts> {
    rep.xdp_path.as_ref()?;
    let sum = |names: &[&str]| -> u64 {
        rep.ports.iter().flat_map(|p| p.xdp.iter().filter(|(n, _)| names.contains(&n.as_str()))).map(|(_, v)| v).sum()
    };
    Some(XdpPathCounts {
        in_program: sum(&[XdpCounter::Forwarded.name(), XdpCounter::Flooded.name()]),
        refused: sum(&[EGRESS_REFUSED]),
    })
}

/// Busy ticks of the whole machine (everything but idle and iowait).
fn busy_jiffies() -> Result<u64> {
    Ok(cpu::read()?.iter().map(|c| c.user + c.nice + c.system + c.irq + c.softirq + c.steal).sum())
}
