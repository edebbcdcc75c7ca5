//! The XDP path (router, `--path xdp`) kept in step with the workers' tables: a thread that
//! writes the IPv4 neighbours and routes the workers use into the program's maps
//! ([`super::xdp::FastMaps`]), as [`crate::l3::export`] takes them.
//!
//! - **Neighbours**: each one learnt, changed or forgotten is one write to the program's
//!   neighbour map. The thread looks for changes every [`PERIOD`]; until it has written a new
//!   neighbour, the frames that need it go to the workers (which forward them as always), and
//!   a forgotten one is used for at most that long, as a stale entry.
//! - **Routes**: a new table from the router's file (a reload) is written into a new trie and
//!   swapped in whole, so no frame sees half a reload; the kernel's route changes (`[fib]
//!   source = "kernel"`) go entry by entry, each route as it was or as it will be, in the
//!   kernel's own order of changes.
//! - **Ports**: every port's devmap entry and MAC are written at start and again with each new
//!   table (a MAC changed at run time comes with one). A port whose driver stops taking
//!   redirected frames (its XDP features lose `ndo-xmit`, as a veth does when its peer's NAPI
//!   goes; read every [`CHECK_EVERY`] steps, [`super::netdev`]) is marked not ready: the
//!   program hands the frames routed out of it to the workers, which forward them as always,
//!   until it takes them again.
//!
//! What the thread did is counted in [`FastCounters`], with the frames a veth port refused
//! from the program's redirects after the program counted them forwarded (its peer's ring
//! full: the XDP path has no queue of its own), read from the driver every [`CHECK_EVERY`]
//! steps: without this count such a loss would be silent.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::drivers;
use super::netdev::Netdev;
use super::port::PortInfo;
use super::xdp::{FastMaps, XdpError};
use crate::l3::export::{self, FastRoutes};
use crate::l3::{NeighborTable, RouterTables};
use crate::stats::Counter;
use crate::wire::MacAddr;
use crate::PortId;

/// How often the thread looks for changes.
pub const PERIOD: Duration = Duration::from_millis(10);

/// How many steps apart the ports' XDP features and the veth ports' refused redirects are
/// read (a second).
pub const CHECK_EVERY: u32 = 100;

/// What the thread did.
#[derive(Debug, Default)]
pub struct FastCounters {
    /// By port: frames the port's driver refused to send for the program since the start
    /// (veth only: `tx_queue_N_xdp_xmit_errors`; 0 elsewhere).
    pub refused: Vec<Counter>,
    /// By port: whether it takes frames the program redirects to it (else they go to the
    /// workers).
    pub takes_redirects: Vec<AtomicBool>,
    /// Route tables swapped in whole (the first at start counted).
    pub swaps: Counter,
    /// Routes written or removed one by one.
    pub route_writes: Counter,
    /// Neighbours written or removed.
    pub neighbor_writes: Counter,
    /// Map writes that failed (the maps keep what they had; the next change tries again).
    pub errors: Counter,
    /// Routes in the program's table.
    pub routes: Counter,
}

impl FastCounters {
    /// The counts at one instant, for `show stats` and `/metrics`.
    pub fn snapshot(&self) -> FastReport {
        FastReport {
            routes: self.routes.get(),
            swaps: self.swaps.get(),
            route_writes: self.route_writes.get(),
            neighbor_writes: self.neighbor_writes.get(),
            errors: self.errors.get(),
            no_redirects: self
                .takes_redirects
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.load(Ordering::Relaxed))
                .map(|(p, _)| p)
                .collect(),
        }
    }
}

/// [`FastCounters`] at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FastReport {
    /// Routes in the program's table.
    pub routes: u64,
    /// Route tables swapped in whole.
    pub swaps: u64,
    /// Routes written or removed one by one.
    pub route_writes: u64,
    /// Neighbours written or removed.
    pub neighbor_writes: u64,
    /// Map writes that failed.
    pub errors: u64,
    /// The ports (by index) that take no redirected frames now: the workers forward what is
    /// routed out of them.
    pub no_redirects: Vec<usize>,
}

/// The thread's state: what the maps hold now.
pub struct FastSync {
    maps: FastMaps,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    ifindexes: Vec<u32>,
    /// New tables are swapped in whole (routes from the file), else written entry by entry.
    whole: bool,
    /// The tables the maps were written from, and their routes as written.
    live: Arc<RouterTables>,
    routes: FastRoutes,
    /// The neighbour table's generation when last written, and the neighbours as written.
    generation: u64,
    written: HashMap<Ipv4Addr, (PortId, MacAddr)>,
    counters: Arc<FastCounters>,
    /// The veth ports: index, name, and their refused count at start.
    veths: Vec<(usize, String, u64)>,
    /// The kernel's netdev family, where it has one: the ports' XDP features.
    netdev: Option<Netdev>,
    steps: u32,
}

impl std::fmt::Debug for FastSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastSync").field("routes", &self.routes.len()).finish_non_exhaustive()
    }
}

impl FastSync {
    /// Writes the ports (`ports`, in order, each ready where `takes[port]`), the neighbours and
    /// the routes into `maps`, then turns the XDP path on. `netdev` reads the ports' features
    /// from then on (`None`: they are taken as they were at start).
    pub fn start(
        mut maps: FastMaps,
        tables: Arc<ArcSwap<RouterTables>>,
        neighbors: Arc<NeighborTable>,
        ports: &[PortInfo],
        takes: &[bool],
        netdev: Option<Netdev>,
        whole: bool,
    ) -> Result<FastSync, XdpError> {
        let ifindexes: Vec<u32> = ports.iter().map(|p| p.ifindex).collect();
        let veths = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.driver.as_deref() == Some("veth"))
            .map(|(i, p)| (i, p.name.clone(), drivers::veth_redirects_refused(&p.name).unwrap_or(0)))
            .collect();
        let counters = Arc::new(FastCounters {
            refused: ports.iter().map(|_| Counter::default()).collect(),
            takes_redirects: takes.iter().map(|&t| AtomicBool::new(t)).collect(),
            ..Default::default()
        });
        let live = tables.load_full();
        write_ports(&maps, &live, &ifindexes, &counters)?;
        let routes = export::fib4(&live);
        maps.load_routes(&routes)?;
        counters.swaps.inc();
        counters.routes.set(routes.len() as u64);
        let mut sync = FastSync {
            maps,
            tables,
            neighbors,
            ifindexes,
            whole,
            live,
            routes,
            generation: u64::MAX,
            written: HashMap::new(),
            counters,
            veths,
            netdev,
            steps: 0,
        };
        sync.neighbors_step()?;
        sync.maps.set_path(true)?;
        Ok(sync)
    }

    /// What the thread counts.
    pub fn counters(&self) -> Arc<FastCounters> {
        Arc::clone(&self.counters)
    }

    /// Writes what changed since the last step: the neighbours, then the tables.
    pub fn step(&mut self) {
        if self.neighbors_step().is_err() {
            self.counters.errors.inc();
        }
        if self.tables_step().is_err() {
            self.counters.errors.inc();
        }
        self.steps = self.steps.wrapping_add(1);
        if self.steps % CHECK_EVERY == 0 {
            self.read_refused();
            if self.features_step().is_err() {
                self.counters.errors.inc();
            }
        }
    }

    /// Marks each port ready or not as its driver now takes redirected frames or not.
    fn features_step(&mut self) -> Result<(), XdpError> {
        let Some(netdev) = self.netdev.as_mut() else {
            return Ok(());
        };
        let mut changed = false;
        for (port, &ifindex) in self.ifindexes.iter().enumerate() {
            let Ok(features) = netdev.dev(ifindex) else {
                continue;
            };
            if let Some(t) = self.counters.takes_redirects.get(port) {
                changed |= t.swap(features.takes_redirects(), Ordering::Relaxed) != features.takes_redirects();
            }
        }
        if changed {
            write_ports(&self.maps, &self.live, &self.ifindexes, &self.counters)?;
        }
        Ok(())
    }

    fn read_refused(&self) {
        for (port, name, base) in &self.veths {
            if let (Some(n), Some(c)) = (drivers::veth_redirects_refused(name), self.counters.refused.get(*port)) {
                c.set(n.saturating_sub(*base));
            }
        }
    }

    fn neighbors_step(&mut self) -> Result<(), XdpError> {
        let generation = self.neighbors.generation();
        if generation == self.generation {
            return Ok(());
        }
        let now: HashMap<Ipv4Addr, (PortId, MacAddr)> =
            export::neighbors4(&self.neighbors).into_iter().map(|(a, port, mac)| (a, (port, mac))).collect();
        for (a, &(port, mac)) in &now {
            if self.written.get(a) != Some(&(port, mac)) {
                self.maps.set_neighbor(*a, port, mac)?;
                self.written.insert(*a, (port, mac));
                self.counters.neighbor_writes.inc();
            }
        }
        let gone: Vec<Ipv4Addr> = self.written.keys().filter(|a| !now.contains_key(a)).copied().collect();
        for a in gone {
            self.maps.remove_neighbor(a);
            self.written.remove(&a);
            self.counters.neighbor_writes.inc();
        }
        self.generation = generation;
        Ok(())
    }

    fn tables_step(&mut self) -> Result<(), XdpError> {
        let t = self.tables.load_full();
        if Arc::ptr_eq(&t, &self.live) {
            return Ok(());
        }
        write_ports(&self.maps, &t, &self.ifindexes, &self.counters)?;
        let routes = export::fib4(&t);
        if self.whole {
            self.maps.load_routes(&routes)?;
            self.counters.swaps.inc();
        } else {
            let writes = self.maps.update_routes(&self.routes, &routes)?;
            self.counters.route_writes.add(writes as u64);
        }
        self.counters.routes.set(routes.len() as u64);
        self.live = t;
        self.routes = routes;
        Ok(())
    }

    /// Runs [`FastSync::step`] every [`PERIOD`] until `stop`.
    pub fn spawn(mut self, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name("xfwd-xdp-path".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                self.step();
                std::thread::sleep(PERIOD);
            }
            self.read_refused();
        })
    }
}

/// Every port of `t` as an egress: its devmap entry (`ifindexes`, in port order) and MAC,
/// ready where it takes redirected frames.
fn write_ports(maps: &FastMaps, t: &RouterTables, ifindexes: &[u32], c: &FastCounters) -> Result<(), XdpError> {
    for (i, (spec, &ifindex)) in t.ports.iter().zip(ifindexes).enumerate() {
        let ready = c.takes_redirects.get(i).is_none_or(|t| t.load(Ordering::Relaxed));
        maps.set_port(PortId(i as u8), ifindex, spec.mac, ready)?;
    }
    Ok(())
}
