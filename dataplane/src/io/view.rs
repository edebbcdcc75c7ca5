//! What the stats printer and the control socket read while the workers run ([`LiveView`]), and
//! everything counted at one instant ([`Report`], serialised for `show stats --json` and the
//! bench harness).
//!
//! Frames are counted where they are handled: each worker writes its own
//! [`crate::stats::QueueCounters`], the XDP program its per-port map, the ARP thread its
//! [`ArpCounters`]; this module only reads and sums them.

use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};

use crate::io::program::xdp::{XdpCounter, XdpCounters};
use crate::io::setup::options::{AqmMode, XdpMode};
use crate::io::setup::port::PortInfo;
use crate::l2::{Fdb, FdbEntry};
use crate::l3::{NeighborTable, NeighborTable6, RouterTables};
use crate::resolve::arp::ArpCounters;
use crate::stats::{FrameSnapshot, PoolGauges, PortSnapshot, QueueCounters, QueueSnapshot};
use crate::time::Clock;

/// The router's live tables, for `show routes` and `show neighbors`.
#[derive(Debug)]
pub struct RouterView {
    /// The current tables.
    pub tables: Arc<ArcSwap<RouterTables>>,
    /// The neighbour table.
    pub neighbors: Arc<NeighborTable>,
    /// The IPv6 neighbour table.
    pub neighbors6: Arc<NeighborTable6>,
    /// What the ARP thread counts of ARP.
    pub arp: Arc<ArpCounters>,
    /// What it counts of neighbour discovery.
    pub ndp: Arc<ArpCounters>,
    /// Kernel mode: what the thread that mirrors the kernel's routes counts.
    pub kernel: Option<Arc<crate::routes::kernel::SyncCounters>>,
    /// Kernel mode: where to ask for the kernel's routes as `ip route` lists them.
    pub kernel_routes: Option<crossbeam_channel::Sender<crate::routes::kernel::ListingAsk>>,
}

/// The name, among a port's XDP counters (`--path xdp`), of the frames the program redirected
/// to it and counted forwarded that its driver then refused (veth: its peer's ring full; the
/// XDP path has no queue of its own), read from the driver.
pub const EGRESS_REFUSED: &str = "egress-refused";

/// What the stats printer and the control socket read while workers run.
#[derive(Debug)]
pub struct LiveView {
    /// The ports, in order.
    pub ports: Vec<PortInfo>,
    /// Each worker's counters, by queue.
    pub queues: Vec<Arc<QueueCounters>>,
    /// Where each UMEM's frames are: one per worker (per-queue layout) or per port (per-CPU).
    pub pools: Vec<Arc<PoolGauges>>,
    /// The shared FDB (bridge; an empty one in router mode).
    pub fdb: Arc<Fdb>,
    /// Router mode: tables, neighbours, ARP counters.
    pub router: Option<RouterView>,
    /// The clock the workers use.
    pub clock: Clock,
    /// The XDP program's counters.
    pub xdp: XdpCounters,
    /// The XDP mode each port got, in port order.
    pub xdp_modes: Vec<XdpMode>,
    /// Whether the sockets are bound in zero-copy mode (else copy mode).
    pub zero_copy: bool,
    /// The workers' SCHED_FIFO priority (`None`: normal threads).
    pub rt_priority: Option<u8>,
    /// The queue management the workers apply (`--aqm`).
    pub aqm: AqmMode,
    /// `--path xdp`: what the thread that writes the XDP path's maps counts.
    pub fast: Option<Arc<crate::io::program::fast::FastCounters>>,
}

/// One port's totals in a [`Report`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortReport {
    /// Interface name.
    pub name: String,
    /// Sum over queues.
    pub total: PortSnapshot,
    /// Per queue, by queue id.
    pub per_queue: Vec<PortSnapshot>,
    /// The XDP program's counters for this port: (name, count); in JSON an object.
    #[serde(with = "crate::stats::named")]
    pub xdp: Vec<(String, u64)>,
    /// The highest queue index a frame arrived on with no socket there (counted in
    /// `pass-no-socket`); `None` while every frame found its socket.
    #[serde(default)]
    pub missed_queue: Option<u32>,
    /// The port's driver, as `ethtool -i` names it.
    #[serde(default)]
    pub driver: Option<String>,
    /// The XDP mode the program was attached in: `native` or `generic`.
    #[serde(default)]
    pub xdp_mode: Option<String>,
}

/// Everything counted, at one instant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Per port.
    pub ports: Vec<PortReport>,
    /// Per worker (sleeps, core, what it did per port).
    pub queues: Vec<QueueSnapshot>,
    /// Frame accounting, per UMEM.
    #[serde(default)]
    pub pools: Vec<PoolSnapshot>,
    /// Live FDB entries.
    pub fdb_entries: usize,
    /// FDB capacity.
    pub fdb_capacity: usize,
    /// Frames the XDP program saw on interfaces that are not ports.
    pub xdp_foreign: u64,
    /// Router mode: the ARP thread's counters (name, value); in JSON an object.
    #[serde(default, with = "crate::stats::named")]
    pub arp: Vec<(String, u64)>,
    /// Router mode: neighbour table entries and capacity.
    #[serde(default)]
    pub neighbors: Option<(usize, usize)>,
    /// Router mode: the ARP thread's neighbour discovery counters (name, value); in JSON an
    /// object.
    #[serde(default, with = "crate::stats::named")]
    pub ndp: Vec<(String, u64)>,
    /// Router mode: IPv6 neighbour table entries and capacity.
    #[serde(default)]
    pub neighbors6: Option<(usize, usize)>,
    /// Router mode with the kernel's routes: what mirroring them counts.
    #[serde(default)]
    pub kernel: Option<crate::routes::kernel::SyncReport>,
    /// Router with `--path xdp`: what keeping the XDP path's maps counts.
    #[serde(default)]
    pub xdp_path: Option<crate::io::program::fast::FastReport>,
    /// Whether the AF_XDP sockets are bound in zero-copy mode (`None` in reports from before
    /// xfwd said).
    #[serde(default)]
    pub zero_copy: Option<bool>,
    /// The workers' SCHED_FIFO priority (`None`: normal threads, or a report from before xfwd
    /// said).
    #[serde(default)]
    pub rt_priority: Option<u8>,
    /// The queue management the workers apply, as `--aqm` names it (`None` in reports from
    /// before xfwd said).
    #[serde(default)]
    pub aqm: Option<String>,
    /// When the counters were last cleared (`xfwd clear stats`), RFC 3339 UTC: they count from
    /// then ([`Report::since`]). Absent: from start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared: Option<String>,
    /// Each long-running thread and how long ago its loop last went round.
    #[serde(default)]
    pub threads: Vec<ThreadBeat>,
}

/// A thread's heartbeat at one instant ([`crate::stats::Heartbeat`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadBeat {
    /// The thread's name (`xfwd-q0`, `xfwd-arp`, …).
    pub name: String,
    /// Milliseconds since its loop last went round (`None`: not yet).
    pub age_ms: Option<u64>,
}

impl Report {
    /// What was counted since `base`, an earlier report of the same forwarder, cleared at
    /// `at`: the ports' counters (the workers' and the XDP program's), the workers', the
    /// foreign frames and the ARP and neighbour discovery counters, each less its value in
    /// `base`. Gauges (tables, frames, FQ backlog) are as they are now; so are the kernel
    /// mirror's and the XDP path's own reports, which count from start.
    pub fn since(&self, base: &Report, at: &str) -> Report {
        let mut r = self.clone();
        for p in &mut r.ports {
            let Some(b) = base.ports.iter().find(|b| b.name == p.name) else {
                continue;
            };
            p.total = p.total.since(&b.total);
            for (q, bq) in p.per_queue.iter_mut().zip(&b.per_queue) {
                *q = q.since(bq);
            }
            p.xdp = crate::stats::named_since(&p.xdp, &b.xdp);
        }
        for q in &mut r.queues {
            if let Some(b) = base.queues.iter().find(|b| b.queue == q.queue) {
                *q = q.since(b);
            }
        }
        r.xdp_foreign = r.xdp_foreign.saturating_sub(base.xdp_foreign);
        r.arp = crate::stats::named_since(&r.arp, &base.arp);
        r.ndp = crate::stats::named_since(&r.ndp, &base.ndp);
        r.cleared = Some(at.to_owned());
        r
    }
}

/// Where one UMEM's frames are, at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSnapshot {
    /// The first and last worker (by queue number) sharing the UMEM.
    pub workers: (u32, u32),
    /// The ports whose sockets use it.
    pub ports: Vec<String>,
    /// Where its frames are.
    pub frames: FrameSnapshot,
}

impl LiveView {
    /// The ports as they are now: their facts at start, with a router's MAC and MTU as its
    /// current tables have them (a change at run time is followed).
    pub fn ports_now(&self) -> Vec<PortInfo> {
        let mut ports = self.ports.clone();
        if let Some(r) = &self.router {
            for (p, spec) in ports.iter_mut().zip(&r.tables.load().ports) {
                p.mac = spec.mac;
                p.mtu = spec.mtu;
            }
        }
        ports
    }

    /// Snapshot of every counter.
    pub fn report(&self) -> Report {
        let queues: Vec<QueueSnapshot> = self.queues.iter().map(|q| q.snapshot()).collect();
        let ports = self
            .ports
            .iter()
            .enumerate()
            .map(|(p, info)| {
                let per_queue: Vec<PortSnapshot> = queues.iter().map(|q| q.ports[p].clone()).collect();
                let mut total = PortSnapshot::default();
                for s in &per_queue {
                    total.accumulate(s);
                }
                let x = self.xdp.port(p);
                let mut xdp: Vec<(String, u64)> =
                    XdpCounter::ALL.iter().map(|c| (c.name().to_owned(), x[*c as usize])).collect();
                if let Some(fast) = &self.fast {
                    let refused = fast.refused.get(p).map_or(0, crate::stats::Counter::get);
                    xdp.push((EGRESS_REFUSED.to_owned(), refused));
                }
                PortReport {
                    name: info.name.clone(),
                    total,
                    per_queue,
                    xdp,
                    missed_queue: self.xdp.missed_queue(p),
                    driver: info.driver.clone(),
                    xdp_mode: self.xdp_modes.get(p).map(ToString::to_string),
                }
            })
            .collect();
        let now = self.clock.now();
        Report {
            ports,
            queues,
            pools: self
                .pools
                .iter()
                .map(|g| PoolSnapshot {
                    workers: (g.workers.first().copied().unwrap_or(0), g.workers.last().copied().unwrap_or(0)),
                    ports: g.port_names.clone(),
                    frames: g.snapshot(),
                })
                .collect(),
            fdb_entries: self.fdb.len(now),
            fdb_capacity: self.fdb.capacity(),
            xdp_foreign: self.xdp.foreign_frames(),
            arp: self.router.as_ref().map(|r| r.arp.snapshot()).unwrap_or_default(),
            neighbors: self.router.as_ref().map(|r| (r.neighbors.len(), r.neighbors.capacity())),
            ndp: self.router.as_ref().map(|r| r.ndp.snapshot()).unwrap_or_default(),
            neighbors6: self.router.as_ref().map(|r| (r.neighbors6.len(), r.neighbors6.capacity())),
            kernel: self.router.as_ref().and_then(|r| r.kernel.as_ref()).map(|k| k.snapshot()),
            xdp_path: self.fast.as_ref().map(|f| f.snapshot()),
            zero_copy: Some(self.zero_copy),
            rt_priority: self.rt_priority,
            aqm: Some(self.aqm.name().to_owned()),
            cleared: None,
            threads: self.heartbeats(),
        }
    }

    /// Each long-running thread (the workers, and those of the router's resolution, its kernel
    /// mirror and its XDP path where they run) and how long ago its loop last went round: a
    /// loop beats at least every quarter second while it runs, so an old beat is a stuck
    /// thread. (The control and metrics threads wait for clients and have no loop to beat.)
    pub fn heartbeats(&self) -> Vec<ThreadBeat> {
        let now = crate::stats::monotonic_ms();
        let beat = |name: String, h: &crate::stats::Heartbeat| ThreadBeat { name, age_ms: h.age_ms(now) };
        let mut v: Vec<ThreadBeat> = self.queues.iter().map(|q| beat(format!("xfwd-q{}", q.queue), &q.beat)).collect();
        if let Some(r) = &self.router {
            v.push(beat("xfwd-arp".into(), &r.arp.beat));
            if let Some(k) = &r.kernel {
                v.push(beat("xfwd-kernel".into(), &k.beat));
            }
        }
        if let Some(f) = &self.fast {
            v.push(beat("xfwd-xdp-path".into(), &f.beat));
        }
        v
    }

    /// The live FDB, with port names.
    pub fn fdb_entries(&self) -> Vec<(FdbEntry, String)> {
        self.fdb
            .entries(self.clock.now())
            .into_iter()
            .map(|e| {
                let name =
                    self.ports.get(e.port.index()).map_or_else(|| format!("port{}", e.port.0), |p| p.name.clone());
                (e, name)
            })
            .collect()
    }
}
