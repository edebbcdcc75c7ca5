//! Watching a running [`Forwarder`] from its control thread: the ports' link, MAC and MTU as
//! they change at run time (followed into the tables), and what the counters say an operator
//! must hear of (frames on a queue without a socket, frames too long for a socket, a port that
//! stops taking redirected frames, the XDP path's failed writes). Each look returns what is to
//! be said as [`Notice`]s; the caller prints them, so that this stays free of where output goes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::forwarder::{frame_max, Forwarder};
use super::view::LiveView;
use crate::io::frames::xsk::MAX_MTU;
use crate::io::program::xdp::{XdpCounter, MAX_FRAME};
use crate::io::setup::drivers::{self, QueueIndex};
use crate::io::setup::port::{self, PortInfo};
use crate::io::setup::start::plan::Layout;
use crate::wire::MacAddr;

/// Something to say about the running forwarder, by how it is said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// On standard output: a change followed.
    Info(String),
    /// On standard error: a change of state the operator hears of (a link up again).
    Note(String),
    /// On standard error: something is wrong and xfwd goes on.
    Warning(String),
    /// On standard error: something failed.
    Error(String),
}

/// A router's static tables built again (with a port's new MAC or MTU), or why not.
pub type Rebuild<'a> = &'a dyn Fn(&Forwarder) -> Result<(), String>;

/// How often a repeated warning is said again while its count grows.
const SAY_AGAIN: Duration = Duration::from_secs(60);

/// What the control thread last saw of each port and last said of each warning.
#[derive(Debug)]
pub struct Supervisor {
    carrier: Vec<bool>,
    mac: Vec<MacAddr>,
    mtu: Vec<u32>,
    said_no_socket: Vec<bool>,
    said_too_long: Vec<(u64, Option<Instant>)>,
    said_takes_redirects: Vec<bool>,
    said_fast_errors: (u64, Option<Instant>),
}

impl Supervisor {
    /// Starts from the ports as `view` has them (each taking redirected frames).
    pub fn new(view: &LiveView) -> Supervisor {
        let n = view.ports.len();
        Supervisor {
            carrier: view.ports.iter().map(|p| p.carrier).collect(),
            mac: view.ports.iter().map(|p| p.mac).collect(),
            mtu: view.ports.iter().map(|p| p.mtu).collect(),
            said_no_socket: vec![false; n],
            said_too_long: vec![(0, None); n],
            said_takes_redirects: vec![true; n],
            said_fast_errors: (0, None),
        }
    }

    /// The counters' warnings (meant once a second): each said once, or again at most once
    /// a minute while its count grows.
    pub fn counters(&mut self, fwd: &Forwarder, view: &LiveView) -> Vec<Notice> {
        let mut out = Vec::new();
        self.unbound_queues(view, fwd.cores.len(), &fwd.layout, &mut out);
        self.too_long(view, &mut out);
        self.redirects(view, &mut out);
        self.fast_errors(view, &mut out);
        out
    }

    /// Looks at the ports (once a second, or when the kernel announces a link change): says
    /// when one loses or regains its link (the workers keep running and forward again as soon
    /// as frames flow) and follows a MAC or MTU changed at run time.
    /// `Err` names a port that disappeared: the forwarder cannot go on.
    pub fn ports(
        &mut self,
        fwd: &Forwarder,
        view: &LiveView,
        reload: Option<Rebuild<'_>>,
    ) -> Result<Vec<Notice>, String> {
        let mut out = Vec::new();
        for (p, info) in view.ports.iter().enumerate() {
            if !port::exists(&info.name) {
                return Err(info.name.clone());
            }
            let Ok(now) = PortInfo::read(&info.name) else { continue };
            let up = now.carrier && now.up;
            if up != self.carrier[p] {
                self.carrier[p] = up;
                out.push(if up {
                    Notice::Note(format!("{}: link up; forwarding again", info.name))
                } else {
                    Notice::Warning(format!(
                        "{}: link down; frames to it wait in its TX ring, then count as tx-ring-full, until it returns",
                        info.name
                    ))
                });
            }
            if (now.mac, now.mtu) != (self.mac[p], self.mtu[p]) {
                (self.mac[p], self.mtu[p]) = (now.mac, now.mtu);
                follow(fwd, view, p, &now, reload, &mut out);
            }
        }
        Ok(out)
    }

    /// Frames that arrived on a queue without a socket went to the kernel and the forwarder
    /// never saw them (a queue count mismatch, or a driver numbering queues from something
    /// other than 0): said once per port with the highest queue index seen, the driver, and
    /// the way out.
    fn unbound_queues(&mut self, view: &LiveView, workers: usize, layout: &Layout, out: &mut Vec<Notice>) {
        for (p, info) in view.ports.iter().enumerate() {
            let missed = view.xdp.port(p)[XdpCounter::PassNoSocket as usize];
            if missed == 0 || self.said_no_socket[p] {
                continue;
            }
            self.said_no_socket[p] = true;
            let name = &info.name;
            let index = view.xdp.missed_queue(p).map_or_else(|| "-".into(), |q| q.to_string());
            let driver = info.driver.as_deref().unwrap_or("an unknown driver");
            let per_cpu = matches!(layout, Layout::PerCpu { .. });
            let way_out = match info.driver.as_deref().and_then(drivers::lookup).map(|q| q.queue_index) {
                Some(QueueIndex::HardwareQueueId) if !per_cpu => format!(
                    "{driver} gives XDP hardware frame-queue ids, which no socket can match: run with --xdp-mode generic --sockets per-cpu (xfwd doctor {name})"
                ),
                _ if per_cpu => format!(
                    "per-CPU sockets take queue 0 only, and {driver} gives frames other queues here: run with --sockets per-queue (xfwd doctor {name})"
                ),
                _ => format!("check the port's queues (ethtool -l {name}) against --queues (xfwd doctor {name})"),
            };
            let sockets = if per_cpu {
                "sockets on queue 0 only".to_owned()
            } else {
                format!("sockets on 0..{}", workers.saturating_sub(1))
            };
            out.push(Notice::Warning(format!(
                "{name}: {missed} frame(s) arrived on a queue without an AF_XDP socket (highest queue index {index}, \
                 {sockets}, driver {driver}) and went to the kernel; {way_out} (see `xfwd show stats`, xdp pass-no-socket)"
            )));
        }
    }

    /// Frames the XDP program dropped as too long for an AF_XDP socket (a port's MTU raised
    /// above what xfwd carries at run time).
    fn too_long(&mut self, view: &LiveView, out: &mut Vec<Notice>) {
        for (p, info) in view.ports.iter().enumerate() {
            let n = view.xdp.port(p)[XdpCounter::DropTooLong as usize];
            let (count, at) = &mut self.said_too_long[p];
            if n <= *count || at.is_some_and(|t| t.elapsed() < SAY_AGAIN) {
                continue;
            }
            (*count, *at) = (n, Some(Instant::now()));
            let name = &info.name;
            out.push(Notice::Warning(format!(
                "{name}: {n} frame(s) in all were longer than the {MAX_FRAME} bytes an AF_XDP socket of xfwd takes and were dropped (xdp drop-too-long in `xfwd show stats`); set the MTU back with `ip link set dev {name} mtu {MAX_MTU}`"
            )));
        }
    }

    /// `--path xdp`: a port's driver that stops taking the frames the program redirects to it
    /// (a veth whose peer's NAPI went), so that the workers forward what is routed out of it,
    /// and takes them again.
    fn redirects(&mut self, view: &LiveView, out: &mut Vec<Notice>) {
        let Some(fast) = &view.fast else {
            return;
        };
        for (p, info) in view.ports.iter().enumerate() {
            let takes = fast.takes_redirects.get(p).is_none_or(|t| t.load(Ordering::Relaxed));
            if takes == self.said_takes_redirects[p] {
                continue;
            }
            self.said_takes_redirects[p] = takes;
            let name = &info.name;
            out.push(if takes {
                Notice::Note(format!("{name} takes redirected frames again: the XDP path forwards what is routed out of it"))
            } else {
                Notice::Warning(format!(
                    "{name} no longer takes frames an XDP program redirects to it (no ndo-xmit in its XDP features): the workers forward what is routed out of it until it does; a veth needs NAPI at its peer (`ethtool -K PEER gro on`, or an XDP program there)"
                ))
            });
        }
    }

    /// `--path xdp`: the thread that keeps the program's tables in step with the workers'
    /// failed to write them: the program keeps what it had, so it may forward by tables older
    /// than the workers'.
    fn fast_errors(&mut self, view: &LiveView, out: &mut Vec<Notice>) {
        let Some(fast) = &view.fast else {
            return;
        };
        let n = fast.errors.get();
        let (count, at) = &mut self.said_fast_errors;
        if n <= *count || at.is_some_and(|t| t.elapsed() < SAY_AGAIN) {
            return;
        }
        (*count, *at) = (n, Some(Instant::now()));
        let last = fast.last_error.lock().ok().and_then(|l| l.clone()).unwrap_or_default();
        out.push(Notice::Warning(format!(
            "the XDP path could not write the program's tables ({n} failed write(s) in all; last: {last}); the program keeps the entries it had and the next change tries again (`xfwd show stats`: xdp path)"
        )));
    }
}

/// Port `p`'s MAC or MTU changed at run time (`ip link set … address/mtu`, now `now`): a
/// router takes them into its tables (what it answers ARP and neighbour discovery with, the
/// source MAC of what it forwards, the MTU it sends ICMP errors for) through `reload` (its
/// static tables built again), and says so. An MTU above what a UMEM frame carries cannot be
/// followed: the frames longer than that never reach xfwd.
fn follow(
    fwd: &Forwarder,
    view: &LiveView,
    p: usize,
    now: &PortInfo,
    reload: Option<Rebuild<'_>>,
    out: &mut Vec<Notice>,
) {
    let name = &now.name;
    if now.mtu > MAX_MTU {
        out.push(Notice::Warning(format!(
            "{name}: MTU {} is above the {MAX_MTU} bytes an AF_XDP frame of xfwd carries: longer frames cannot enter xfwd's sockets and are dropped where they arrive, counted (xdp drop-too-long in `xfwd show stats`) but without an ICMP error; set it back with `ip link set dev {name} mtu {MAX_MTU}` (or lower)",
            now.mtu
        )));
    }
    if !fwd.port_changed(p, now.mac, now.mtu) {
        out.push(Notice::Info(if view.router.is_some() {
            format!("{name}: now MAC {}, MTU {}; the kernel-mirrored tables follow", now.mac, now.mtu)
        } else {
            format!(
                "{name}: now MTU {}: frames longer than {} bytes are not bridged to it (too-big-to-forward in `xfwd show stats`)",
                now.mtu,
                frame_max(now.mtu)
            )
        }));
        return;
    }
    let Some(reload) = reload else { return };
    match reload(fwd) {
        Ok(()) => {
            fwd.announce(p);
            out.push(Notice::Info(format!(
                "{name}: now MAC {}, MTU {}; the tables follow (ARP and neighbour discovery answer with the new MAC, announced)",
                now.mac, now.mtu
            )));
        }
        Err(e) => out.push(Notice::Error(format!(
            "{name}: MAC {} MTU {}: the tables could not be rebuilt: {e}",
            now.mac, now.mtu
        ))),
    }
}
