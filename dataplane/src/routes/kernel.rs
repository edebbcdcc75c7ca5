//! The kernel's routes as the workers' (`[fib] source = "kernel"`): a first synchronisation at
//! start, then a thread that follows rtnetlink and swaps new tables in.
//!
//! At start ([`first_sync`]) the notification socket subscribes, then links, addresses,
//! nexthop objects, routes of both families, neighbours and policy rules are dumped into a
//! [`Mirror`]; rules other than the defaults are refused; a dump the kernel marks interrupted
//! is read again. The workers start with tables built from it.
//!
//! The thread ([`KernelSync`]) then reads every notification waiting, applies them to the
//! mirror, and, if the routes changed, builds new tables aside and swaps them in whole: a
//! worker sees either the tables before a batch of changes or after it, never a half-applied
//! one. It also keeps the XDP program's map of the box's addresses in step, and hands
//! neighbour changes to the ARP thread (the only writer of the neighbour tables). A socket
//! overrun (`ENOBUFS`: notifications lost), an event after which the kernel may have changed
//! routes without a notification (an interface down, an IPv4 address removed), or an
//! interrupted dump starts a full resynchronisation: the mirror is emptied and dumped again,
//! then the tables swapped, so that nothing is ever half-applied either.
//!
//! Each batch's delay, from the moment its first message was read off the socket to the swap
//! that makes it visible to the workers, is recorded in [`SyncCounters`]: this is what
//! `xfwd show stats` reports as the time from a kernel change to the workers seeing it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, Sender};
use serde::{Deserialize, Serialize};

use super::rtnl::{rule_not_followed, rules_problem, Dump, KernelNeighbor, Message, Rtnl, RtnlError};
use crate::io::program::xdp::{LocalKind, LocalMaps};
use crate::io::setup::memory::advise_huge_pages;
use crate::l3::tables::RouterLimits;
use crate::l3::{PortSpec, RouterTables};
use crate::resolve::thread::Control as ArpControl;
use crate::routes::incremental::Incremental;
use crate::routes::mirror::{Applied, ListCursor, Listed, Mirror, TABLE_MAIN};
use crate::stats::Counter;
use crate::time::Nudge;

/// How many times a dump the kernel marks interrupted is read again before giving up.
const DUMP_TRIES: usize = 10;
/// Next hops past which the tables are built anew (the FIB names at most 32,767).
const NEXTHOPS_REBUILD: usize = 30_000;
/// Up to this many IPv4 routes, `show routes` follows every change; above, its list (a pass
/// over every route) is rebuilt at most once per [`DISPLAY_EVERY`], [`DISPLAY_SLICE`] routes
/// per turn of the thread, so that no change waits behind a whole pass.
const DISPLAY_ALWAYS: usize = 10_000;
const DISPLAY_EVERY: Duration = Duration::from_secs(1);
const DISPLAY_SLICE: usize = 20_000;
/// How long staged changes wait for the workers to let go of the spare tables before the live
/// ones are copied instead (a copy costs tens of milliseconds; a worker lets go within one
/// frame, or its 10 ms sleep).
const COPY_AFTER: Duration = Duration::from_millis(20);
/// Changed prefixes past which one batch is built whole rather than repainted prefix by
/// prefix (a nexthop group that a million routes use, replaced).
const WHOLE_AFTER: usize = 100_000;
/// How soon a failed resynchronisation is tried again.
const RESYNC_RETRY: Duration = Duration::from_millis(100);

/// What the kernel-mirror thread counts.
#[derive(Debug, Default)]
pub struct SyncCounters {
    /// Notifications read.
    pub messages: Counter,
    /// Batches that changed the routes (each one table swap).
    pub updates: Counter,
    /// Full resynchronisations (the first at start not counted).
    pub resyncs: Counter,
    /// Of those, after a socket overrun.
    pub overruns: Counter,
    /// Of those, after a notification of a kind followed that could not be decoded.
    pub undecoded: Counter,
    /// Dumps read again because the kernel marked them interrupted.
    pub dumps_interrupted: Counter,
    /// Dumps or table builds that failed (the previous tables stay; a resync follows).
    pub build_errors: Counter,
    /// Whole builds (start, resyncs, port changes, next hops outgrown).
    pub full_builds: Counter,
    /// Publications that copied the live tables because a reader still held the spare.
    pub copies: Counter,
    /// Routes in the mirror (all metrics, both families), at the last build.
    pub routes: Counter,
    /// Routes the mirror does not use (TOS, source-specific, unknown types or objects).
    pub ignored: Counter,
    /// Addresses the XDP program's map could not take.
    pub local_map_errors: Counter,
    /// Policy rules added while running that route by tables xfwd does not mirror (refused at
    /// start; afterwards the kernel path and xfwd differ for the packets they select).
    pub rules_not_followed: Counter,
    /// Delays from a batch's first message to its table swap.
    latency: crate::stats::Delays,
    /// The last full synchronisation's duration, µs (the first at start included).
    pub last_sync_us: Counter,
    /// The thread's loop (a full dump beats only when it is read whole).
    pub beat: crate::stats::Heartbeat,
}

/// [`SyncCounters`] at one instant, for `show stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncReport {
    /// Notifications read.
    pub messages: u64,
    /// Table swaps for changes.
    pub updates: u64,
    /// Full resynchronisations.
    pub resyncs: u64,
    /// Of which after an overrun.
    pub overruns: u64,
    /// Of which after a notification that could not be decoded.
    #[serde(default)]
    pub undecoded: u64,
    /// Interrupted dumps read again.
    pub dumps_interrupted: u64,
    /// Failed builds.
    pub build_errors: u64,
    /// Whole builds.
    #[serde(default)]
    pub full_builds: u64,
    /// Publications that copied the live tables.
    #[serde(default)]
    pub copies: u64,
    /// Routes mirrored.
    pub routes: u64,
    /// Routes not used.
    pub ignored: u64,
    /// Addresses the XDP map refused.
    pub local_map_errors: u64,
    /// Policy rules added while running that xfwd cannot follow.
    #[serde(default)]
    pub rules_not_followed: u64,
    /// Change-to-swap delay: median, 99th percentile and maximum, µs (`None`: no update yet).
    pub latency_us: Option<(u64, u64, u64)>,
    /// Delays by bucket: `(upper bound µs, count)`, empty buckets left out.
    pub latency_histogram: Vec<(u64, u64)>,
    /// The last full synchronisation, µs.
    pub last_sync_us: u64,
}

impl SyncCounters {
    fn record(&self, d: Duration) {
        self.latency.record(d);
    }

    /// The counters now.
    pub fn snapshot(&self) -> SyncReport {
        let delays = self.latency.snapshot();
        SyncReport {
            messages: self.messages.get(),
            updates: self.updates.get(),
            resyncs: self.resyncs.get(),
            overruns: self.overruns.get(),
            undecoded: self.undecoded.get(),
            dumps_interrupted: self.dumps_interrupted.get(),
            build_errors: self.build_errors.get(),
            full_builds: self.full_builds.get(),
            copies: self.copies.get(),
            routes: self.routes.get(),
            ignored: self.ignored.get(),
            local_map_errors: self.local_map_errors.get(),
            rules_not_followed: self.rules_not_followed.get(),
            latency_us: delays.quantiles,
            latency_histogram: delays.counted,
            last_sync_us: self.last_sync_us.get(),
        }
    }
}

/// Why the kernel's tables could not be mirrored at start.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Reading them failed.
    #[error("reading the kernel's routing tables: {0}")]
    Netlink(#[from] RtnlError),
    /// Policy routing that the mirror cannot follow.
    #[error("{0} routes some packets by another table than the one mirrored; xfwd mirrors the local table and one other ([fib] table); change the rules (ip rule ...) or use source = \"config\"")]
    Rules(String),
    /// Another table than main without a default route: the kernel falls back to main.
    #[error("table {0} has no IPv4 default route: for what it does not cover the kernel goes on to the main table, which xfwd does not mirror beside it; end it with one (e.g. ip route add unreachable default table {0}) or mirror main")]
    NoDefault(u32),
    /// The tables could not be built.
    #[error("building the tables from the kernel's routes: {0}")]
    Build(String),
}

/// What the first synchronisation gives.
#[derive(Debug)]
pub struct Synced {
    /// The mirror.
    pub mirror: Mirror,
    /// The subscribed socket.
    pub events: Rtnl,
    /// The socket for later dumps.
    pub dumps: Rtnl,
    /// The tables built from it, to be published and updated.
    pub tables: Incremental,
    /// The kernel's neighbour entries on the ports.
    pub neighbors: Vec<KernelNeighbor>,
    /// The box's addresses and broadcasts, for the XDP program.
    pub local: Vec<(IpAddr, LocalKind)>,
    /// What it counted.
    pub counters: Arc<SyncCounters>,
}

/// Dumps everything into `mirror` (emptied first); returns the neighbour entries and the
/// policy rules seen.
fn dump_all(
    dumps: &mut Rtnl,
    mirror: &mut Mirror,
    counters: &SyncCounters,
) -> Result<(Vec<KernelNeighbor>, Vec<super::rtnl::Rule>), RtnlError> {
    let mut tries = 0;
    loop {
        // Applied as read; an interrupted dump starts again from an empty mirror.
        mirror.clear();
        let (mut neighbors, mut rules) = (Vec::new(), Vec::new());
        let r = [
            Dump::Links,
            Dump::Addresses,
            Dump::Nexthops,
            Dump::Routes4,
            Dump::Routes6,
            Dump::Neighbors,
            Dump::Rules4,
            Dump::Rules6,
        ]
        .into_iter()
        .try_for_each(|d| {
            dumps.dump(d, |m| match m {
                Message::Event(e) => {
                    mirror.apply(e);
                }
                Message::Neighbor(n) => neighbors.push(n),
                Message::Rule(r) => rules.push(r),
            })
        });
        match r {
            Err(RtnlError::Interrupted) if tries < DUMP_TRIES => {
                tries += 1;
                counters.dumps_interrupted.inc();
            }
            Err(e) => return Err(e),
            Ok(()) => return Ok((neighbors, rules)),
        }
    }
}

/// Gives the heap the dump and the build left free back to the system (a full table's dump
/// passes hundreds of megabytes through it).
fn trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free heap memory; no pointer is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn locals(mirror: &Mirror) -> Vec<(IpAddr, LocalKind)> {
    mirror
        .local_addresses()
        .into_iter()
        .map(|(a, address)| (a, if address { LocalKind::Address } else { LocalKind::Broadcast }))
        .collect()
}

/// Builds the tables whole from the mirror.
fn build(mirror: &mut Mirror, limits: RouterLimits, counters: &SyncCounters) -> Result<Incremental, String> {
    mirror.take_dirty();
    counters.routes.set(mirror.len() as u64);
    counters.full_builds.inc();
    let icmp = (limits.icmp_rate, limits.icmp_burst);
    let r6 = mirror.routes6();
    let inc = Incremental::full(mirror.ports(), mirror.routes4_iter(), &r6, icmp, advise_huge_pages).map(|mut inc| {
        inc.set_rfc1812_martians(limits.rfc1812_martians);
        inc
    });
    counters.ignored.set(mirror.ignored() as u64);
    inc.map_err(|e| e.to_string())
}

/// The first synchronisation: subscribe, dump, check the rules, build (module documentation).
/// `ports` are `(ifindex, spec)` in port order; `buffer` the notification socket's receive
/// buffer in bytes.
pub fn first_sync(
    table: u32,
    buffer: usize,
    ports: Vec<(u32, PortSpec)>,
    limits: RouterLimits,
) -> Result<Synced, SyncError> {
    let started = Instant::now();
    let events = Rtnl::subscribe(buffer).map_err(RtnlError::from)?;
    let mut dumps = Rtnl::open().map_err(RtnlError::from)?;
    let mut mirror = Mirror::new(table, ports);
    let counters = Arc::new(SyncCounters::default());
    let (neighbors, rules) = dump_all(&mut dumps, &mut mirror, &counters)?;
    if let Some(p) = rules_problem(&rules, table) {
        return Err(SyncError::Rules(p));
    }
    if table != TABLE_MAIN
        && mirror.effective4(crate::l3::Prefix::truncate(std::net::Ipv4Addr::UNSPECIFIED, 0)).is_none()
    {
        return Err(SyncError::NoDefault(table));
    }
    let tables = build(&mut mirror, limits, &counters).map_err(SyncError::Build)?;
    let local = locals(&mirror);
    trim();
    counters.last_sync_us.set(started.elapsed().as_micros() as u64);
    Ok(Synced { mirror, events, dumps, tables, neighbors, local, counters })
}

/// Where the kernel-mirror thread sends the kernel's routes as `ip route` lists them, once
/// asked through [`KernelSync::listings`] (kernel mode's `show routes`).
pub type ListingAsk = Sender<Arc<Vec<Listed>>>;

/// Asks the kernel-mirror thread behind `listings` for the kernel's routes as listed and waits
/// at most `wait` for them; `None` if it did not answer (stopped, or busy that long).
pub fn ask_listing(listings: &Sender<ListingAsk>, wait: Duration) -> Option<Arc<Vec<Listed>>> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    listings.send(tx).ok()?;
    rx.recv_timeout(wait).ok()
}

/// A listing being built a slice at a time, and who waits for it.
#[derive(Debug, Default)]
struct Listing {
    cursor: ListCursor,
    routes: Vec<Listed>,
    waiting: Vec<ListingAsk>,
}

/// The thread that follows the kernel (module documentation).
pub struct KernelSync {
    mirror: Mirror,
    table: u32,
    /// A resynchronisation failed (or a build): the next is due then, and nothing is
    /// published before it completes.
    resync_due: Option<Instant>,
    inc: Incremental,
    display_at: Instant,
    display_stale: bool,
    events: Rtnl,
    dumps: Rtnl,
    tables: Arc<ArcSwap<RouterTables>>,
    limits: Arc<Mutex<(RouterLimits, bool)>>,
    arp: Sender<ArpControl>,
    local_maps: LocalMaps,
    /// Nudged with each publication: the XDP path's thread follows at once.
    published: Arc<Nudge>,
    local_now: BTreeMap<IpAddr, LocalKind>,
    counters: Arc<SyncCounters>,
    asks: (Sender<ListingAsk>, Receiver<ListingAsk>),
    listing: Listing,
}

impl std::fmt::Debug for KernelSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSync").field("routes", &self.mirror.len()).finish_non_exhaustive()
    }
}

impl KernelSync {
    /// The thread's state after [`first_sync`]: it swaps tables into `tables`, sends
    /// neighbours to the ARP thread by `arp`, keeps `local_maps` as the mirror's addresses
    /// (which the XDP program was loaded with), and reads the limits from `limits` (whose flag
    /// asks for a rebuild after a reload changed them).
    pub fn new(
        synced: Synced,
        tables: Arc<ArcSwap<RouterTables>>,
        limits: Arc<Mutex<(RouterLimits, bool)>>,
        arp: Sender<ArpControl>,
        (local_maps, published): (LocalMaps, Arc<Nudge>),
    ) -> (KernelSync, Vec<KernelNeighbor>) {
        let Synced { mirror, events, dumps, neighbors, local, counters, tables: inc } = synced;
        let local_now = local.into_iter().collect();
        let sync = KernelSync {
            resync_due: None,
            table: mirror.table(),
            mirror,
            inc,
            display_at: Instant::now(),
            display_stale: false,
            events,
            dumps,
            tables,
            limits,
            arp,
            local_maps,
            published,
            local_now,
            counters,
            asks: crossbeam_channel::unbounded(),
            listing: Listing::default(),
        };
        (sync, neighbors)
    }

    /// Where to ask for the kernel's routes as listed: send a [`ListingAsk`]; the thread
    /// builds the listing between batches of changes, 20,000 routes at a time, so
    /// that no change waits behind a pass over a full table.
    pub fn listings(&self) -> Sender<ListingAsk> {
        self.asks.0.clone()
    }

    /// Takes the requests for a listing and builds a slice of it; sends it once whole.
    fn list_step(&mut self) {
        self.listing.waiting.extend(self.asks.1.try_iter());
        if self.listing.waiting.is_empty() {
            return;
        }
        let l = &mut self.listing;
        if self.mirror.list_step(&mut l.cursor, DISPLAY_SLICE, &mut l.routes) {
            let done = std::mem::take(&mut self.listing);
            let routes = Arc::new(done.routes);
            for w in done.waiting {
                let _ = w.send(Arc::clone(&routes));
            }
        }
    }

    /// Hands the kernel's neighbour entries to the ARP thread (those on the ports).
    pub fn send_neighbors(&self, list: Vec<KernelNeighbor>) {
        for n in list {
            let Some(port) = self.mirror.port_of(n.ifindex) else { continue };
            let _ = self.arp.send(ArpControl::KernelNeighbor { port, ip: n.ip, mac: n.mac, failed: n.failed });
        }
    }

    /// Runs until `stop`.
    pub fn run(mut self, stop: &AtomicBool) {
        let mut batch = Vec::new();
        // When the first message of the changes not yet published was read (and whether any
        // of them came from the kernel, rather than a refresh of the display list).
        let mut waiting: Option<(Instant, bool)> = None;
        while !stop.load(Ordering::Relaxed) {
            self.counters.beat.beat();
            let building = (self.display_stale && self.display_at.elapsed() >= DISPLAY_EVERY)
                || !self.listing.waiting.is_empty()
                || !self.asks.1.is_empty();
            let timeout = if waiting.is_some() || building {
                1
            } else if self.resync_due.is_some() {
                10
            } else {
                100
            };
            let mut pfd = libc::pollfd { fd: self.events.fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd over our open socket.
            let _ = unsafe { libc::poll(&mut pfd, 1, timeout) };
            let now = Instant::now();
            batch.clear();
            let mut resync = false;
            match self.events.recv(&mut batch) {
                Ok(n) => self.counters.messages.add(n as u64),
                Err(RtnlError::Overrun) => {
                    self.counters.overruns.inc();
                    resync = true;
                }
                Err(RtnlError::Undecoded) => {
                    self.counters.undecoded.inc();
                    resync = true;
                }
                Err(_) => resync = true,
            }
            let mut changed = false;
            let mut neighbors = Vec::new();
            for m in batch.drain(..) {
                match m {
                    Message::Event(e) => match self.mirror.apply(e) {
                        Applied::Unchanged => {}
                        Applied::Changed => changed = true,
                        Applied::Resync => resync = true,
                    },
                    Message::Neighbor(n) => neighbors.push(n),
                    Message::Rule(r) => {
                        // Refused at start; added later, it can only be counted and shown.
                        if rule_not_followed(&r, self.table) {
                            self.counters.rules_not_followed.inc();
                        }
                    }
                }
            }
            self.send_neighbors(neighbors);
            let limits = {
                let mut l = self.limits.lock().unwrap_or_else(|p| p.into_inner());
                changed |= std::mem::take(&mut l.1);
                l.0
            };
            // The mirror is always a whole dump (a resync replaces it only once its dump
            // completes): a listing is answered even while a resynchronisation is due.
            self.list_step();
            if resync || self.resync_due.is_some_and(|due| now >= due) {
                if self.resync(limits) {
                    self.counters.record(waiting.map_or(now, |w| w.0).elapsed());
                    waiting = None;
                }
                continue;
            }
            if self.resync_due.is_some() {
                // The mirror is incomplete until the resynchronisation succeeds.
                continue;
            }
            if changed {
                if self.stage(limits) {
                    // Built whole and published.
                    self.counters.record(waiting.map_or(now, |w| w.0).elapsed());
                    waiting = None;
                    continue;
                }
                waiting = Some((waiting.map_or(now, |w| w.0), true));
            }
            // A large table's display list is rebuilt a slice per turn, at most once per
            // DISPLAY_EVERY, and published with the next tables (or alone when nothing waits).
            if self.display_stale && self.display_at.elapsed() >= DISPLAY_EVERY && self.inc.display_step(DISPLAY_SLICE)
            {
                self.display_stale = false;
                self.display_at = Instant::now();
                waiting = Some(waiting.unwrap_or((now, false)));
            }
            if let Some(w) = waiting {
                if self.publish(w, limits) {
                    waiting = None;
                }
            }
        }
    }

    /// Publishes what waits since `since` (changes from the kernel, `from_kernel`, or a new
    /// display list) unless the workers still hold the spare tables and may yet let go of
    /// them: whether it did.
    fn publish(&mut self, (since, from_kernel): (Instant, bool), limits: RouterLimits) -> bool {
        // Wait for the workers to let go of the spare (each does from its next frame, or as
        // it goes to sleep); copy the live tables only when one holds it long.
        let may_copy = since.elapsed() >= COPY_AFTER;
        if from_kernel {
            self.inc.changes_read(since);
        }
        match self.inc.publish(may_copy) {
            Ok(Some(t)) => {
                self.tables.store(t);
                self.published.nudge();
                self.counters.copies.set(self.inc.copies);
            }
            Ok(None) => return false,
            Err(_) => {
                // A FIB that cannot hold the change (indices or groups outgrown).
                self.counters.build_errors.inc();
                self.whole(limits);
            }
        }
        if from_kernel {
            self.counters.record(since.elapsed());
        }
        true
    }

    /// Builds everything anew from the mirror and publishes it.
    fn whole(&mut self, limits: RouterLimits) {
        match build(&mut self.mirror, limits, &self.counters) {
            Ok(inc) => {
                self.inc = inc;
                self.tables.store(self.inc.live());
                self.published.nudge();
                self.display_stale = false;
                self.display_at = Instant::now();
            }
            Err(_) => {
                // The tables could not be built (indices outgrown): keep the running ones,
                // try again from a fresh dump shortly.
                self.counters.build_errors.inc();
                self.resync_due = Some(Instant::now() + RESYNC_RETRY);
            }
        }
        self.sync_locals();
    }

    /// Stages what the mirror says changed, prefix by prefix where it can, for the next
    /// publication; true if it built and published everything anew instead.
    fn stage(&mut self, limits: RouterLimits) -> bool {
        let dirty = self.mirror.take_dirty();
        self.counters.updates.inc();
        self.counters.routes.set(self.mirror.len() as u64);
        if dirty.all || self.inc.nexthops() > NEXTHOPS_REBUILD || dirty.v4.len() > WHOLE_AFTER {
            self.whole(limits);
            return true;
        }
        let mut failed = false;
        for p in &dirty.v4 {
            failed |= self.inc.set4(*p, self.mirror.effective4(*p).as_ref()).is_err();
        }
        if dirty.v6 {
            let r6 = self.mirror.routes6();
            failed |= self.inc.set6(&r6, advise_huge_pages).is_err();
        }
        if failed {
            self.counters.build_errors.inc();
            self.whole(limits);
            return true;
        }
        self.inc.set_limits(limits.icmp_rate, limits.icmp_burst);
        self.inc.set_rfc1812_martians(limits.rfc1812_martians);
        if self.inc.routes4() <= DISPLAY_ALWAYS {
            self.inc.refresh_display();
            self.display_at = Instant::now();
            self.display_stale = false;
        } else {
            self.display_stale = true;
        }
        if dirty.local {
            self.sync_locals();
        }
        false
    }

    /// Dumps everything again into a fresh mirror and, if the dump completes, replaces the
    /// mirror with it and builds anew; if not, the running tables stay as they are and
    /// another resynchronisation is due shortly (nothing is published meanwhile). True when
    /// it completed.
    fn resync(&mut self, limits: RouterLimits) -> bool {
        let started = Instant::now();
        self.counters.resyncs.inc();
        // What waits on the socket is older than the dump that follows: drop it all (an
        // overrun while draining loses only what is dropped anyway).
        let mut stale = Vec::new();
        loop {
            match self.events.recv(&mut stale) {
                Ok(0) => break,
                Ok(_) | Err(RtnlError::Overrun | RtnlError::Undecoded) => stale.clear(),
                Err(_) => break,
            }
        }
        let mut fresh = self.mirror.emptied();
        let done = match dump_all(&mut self.dumps, &mut fresh, &self.counters) {
            Ok((neighbors, _)) => {
                self.mirror = fresh;
                let keep = neighbors.iter().filter(|n| n.mac.is_some()).map(|n| (n.ifindex, n.ip)).collect();
                self.send_neighbors(neighbors);
                self.prune_neighbors(keep);
                self.resync_due = None;
                self.whole(limits);
                trim();
                true
            }
            Err(_) => {
                self.counters.build_errors.inc();
                self.resync_due = Some(Instant::now() + RESYNC_RETRY);
                false
            }
        };
        self.counters.last_sync_us.set(started.elapsed().as_micros() as u64);
        done
    }

    /// Tells the ARP thread which kernel entries exist after a dump: entries whose removal
    /// was lost in an overrun go too.
    fn prune_neighbors(&self, keep: Vec<(u32, IpAddr)>) {
        let keep = keep.into_iter().filter_map(|(i, ip)| Some((self.mirror.port_of(i)?, ip))).collect();
        let _ = self.arp.send(ArpControl::KernelNeighborsPresent(keep));
    }

    /// Brings the XDP program's address map to the mirror's addresses.
    fn sync_locals(&mut self) {
        let want: BTreeMap<IpAddr, LocalKind> = locals(&self.mirror).into_iter().collect();
        for a in self.local_now.keys().filter(|a| !want.contains_key(a)) {
            self.local_maps.remove(*a);
        }
        for (a, k) in &want {
            if self.local_now.get(a) != Some(k) && self.local_maps.set(*a, *k).is_err() {
                self.counters.local_map_errors.inc();
            }
        }
        self.local_now = want;
    }
}
