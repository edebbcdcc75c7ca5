//! The XDP path (`--path xdp`) kept in step with the workers' tables: a thread that writes the
//! router's neighbours and routes, IPv4 and IPv6 ([`crate::l3::export`]), or the bridge's
//! stations, into the program's maps ([`super::xdp::FastMaps`]).
//!
//! - **Stations** (bridge): every [`STATIONS_EVERY`] steps the thread writes the stations the
//!   workers learnt, moved or aged out since the last walk. The program forwards only between
//!   stations it knows on their port; a new or moved source goes to the workers, which learn
//!   it, so learning has one implementation and one bound. Every [`CHECK_EVERY`] steps the
//!   thread reads back which stations the program forwarded from and refreshes them in the
//!   workers' table ([`crate::l2::Fdb::refresh`], which never moves one): a station seen only
//!   by the program ages like any other, by the same rule and time.
//! - **Neighbours** (IPv4 and IPv6): each one learnt, changed or forgotten is one write to
//!   the program's neighbour map of its family. The thread looks for changes every [`PERIOD`]; until it has written a new
//!   neighbour, the frames that need it go to the workers (which forward them as always), and
//!   a forgotten one is used for at most that long, as a stale entry.
//! - **Routes**: IPv4: the program's table is the workers' FIB, copied whole into the set not
//!   live or, in kernel mode, repainted there under the prefixes the new tables say changed,
//!   then switched to ([`super::dir4`]); no frame sees half a change. In kernel mode
//!   the mirror thread nudges this one with each publication ([`Nudge`]), so a change reaches
//!   the program as soon as it reaches the workers, not at the next step. IPv6: a new
//!   table from the router's file (a reload) is built aside and swapped in whole, and the
//!   kernel's route changes go entry by entry into the trie, each route as it was or as it
//!   will be, in the kernel's own order of changes.
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
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::dir4::Followed;
use super::netdev::Netdev;
use super::xdp::MAX_STATIONS;
use super::xdp::{FastMaps, XdpError};
use crate::io::setup::drivers;
use crate::io::setup::port::PortInfo;
use crate::l2::Fdb;
use crate::l3::export::{self, FastRoutes};
use crate::l3::{Key6, NeighborTable, NeighborTable6, RouterTables};
use crate::stats::Counter;
use crate::time::{Clock, Nudge};
use crate::wire::MacAddr;
use crate::PortId;

/// How often the thread looks for changes.
pub const PERIOD: Duration = Duration::from_millis(10);

/// How many steps apart the bridge's stations are walked (a tenth of a second).
pub const STATIONS_EVERY: u32 = 10;

/// How many steps apart the ports' XDP features and the veth ports' refused redirects are
/// read (a second).
pub const CHECK_EVERY: u32 = 100;

/// What the thread did.
#[derive(Debug, Default)]
pub struct FastCounters {
    /// By port: frames the program redirected to the port that it did not send, since the
    /// start: refused by the kernel's redirect (the port down, taking no redirected frames, or
    /// shorter than the frame: [`crate::io::probe::refused`], where raw tracepoints may be attached) and
    /// by the port's driver (veth: `tx_queue_N_xdp_xmit_errors`, its peer's ring full).
    pub refused: Vec<Counter>,
    /// By port: whether it takes frames the program redirects to it (else they go to the
    /// workers).
    pub takes_redirects: Vec<AtomicBool>,
    /// The thread's loop, beaten every step.
    pub beat: crate::stats::Heartbeat,
    /// Route tables swapped in whole (the first at start counted).
    pub swaps: Counter,
    /// Routes written or removed one by one.
    pub route_writes: Counter,
    /// Neighbours (router) or stations (bridge) written or removed.
    pub neighbor_writes: Counter,
    /// Bridge: stations refreshed in the workers' table from the program's forwarding.
    pub refreshed: Counter,
    /// Map writes that failed (the maps keep what they had; the next change tries again).
    pub errors: Counter,
    /// What the last failed write met, for the warning and `show stats`.
    pub last_error: std::sync::Mutex<Option<String>>,
    /// Routes in the program's tables, IPv4 and IPv6.
    pub routes: Counter,
    /// Neighbours (router) or stations (bridge) the program's maps have no room for now: their
    /// frames go to the workers.
    pub left_out: Counter,
    /// Kernel mode: delays from a change's notification to the program's table holding it.
    pub delays: crate::stats::Delays,
}

impl FastCounters {
    /// Counts a failed write and keeps what it met.
    fn failed(&self, e: &XdpError) {
        self.errors.inc();
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e.to_string());
        }
    }

    /// The counts at one instant, for `show stats` and `/metrics`.
    pub fn snapshot(&self) -> FastReport {
        FastReport {
            routes: self.routes.get(),
            left_out: self.left_out.get(),
            swaps: self.swaps.get(),
            route_writes: self.route_writes.get(),
            neighbor_writes: self.neighbor_writes.get(),
            refreshed: self.refreshed.get(),
            errors: self.errors.get(),
            last_error: self.last_error.lock().ok().and_then(|l| l.clone()),
            delay_us: self.delays.snapshot().quantiles,
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
    /// Routes in the program's tables, IPv4 and IPv6.
    pub routes: u64,
    /// Neighbours (router) or stations (bridge) the program's maps have no room for now.
    #[serde(default)]
    pub left_out: u64,
    /// Route tables swapped in whole.
    pub swaps: u64,
    /// Routes written or removed one by one.
    pub route_writes: u64,
    /// Neighbours (router) or stations (bridge) written or removed.
    pub neighbor_writes: u64,
    /// Bridge: stations refreshed in the workers' table from the program's forwarding.
    #[serde(default)]
    pub refreshed: u64,
    /// Map writes that failed.
    pub errors: u64,
    /// What the last failed write met (`None`: none failed).
    #[serde(default)]
    pub last_error: Option<String>,
    /// Kernel mode: a change's delay from its notification to the program's table, median,
    /// 99th percentile and longest, µs (`None`: none yet).
    #[serde(default)]
    pub delay_us: Option<(u64, u64, u64)>,
    /// The ports (by index) that take no redirected frames now: the workers forward what is
    /// routed out of them.
    pub no_redirects: Vec<usize>,
}

/// The router's tables as the thread last wrote them.
struct RouterSync {
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    neighbors6: Arc<NeighborTable6>,
    /// New IPv6 tables are swapped in whole (routes from the file), else written entry by
    /// entry.
    whole: bool,
    /// Nudged when new tables are published.
    published: Arc<Nudge>,
    /// The id of the tables the maps were written from (not the tables themselves: holding
    /// them would keep `routes::incremental` from reusing them), and their IPv6 routes as
    /// written.
    live: u64,
    routes6: FastRoutes<Ipv6Addr>,
    /// Each family's neighbours as written.
    mirror4: Mirror<(Ipv4Addr, PortId), MacAddr>,
    mirror6: Mirror<(Key6, PortId), MacAddr>,
}

/// The bridge's stations as the thread last wrote them.
struct BridgeSync {
    fdb: Arc<Fdb>,
    clock: Clock,
    policies: crate::l2::Policies,
    written: HashMap<MacAddr, PortId>,
}

/// What the thread mirrors.
enum Tables {
    Router(Box<RouterSync>),
    Bridge(BridgeSync),
}

/// Where the thread takes its tables from.
pub enum Source {
    /// The router's tables and neighbours; `whole`: new tables are routes from the file,
    /// swapped in whole.
    Router {
        /// The live tables.
        tables: Arc<ArcSwap<RouterTables>>,
        /// The IPv4 neighbours.
        neighbors: Arc<NeighborTable>,
        /// The IPv6 neighbours.
        neighbors6: Arc<NeighborTable6>,
        /// Whether a new table is swapped in whole.
        whole: bool,
        /// Nudged when new tables are published (kernel mode): followed at once.
        published: Arc<Nudge>,
    },
    /// The bridge's FDB, on the workers' clock, and its ports' settings.
    Bridge {
        /// The workers' FDB.
        fdb: Arc<Fdb>,
        /// Their clock.
        clock: Clock,
        /// The ports' settings: isolation is the program's to apply to known unicast; floods
        /// are left to the workers unless every flood goes everywhere.
        policies: crate::l2::Policies,
    },
}

/// The thread's state: what the maps hold now.
pub struct FastSync {
    maps: FastMaps,
    tables: Tables,
    ifindexes: Vec<u32>,
    /// Each port's MAC (the bridge's; the router's come with its tables).
    macs: Vec<MacAddr>,
    /// The longest frame each port takes (follows its MTU at run time), and as last written.
    frame_max: Arc<[AtomicU32]>,
    written_max: Vec<u32>,
    counters: Arc<FastCounters>,
    /// The veth ports: index, name, their refused count at start, and since then as last read
    /// (kept when a read fails, so that the count never goes back).
    veths: Vec<(usize, String, u64, u64)>,
    /// The redirects the kernel refused, where the counter could be attached.
    refusals: Option<crate::io::probe::refused::RefusedCounter>,
    /// The kernel's netdev family, where it has one: the ports' XDP features.
    netdev: Option<Netdev>,
    steps: u32,
}

impl std::fmt::Debug for FastSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastSync").field("ports", &self.ifindexes.len()).finish_non_exhaustive()
    }
}

impl FastSync {
    /// Writes the ports (`ports`, in order, each ready where `takes[port]`, taking frames up to
    /// `frame_max[port]` bytes) and the tables of `source` into `maps`, then turns the XDP path
    /// on. `netdev` reads the ports' features from then on (`None`: they are taken as they
    /// were at start).
    pub fn start(
        maps: FastMaps,
        source: Source,
        (ports, frame_max): (&[PortInfo], Arc<[AtomicU32]>),
        takes: &[bool],
        netdev: Option<Netdev>,
    ) -> Result<FastSync, XdpError> {
        let ifindexes: Vec<u32> = ports.iter().map(|p| p.ifindex).collect();
        let veths = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.driver.as_deref() == Some("veth"))
            .map(|(i, p)| (i, p.name.clone(), drivers::veth_redirects_refused(&p.name).unwrap_or(0), 0))
            .collect();
        let counters = Arc::new(FastCounters {
            refused: ports.iter().map(|_| Counter::default()).collect(),
            takes_redirects: takes.iter().map(|&t| AtomicBool::new(t)).collect(),
            ..Default::default()
        });
        let mut macs: Vec<MacAddr> = ports.iter().map(|p| p.mac).collect();
        let tables = match source {
            Source::Router { tables, neighbors, neighbors6, whole, published } => {
                let live = tables.load_full();
                macs = live.ports.iter().map(|p| p.mac).collect();
                Tables::Router(Box::new(RouterSync {
                    tables,
                    neighbors,
                    neighbors6,
                    whole,
                    published,
                    routes6: FastRoutes::new(),
                    live: 0,
                    mirror4: Mirror::default(),
                    mirror6: Mirror::default(),
                }))
            }
            Source::Bridge { fdb, clock, policies } => {
                Tables::Bridge(BridgeSync { fdb, clock, policies, written: HashMap::new() })
            }
        };
        let written_max = vec![0; ports.len()];
        // Counted where the kernel lets the tracepoint be attached; elsewhere the drivers'
        // own counts are all there is.
        let refusals =
            maps.egress_id().ok().and_then(|id| crate::io::probe::refused::RefusedCounter::start(id, ports.len()).ok());
        let mut sync = FastSync {
            maps,
            tables,
            ifindexes,
            macs,
            frame_max,
            written_max,
            counters,
            veths,
            refusals,
            netdev,
            steps: 0,
        };
        sync.write_ports()?;
        if let Tables::Router(r) = &mut sync.tables {
            let t = r.tables.load_full();
            let routes6 = export::fib6(&t);
            sync.maps.follow4(&t)?;
            sync.maps.load_routes(&routes6)?;
            sync.counters.swaps.inc();
            sync.counters.routes.set((t.v4.fib.routes() + routes6.len()) as u64);
            (r.live, r.routes6) = (t.id, routes6);
        }
        sync.neighbors_step()?;
        sync.stations_step()?;
        sync.maps.set_path(true)?;
        Ok(sync)
    }

    /// What the thread counts.
    pub fn counters(&self) -> Arc<FastCounters> {
        Arc::clone(&self.counters)
    }

    /// Writes what changed since the last step: the neighbours, then the tables (router); the
    /// stations every [`STATIONS_EVERY`] steps (bridge).
    pub fn step(&mut self) {
        self.counters.beat.beat();
        if let Err(e) = self.neighbors_step() {
            self.counters.failed(&e);
        }
        if let Err(e) = self.tables_step() {
            self.counters.failed(&e);
        }
        let mtu_changed = self.frame_max.iter().zip(&self.written_max).any(|(m, &w)| m.load(Ordering::Relaxed) != w);
        if mtu_changed {
            if let Err(e) = self.write_ports() {
                self.counters.failed(&e);
            }
        }
        self.steps = self.steps.wrapping_add(1);
        if self.steps % STATIONS_EVERY == 0 {
            if let Err(e) = self.stations_step() {
                self.counters.failed(&e);
            }
        }
        if self.steps % CHECK_EVERY == 0 {
            self.read_refused();
            self.refresh_stations();
            if let Err(e) = self.features_step() {
                self.counters.failed(&e);
            }
        }
    }

    /// Bridge: writes the stations the workers learnt or moved, removes those they forgot
    /// (aged out); beyond [`MAX_STATIONS`], new ones stay the workers'.
    fn stations_step(&mut self) -> Result<(), XdpError> {
        let Tables::Bridge(b) = &mut self.tables else {
            return Ok(());
        };
        let now = b.fdb.entries(b.clock.now()).into_iter().map(|e| (e.mac, e.port)).collect();
        let maps = &self.maps;
        let m = mirror(
            &mut b.written,
            now,
            MAX_STATIONS,
            |&mac, &port| maps.set_station(mac, port),
            |&mac| maps.remove_station(mac),
        );
        self.counters.neighbor_writes.add(m.writes);
        self.counters.left_out.set(m.left_out);
        m.done
    }

    /// Bridge: the stations the program forwarded from since the last check refreshed in the
    /// workers' table, where they still are.
    fn refresh_stations(&self) {
        let Tables::Bridge(b) = &self.tables else {
            return;
        };
        let now = b.clock.now();
        let recent = PERIOD * CHECK_EVERY * 2;
        for (mac, port, ago) in self.maps.stations() {
            if ago <= recent && b.fdb.refresh(mac, port, now) {
                self.counters.refreshed.inc();
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
            self.write_ports()?;
        }
        Ok(())
    }

    /// Every port as an egress: its devmap entry, MAC and longest frame, ready where it takes
    /// redirected frames, isolated as the bridge's settings say; the bridge floods in the
    /// program only while every port takes redirected frames and every flood goes to every
    /// port but its ingress (no port keeps a kind of flood out, at most one is isolated),
    /// frames that every port takes.
    fn write_ports(&mut self) -> Result<(), XdpError> {
        let takes = |i: usize| self.counters.takes_redirects.get(i).is_none_or(|t| t.load(Ordering::Relaxed));
        let isolated = |i: usize| match &self.tables {
            Tables::Bridge(b) => b.policies.is_isolated(PortId(i as u8)),
            Tables::Router(_) => false,
        };
        let max: Vec<u32> = self.frame_max.iter().map(|m| m.load(Ordering::Relaxed)).collect();
        for (i, (&mac, &ifindex)) in self.macs.iter().zip(&self.ifindexes).enumerate() {
            let flags = (takes(i), isolated(i));
            self.maps.set_port(PortId(i as u8), ifindex, mac, flags, max.get(i).copied().unwrap_or(0))?;
        }
        if let Tables::Bridge(b) = &self.tables {
            let all = (0..self.ifindexes.len()).all(takes) && b.policies.floods_everywhere();
            self.maps.set_flood(if all { max.iter().copied().min().unwrap_or(0) } else { 0 })?;
        }
        self.written_max = max;
        Ok(())
    }

    fn read_refused(&mut self) {
        let kernel = self.refusals.as_ref().map(|r| r.read()).unwrap_or_default();
        for (_, name, base, since) in &mut self.veths {
            if let Some(n) = drivers::veth_redirects_refused(name) {
                *since = n.saturating_sub(*base);
            }
        }
        for (port, c) in self.counters.refused.iter().enumerate() {
            let driver = self.veths.iter().find(|v| v.0 == port).map_or(0, |v| v.3);
            c.set(driver + kernel.get(port).copied().unwrap_or(0));
        }
    }

    /// Router: writes the neighbours of each family whose table changed since last written.
    fn neighbors_step(&mut self) -> Result<(), XdpError> {
        let Tables::Router(r) = &mut self.tables else {
            return Ok(());
        };
        let maps = &self.maps;
        // The program's maps hold `limits.neighbors` each, as the workers' tables do (sized at
        // start, as theirs are); should a map still refuse one, it stays the workers'
        // (counted), and a change to one the maps hold is written before any new one.
        let (room4, room6) = maps.neighbor_room();
        let m4 = r.mirror4.follow(
            r.neighbors.generation(),
            || export::neighbors4(&r.neighbors).into_iter().map(|(a, port, mac)| ((a, port), mac)).collect(),
            room4,
            |&(a, port), &mac| maps.set_neighbor(a, port, mac),
            |&(a, port)| maps.remove_neighbor(a, port),
        );
        let m6 = r.mirror6.follow(
            r.neighbors6.generation(),
            || export::neighbors6(&r.neighbors6).into_iter().map(|(k, port, mac)| ((k, port), mac)).collect(),
            room6,
            |&(k, port), &mac| maps.set_neighbor6(k, port, mac),
            |&(k, port)| maps.remove_neighbor6(k, port),
        );
        self.counters.neighbor_writes.add(m4.writes + m6.writes);
        self.counters.left_out.set(r.mirror4.left_out + r.mirror6.left_out);
        m4.done?;
        m6.done?;
        Ok(())
    }

    /// Router: new tables written, IPv4 first ([`FastMaps::follow4`]: refused tables are
    /// not tried again, the error counted once), then IPv6; the ports with them.
    fn tables_step(&mut self) -> Result<(), XdpError> {
        let Tables::Router(r) = &mut self.tables else {
            return Ok(());
        };
        let t = r.tables.load_full();
        if t.id == r.live {
            return Ok(());
        }
        self.macs = t.ports.iter().map(|p| p.mac).collect();
        let read = t.changes4.as_ref().and_then(|c| c.read_since(r.live));
        match self.maps.follow4(&t)? {
            Followed::Same => {}
            Followed::Copied => self.counters.swaps.inc(),
            Followed::Painted(n) => self.counters.route_writes.add(n as u64),
        }
        if let Some(read) = read {
            self.counters.delays.record(read.elapsed());
        }
        let routes6 = export::fib6(&t);
        if r.whole {
            self.maps.load_routes(&routes6)?;
            self.counters.swaps.inc();
        } else {
            let writes6 = self.maps.update_routes(&r.routes6, &routes6)?;
            self.counters.route_writes.add(writes6 as u64);
        }
        self.counters.routes.set((t.v4.fib.routes() + routes6.len()) as u64);
        (r.live, r.routes6) = (t.id, routes6);
        // Let go of the tables before the wait below: the kernel-mirror thread writes them
        // next, as its spare, once no one holds them (else it copies the live ones).
        drop(t);
        self.write_ports()?;
        // The IPv4 set switched from is settled now, while no change waits (some 10 ms).
        self.maps.settle4()
    }

    /// Runs [`FastSync::step`] every [`PERIOD`] until `stop`; router: new tables as soon as
    /// they are published (nudged), between steps.
    pub fn spawn(mut self, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
        let published = match &self.tables {
            Tables::Router(r) => Some(Arc::clone(&r.published)),
            Tables::Bridge(_) => None,
        };
        std::thread::Builder::new().name("xfwd-xdp-path".into()).spawn(move || {
            let mut next = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let now = std::time::Instant::now();
                if now >= next {
                    self.step();
                    next = now + PERIOD;
                    continue;
                }
                let wait = next - now;
                match &published {
                    Some(p) if p.wait(wait) => {
                        if let Err(e) = self.tables_step() {
                            self.counters.failed(&e);
                        }
                    }
                    Some(_) => {}
                    None => std::thread::sleep(wait),
                }
            }
            self.read_refused();
        })
    }
}

/// A table mirrored into a map: what was written, and from which generation of its source.
#[derive(Debug)]
struct Mirror<K, V> {
    /// The source's generation when last written in full (`u64::MAX`: never).
    generation: u64,
    /// The entries as written.
    written: HashMap<K, V>,
    /// Entries the map had no room for when last written.
    left_out: u64,
}

impl<K, V> Default for Mirror<K, V> {
    fn default() -> Self {
        Self { generation: u64::MAX, written: HashMap::new(), left_out: 0 }
    }
}

impl<K: Eq + Hash + Copy, V: PartialEq + Copy> Mirror<K, V> {
    /// [`mirror`]s the source's entries (`now`, read only if `generation` moved) into the map;
    /// the generation is taken as written only if every write succeeded.
    fn follow(
        &mut self,
        generation: u64,
        now: impl FnOnce() -> HashMap<K, V>,
        limit: usize,
        set: impl Fn(&K, &V) -> Result<(), XdpError>,
        remove: impl Fn(&K),
    ) -> Mirrored {
        if generation == self.generation {
            return Mirrored { writes: 0, left_out: self.left_out, done: Ok(()) };
        }
        let m = mirror(&mut self.written, now(), limit, set, remove);
        self.left_out = m.left_out;
        if m.done.is_ok() {
            self.generation = generation;
        }
        m
    }
}

/// What [`mirror`] did.
#[derive(Debug)]
struct Mirrored {
    /// Writes and removals made.
    writes: u64,
    /// Entries of `now` the map has no room for (within `limit`), or that a failed write left
    /// out: the workers' alone.
    left_out: u64,
    /// The first failure, which stops the writes.
    done: Result<(), XdpError>,
}

/// Makes a map that holds `written` hold `now`: removes what is gone (first, to make room),
/// then writes what changed (a neighbour's new MAC after a failover must reach the program
/// even when the map is full), then what is new, up to `limit` entries in all; beyond, new
/// ones are left out and counted. `written` follows each write that succeeded.
fn mirror<K: Eq + Hash + Copy, V: PartialEq + Copy>(
    written: &mut HashMap<K, V>,
    now: HashMap<K, V>,
    limit: usize,
    set: impl Fn(&K, &V) -> Result<(), XdpError>,
    remove: impl Fn(&K),
) -> Mirrored {
    let mut writes = 0;
    written.retain(|k, _| {
        let keep = now.contains_key(k);
        if !keep {
            remove(k);
            writes += 1;
        }
        keep
    });
    let changed = now.iter().filter(|(k, v)| written.get(k).is_some_and(|w| w != *v));
    let changed: Vec<(K, V)> = changed.map(|(k, v)| (*k, *v)).collect();
    let fresh = now.iter().filter(|(k, _)| !written.contains_key(k)).map(|(k, v)| (*k, *v)).collect::<Vec<_>>();
    for (k, v) in changed.into_iter().chain(fresh) {
        let is_new = !written.contains_key(&k);
        if is_new && written.len() >= limit {
            continue;
        }
        if let Err(e) = set(&k, &v) {
            let left_out = now.keys().filter(|k| !written.contains_key(k)).count() as u64;
            return Mirrored { writes, left_out, done: Err(e) };
        }
        written.insert(k, v);
        writes += 1;
    }
    let left_out = now.len().saturating_sub(written.len()) as u64;
    Mirrored { writes, left_out, done: Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_removes_what_went_writes_what_changed_and_keeps_to_its_limit() {
        let set_log = std::cell::RefCell::new(Vec::new());
        let removed = std::cell::RefCell::new(Vec::new());
        let mut written: HashMap<u8, u8> = [(1, 10), (2, 20), (3, 30)].into();
        let now: HashMap<u8, u8> = [(2, 20), (3, 31), (4, 40), (5, 50)].into();
        let m = mirror(
            &mut written,
            now,
            3,
            |&k, &v| {
                set_log.borrow_mut().push((k, v));
                Ok(())
            },
            |&k| removed.borrow_mut().push(k),
        );
        assert!(m.done.is_ok());
        assert_eq!(removed.into_inner(), [1]);
        let set = set_log.into_inner();
        // 3 changed, written first; of 4 and 5, one is new within the limit of 3 entries,
        // and the other is left out, counted.
        assert_eq!(set.len(), 2, "{set:?}");
        assert_eq!(set[0], (3, 31), "the change before the new entry: {set:?}");
        assert_eq!((m.writes, m.left_out), (3, 1));
        assert_eq!(written.len(), 3);
        // A failing write stops there, and what it would have written stays unwritten.
        let mut written: HashMap<u8, u8> = HashMap::new();
        let m = mirror(&mut written, [(7, 70)].into(), usize::MAX, |_, _| Err(XdpError::Limit("full".into())), |_| {});
        assert!(m.done.is_err());
        assert_eq!((m.writes, m.left_out, written.len()), (0, 1, 0));
    }

    #[test]
    fn a_full_map_still_takes_a_neighbours_new_mac_before_any_newcomer() {
        // A map that refuses a fifth entry (E2BIG, as the kernel's does past max_entries) holds
        // four neighbours; after a failover one of them answers with a new MAC while new
        // neighbours keep arriving (990, in whatever order a HashMap gives).
        let mut now: HashMap<u32, u32> = (0..4).map(|k| (k, 100)).collect();
        now.insert(2, 222);
        now.extend((10..1000).map(|k| (k, 100)));
        for limit in [4, usize::MAX] {
            let mut written: HashMap<u32, u32> = (0..4).map(|k| (k, 100)).collect();
            let map = std::cell::RefCell::new(written.clone());
            let m = mirror(
                &mut written,
                now.clone(),
                limit,
                |&k, &v| {
                    let mut map = map.borrow_mut();
                    if !map.contains_key(&k) && map.len() >= 4 {
                        return Err(XdpError::Limit("E2BIG".into()));
                    }
                    map.insert(k, v);
                    Ok(())
                },
                |_| {},
            );
            // The change reaches the map first, whatever else happens.
            assert_eq!(map.borrow().get(&2), Some(&222), "limit {limit}");
            assert_eq!(written.get(&2), Some(&222));
            assert_eq!(m.left_out, 990, "limit {limit}: the newcomers are the workers', counted");
            // Within the map's room (as the XDP path's thread asks) nothing fails; past it,
            // the map's refusal is reported.
            assert_eq!(m.done.is_ok(), limit == 4, "limit {limit}");
        }
    }
}
