//! Neighbour resolution, shared by ARP (IPv4, [`super::arp`]) and neighbour discovery (IPv6,
//! [`super::ndp`]): a pure state machine driven by the ARP thread ([`crate::resolve::thread`]) that
//! resolves next hops, holds the packets waiting for them, keeps what it resolved fresh, and is
//! the only writer of its family's neighbour table. Each family brings its messages
//! ([`Family`]); the timers are the same, as Linux's are for both:
//!
//! - an unresolved next hop gets a request (ARP broadcast, neighbour solicitation to the
//!   solicited-node group), retried every second, three times; the packets that wait for it (at
//!   most `glean_queue` per neighbour, at most `max_pending` neighbours) leave when it resolves,
//!   or are answered with the family's unreachable error when it does not;
//! - an entry not confirmed for 30 s is probed by unicast requests; three unanswered probes
//!   remove it; static entries never expire;
//! - every request xfwd sends passes a token bucket (100 per second, burst 20), so a flood of
//!   packets to unresolvable addresses cannot turn into a request flood.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::action::{Action, SCRATCH_LEN};
use crate::l3::family::{RouterState, TokenBucket};
use crate::l3::neighbors::{NeighborAddr, NeighborTable};
use crate::l3::tables::RouterTables;
use crate::stats::Counter;
use crate::wire::{EthernetFrame, MacAddr};
use crate::PortId;

/// Time between requests for an unresolved neighbour.
pub const RETRANS_MS: u64 = 1000;
/// Requests before a neighbour is declared unreachable.
pub const MAX_TRIES: u32 = 3;
/// Time an entry is trusted without confirmation before it is probed.
pub const REACHABLE_MS: u64 = 30_000;
/// Unanswered probes before an entry is removed.
pub const MAX_PROBES: u32 = 3;
/// Requests xfwd sends per second at most, and in a burst.
pub const REQUEST_RATE: u32 = 100;
/// See [`REQUEST_RATE`].
pub const REQUEST_BURST: u32 = 20;

/// A frame a worker could not send for want of its next hop's MAC, lent to the engine: the
/// buffer it travelled in belongs to the I/O layer (`io::glean`), and the engine copies what
/// it keeps.
#[derive(Debug, Clone, Copy)]
pub struct Glean<'a> {
    /// Port it came in on (for an ICMP error if resolution fails).
    pub ingress: PortId,
    /// Port it must leave by.
    pub port: PortId,
    /// The neighbour to resolve.
    pub next_hop: IpAddr,
    /// The frame, TTL (hop limit) already decremented, MACs as received.
    pub frame: &'a [u8],
}

/// What the ARP thread counts, per family (it is their only writer). For IPv6, requests are
/// neighbour solicitations, replies advertisements, and `host-unreachable-sent` counts
/// Address Unreachable.
#[derive(Debug, Default)]
#[allow(missing_docs, reason = "each field is named for what it counts")]
pub struct ArpCounters {
    pub requests_received: Counter,
    pub replies_sent: Counter,
    pub replies_received: Counter,
    pub requests_sent: Counter,
    pub probes_sent: Counter,
    pub requests_rate_limited: Counter,
    pub learnt: Counter,
    pub table_full: Counter,
    pub expired: Counter,
    pub glean_queued: Counter,
    pub glean_sent: Counter,
    pub glean_dropped: Counter,
    pub unresolved: Counter,
    pub host_unreachable_sent: Counter,
    pub send_errors: Counter,
    pub conflicts: Counter,
    pub announcements_sent: Counter,
    /// The ARP thread's loop (beaten on the IPv4 counters only; it runs both families).
    pub beat: crate::stats::Heartbeat,
}

impl ArpCounters {
    /// (name, value) pairs, for reports.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        [
            ("requests-received", &self.requests_received),
            ("replies-sent", &self.replies_sent),
            ("replies-received", &self.replies_received),
            ("requests-sent", &self.requests_sent),
            ("probes-sent", &self.probes_sent),
            ("requests-rate-limited", &self.requests_rate_limited),
            ("learnt", &self.learnt),
            ("table-full", &self.table_full),
            ("expired", &self.expired),
            ("glean-queued", &self.glean_queued),
            ("glean-sent", &self.glean_sent),
            ("glean-dropped", &self.glean_dropped),
            ("unresolved", &self.unresolved),
            ("host-unreachable-sent", &self.host_unreachable_sent),
            ("send-errors", &self.send_errors),
            ("announcements-sent", &self.announcements_sent),
            ("conflicts", &self.conflicts),
        ]
        .iter()
        .map(|(n, c)| ((*n).to_owned(), c.get()))
        .collect()
    }
}

/// Settings of the ARP thread.
#[derive(Debug, Clone, Copy)]
pub struct ArpConfig {
    /// Packets held per unresolved neighbour.
    pub glean_queue: usize,
    /// Unresolved neighbours held at once.
    pub max_pending: usize,
    /// ICMP errors per second and burst, for Host Unreachable.
    pub icmp_rate: u32,
    /// ICMP burst.
    pub icmp_burst: u32,
}

/// A neighbour being resolved on a port, and the frames that wait for it.
pub(super) struct Pending {
    queue: VecDeque<(PortId, Vec<u8>)>,
    tries: u32,
    next_ms: u64,
}

/// What the resolver knows of an entry it wrote.
pub(super) struct Meta {
    pub(super) confirmed_ms: u64,
    probes: u32,
    next_probe_ms: u64,
    /// Resolved because xfwd needed it (probed when stale); otherwise learnt in passing from a
    /// request (left to expire, re-resolved on demand if ever needed: probing every host that
    /// once asked would not scale).
    pub(super) resolved: bool,
}

/// What an address family brings to the resolver: its requests, its error for a neighbour
/// that never answered, and where its connected prefixes are.
pub trait Family: 'static {
    /// The family's addresses.
    type Addr: NeighborAddr + core::hash::Hash + Eq;
    /// The other family's neighbour table keys: an IPv4 packet may wait for an IPv6 next hop
    /// (RFC 5549), and the error about it goes back by IPv4 routes, which may have IPv6
    /// gateways too; so each family reads the other's table when it answers.
    type Peer: NeighborAddr;
    /// `a` if it is of this family.
    fn from_ip(a: IpAddr) -> Option<Self::Addr>;
    /// Appends to `out` a request for `target` out of `port` (whose MAC is `me`): to the
    /// family's broadcast or multicast group, or unicast to `to` for a probe. Nothing when the
    /// port has no address to ask from (the try still counts, so the waiting packets get their
    /// error in the end).
    fn request(
        tables: &RouterTables,
        port: PortId,
        me: MacAddr,
        target: Self::Addr,
        to: Option<MacAddr>,
        out: &mut Vec<u8>,
    );
    /// The answer to a frame (received on `ingress`) that waited for a neighbour that never
    /// answered: an ICMP error built in `scratch` (of the frame's own family, which for an IPv4
    /// frame through an IPv6 gateway is not the neighbour's), or a drop. `neighbors` are the
    /// family's own table and the other family's.
    fn unreachable(
        frame: &[u8],
        ingress: PortId,
        tables: &RouterTables,
        neighbors: (&NeighborTable<Self::Addr>, &NeighborTable<Self::Peer>),
        state: &mut RouterState,
        now: u64,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action;
    /// The port whose connected prefixes hold `a`.
    fn connected_port(tables: &RouterTables, a: Self::Addr) -> Option<PortId>;
    /// The neighbour table's key for `a` on `port` (an address that names a neighbour only
    /// with its link carries the port); the address itself by default.
    fn key(a: Self::Addr, _port: PortId) -> Self::Addr {
        a
    }
}

/// A family's own neighbour table, which its resolver writes, and the other family's, which it
/// reads (see [`Family::Peer`]).
pub type Tables<F> = (Arc<NeighborTable<<F as Family>::Addr>>, Arc<NeighborTable<<F as Family>::Peer>>);

/// A neighbour as the kernel and the table key it: an address on a port. The same address on
/// two ports is two neighbours, each resolved, waited for, confirmed and expired on its own, so
/// that what arrives on one port never moves or releases what another port's routes wait for.
pub type At<F> = (<F as Family>::Addr, PortId);

/// The resolution state machine for one family (see the module documentation). Pure: it reads
/// no clock and does no I/O; frames it wants sent are collected for [`Resolver::take_output`].
pub struct Resolver<F: Family> {
    pub(super) tables: Arc<ArcSwap<RouterTables>>,
    pub(super) neighbors: Arc<NeighborTable<F::Addr>>,
    /// The other family's table, read only (see [`Family::Peer`]).
    peer: Arc<NeighborTable<F::Peer>>,
    pub(super) counters: Arc<ArpCounters>,
    cfg: ArpConfig,
    pub(super) pending: HashMap<At<F>, Pending>,
    pub(super) meta: HashMap<At<F>, Meta>,
    statics: HashSet<At<F>>,
    requests: TokenBucket,
    icmp: RouterState,
    out: Vec<(PortId, Vec<u8>)>,
    /// The kernel resolves (`[fib] source = "kernel"`): requests become asks to it.
    kernel: bool,
    asks: Vec<(PortId, F::Addr)>,
}

impl<F: Family> std::fmt::Debug for Resolver<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").field("pending", &self.pending.len()).field("tracked", &self.meta.len()).finish()
    }
}

impl<F: Family> Resolver<F> {
    /// The MAC of `port` as the current tables have it (all zeros for a port they do not have).
    pub(super) fn mac(&self, port: PortId) -> MacAddr {
        self.tables.load().ports.get(port.index()).map_or(MacAddr([0; 6]), |p| p.mac)
    }

    /// An engine for the ports of `tables` (their MACs as the tables have them now: a port
    /// whose MAC changes at run time answers with its new one from the next tables swapped
    /// in), writing `neighbors`, reading the other family's `peer` table for its errors.
    pub fn new(
        tables: Arc<ArcSwap<RouterTables>>,
        (neighbors, peer): Tables<F>,
        cfg: ArpConfig,
        counters: Arc<ArpCounters>,
    ) -> Resolver<F> {
        Resolver {
            tables,
            neighbors,
            peer,
            counters,
            cfg,
            pending: HashMap::new(),
            meta: HashMap::new(),
            statics: HashSet::new(),
            requests: TokenBucket::new(REQUEST_RATE, REQUEST_BURST),
            icmp: RouterState::new(cfg.icmp_rate, cfg.icmp_burst),
            out: Vec::new(),
            kernel: false,
            asks: Vec::new(),
        }
    }

    /// Leaves resolution to the kernel (`[fib] source = "kernel"`): instead of sending
    /// requests, the resolver asks the kernel to resolve ([`Resolver::take_asks`]) and learns
    /// what the kernel's table says ([`Resolver::kernel_entry`]); entries it resolved for the
    /// workers are asked again every reachable time, so that the kernel, which sees none of
    /// the forwarded traffic, re-verifies them when they go stale; nothing expires but by the
    /// kernel's word.
    pub fn resolve_by_kernel(&mut self) {
        self.kernel = true;
    }

    /// An entry of the kernel's neighbour table changed (`ip` on `port`, keyed as the table
    /// keys it): usable with `mac`, or gone (`None`; `failed`: the kernel gave up resolving
    /// it). The kernel keeps an entry per port, as the table does: one made on another port (a
    /// host there claiming the address) is another neighbour, and leaves this one alone.
    pub fn kernel_entry(&mut self, ip: F::Addr, port: PortId, mac: Option<MacAddr>, failed: bool, now: u64) {
        let at = (ip, port);
        if self.statics.contains(&at) {
            return;
        }
        match mac {
            Some(mac) => {
                let known = self.neighbors.lookup(ip, port);
                if known.is_some_and(|n| n.mac == mac) {
                    self.confirm(at, now);
                    return;
                }
                self.learn(ip, mac, port, now);
            }
            None => {
                if self.neighbors.remove(ip, port) {
                    self.counters.expired.inc();
                }
                self.meta.remove(&at);
                if failed {
                    if let Some(p) = self.pending.remove(&at) {
                        self.counters.unresolved.inc();
                        self.unreachable(p, now);
                    }
                }
            }
        }
    }

    /// After a full dump of the kernel's table: entries learnt from it that it no longer
    /// holds (their removal lost in an overrun) go; static ones stay.
    pub fn kernel_prune(&mut self, present: &HashSet<At<F>>) {
        for n in self.neighbors.entries() {
            if !n.is_static && !present.contains(&(n.ip, n.port)) {
                self.neighbors.remove(n.ip, n.port);
                self.meta.remove(&(n.ip, n.port));
                self.counters.expired.inc();
            }
        }
    }

    /// What to ask the kernel to resolve or re-verify, as (port, key), in order.
    pub fn take_asks(&mut self) -> Vec<(PortId, F::Addr)> {
        std::mem::take(&mut self.asks)
    }
}

/// Whether a gleaned frame holds the headers of its family (Ethernet and IPv4 or IPv6): the
/// frame's family, not the next hop's, which for an IPv4 route through an IPv6 gateway differ.
/// Anything shorter is refused, so that every later rewrite of its MACs and every error about
/// it is in bounds.
fn glean_fits(frame: &[u8]) -> bool {
    use crate::wire::{ethernet, ipv4, ipv6};
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return false };
    let need = match eth.ethertype() {
        ethernet::ETHERTYPE_IPV4 => ipv4::MIN_HEADER_LEN,
        ethernet::ETHERTYPE_IPV6 => ipv6::HEADER_LEN,
        _ => return false,
    };
    frame.len() >= ethernet::HEADER_LEN + need
}

/// Sets a waiting frame's MACs for its next hop, `dst`, out of a port with MAC `src`. Gleaned
/// frames hold at least an Ethernet and a network header ([`Resolver::on_glean`] checks).
fn readdress(frame: &mut [u8], dst: MacAddr, src: MacAddr) {
    if let Ok(mut eth) = EthernetFrame::new_checked(frame) {
        eth.set_dst(dst);
        eth.set_src(src);
    }
}

impl<F: Family> Resolver<F> {
    pub(super) fn send(&mut self, port: PortId, frame: &[u8]) {
        self.out.push((port, frame.to_vec()));
    }

    /// Reachability of a known entry confirmed at `now` (by an answer that names no MAC).
    pub(super) fn confirm(&mut self, at: At<F>, now: u64) {
        if let Some(m) = self.meta.get_mut(&at) {
            m.confirmed_ms = now;
            m.probes = 0;
            m.next_probe_ms = 0;
        }
    }

    /// A known entry's MAC changed, unconfirmed: the new one is used, the entry's age is kept
    /// (so that it is probed in its time).
    pub(super) fn relearn(&mut self, ip: F::Addr, mac: MacAddr, port: PortId) {
        if self.statics.contains(&(ip, port)) {
            return;
        }
        if self.neighbors.insert(ip, mac, port, false).is_err() {
            self.counters.table_full.inc();
        }
    }

    /// `ip` answers at `mac` on `port`: stored, and the frames waiting for it there (only
    /// there: frames routed out of another port wait for that port's neighbour) leave.
    pub(super) fn learn(&mut self, ip: F::Addr, mac: MacAddr, port: PortId, now: u64) {
        let at = (ip, port);
        if self.statics.contains(&at) {
            return;
        }
        let known = self.neighbors.lookup(ip, port);
        let resolved = self.pending.contains_key(&at) || self.meta.get(&at).is_some_and(|m| m.resolved);
        match self.neighbors.insert(ip, mac, port, false) {
            Ok(()) => {
                if known.is_none() {
                    self.counters.learnt.inc();
                }
                self.meta.insert(at, Meta { confirmed_ms: now, probes: 0, next_probe_ms: 0, resolved });
            }
            Err(_) => self.counters.table_full.inc(),
        }
        if let Some(p) = self.pending.remove(&at) {
            let mut p = p;
            for (_, mut frame) in p.queue.drain(..) {
                readdress(&mut frame, mac, self.mac(port));
                self.send(port, &frame);
                self.counters.glean_sent.inc();
            }
        }
    }

    /// A frame a worker could not send for want of its next hop's MAC, at `now` (ms). The
    /// frame is copied if it is sent or has to wait; `m` can be reused once this returns.
    pub fn on_glean(&mut self, m: Glean<'_>, now: u64) {
        // Workers glean whole frames; anything shorter than the headers is refused here,
        // so that every later rewrite of its MACs and every ICMP error about it is in bounds
        // (found by the `arp` fuzz target).
        let Some(next_hop) = F::from_ip(m.next_hop) else {
            self.counters.glean_dropped.inc();
            return;
        };
        let next_hop = F::key(next_hop, m.port);
        if !glean_fits(m.frame) {
            self.counters.glean_dropped.inc();
            return;
        }
        if let Some(n) = self.neighbors.lookup(next_hop, m.port) {
            // Resolved since the worker looked.
            let mut frame = m.frame.to_vec();
            readdress(&mut frame, n.mac, self.mac(m.port));
            self.out.push((m.port, frame));
            self.counters.glean_sent.inc();
            return;
        }
        let cap = self.cfg.glean_queue;
        let full = self.pending.len() >= self.cfg.max_pending;
        // Keyed by the port the frame leaves by: after a reload that moved the route, the
        // neighbour is resolved on its new port, and what waited on the old one gets its
        // answer there.
        let at = (next_hop, m.port);
        match self.pending.get_mut(&at) {
            Some(p) if p.queue.len() < cap => {
                p.queue.push_back((m.ingress, m.frame.to_vec()));
                self.counters.glean_queued.inc();
            }
            Some(_) => self.counters.glean_dropped.inc(),
            None if full => self.counters.glean_dropped.inc(),
            None => {
                let mut queue = VecDeque::with_capacity(cap.min(64));
                queue.push_back((m.ingress, m.frame.to_vec()));
                self.counters.glean_queued.inc();
                self.pending.insert(at, Pending { queue, tries: 0, next_ms: now });
                self.timers(now);
            }
        }
    }

    /// Sends a request for `target` out of `port` (to the group, or unicast to `to` for a
    /// probe), if the request bucket allows.
    fn request(&mut self, port: PortId, target: F::Addr, to: Option<MacAddr>, now: u64) -> bool {
        if !self.requests.take(now) {
            self.counters.requests_rate_limited.inc();
            return false;
        }
        if self.kernel {
            self.asks.push((port, target));
            return true;
        }
        let tables = self.tables.load();
        let mut frame = Vec::new();
        F::request(&tables, port, self.mac(port), target, to, &mut frame);
        if !frame.is_empty() {
            self.out.push((port, frame));
        }
        true
    }

    /// Retries, give-ups, probes and expiry due at `now` (ms).
    pub fn timers(&mut self, now: u64) {
        // Resolutions in progress.
        let due: Vec<At<F>> = self.pending.iter().filter(|(_, p)| p.next_ms <= now).map(|(at, _)| *at).collect();
        for at in due {
            let Some(p) = self.pending.get(&at) else { continue };
            let ((ip, port), tries) = (at, p.tries);
            if tries >= MAX_TRIES {
                if let Some(p) = self.pending.remove(&at) {
                    self.counters.unresolved.inc();
                    self.unreachable(p, now);
                }
                continue;
            }
            if self.request(port, ip, None, now) {
                self.counters.requests_sent.inc();
                if let Some(p) = self.pending.get_mut(&at) {
                    p.tries += 1;
                    p.next_ms = now + RETRANS_MS;
                }
            }
        }
        // Entries to confirm or expire. Resolved ones are probed when stale and removed after
        // MAX_PROBES unanswered probes (or, should the request bucket keep refusing probes, at
        // a hard deadline); ones learnt in passing expire at twice the reachable time.
        if self.kernel {
            self.refresh(now);
            return;
        }
        let deadline = REACHABLE_MS + u64::from(MAX_PROBES + 2) * RETRANS_MS;
        let stale: Vec<At<F>> = self
            .meta
            .iter()
            .filter(|(_, m)| now.saturating_sub(m.confirmed_ms) > REACHABLE_MS && m.next_probe_ms <= now)
            .map(|(at, _)| *at)
            .collect();
        for at in stale {
            let (ip, port) = at;
            let Some(n) = self.neighbors.lookup(ip, port) else {
                self.meta.remove(&at);
                continue;
            };
            let Some(m) = self.meta.get(&at) else { continue };
            let age = now.saturating_sub(m.confirmed_ms);
            let expired = if m.resolved { m.probes >= MAX_PROBES || age > deadline } else { age > 2 * REACHABLE_MS };
            if expired {
                self.neighbors.remove(ip, port);
                self.meta.remove(&at);
                self.counters.expired.inc();
                continue;
            }
            if !m.resolved {
                continue;
            }
            if self.request(port, ip, Some(n.mac), now) {
                self.counters.probes_sent.inc();
                if let Some(m) = self.meta.get_mut(&at) {
                    m.probes += 1;
                    m.next_probe_ms = now + RETRANS_MS;
                }
            }
        }
    }

    /// Kernel resolution: asks again, every reachable time, for every entry xfwd holds (the
    /// kernel then re-verifies a stale one, as if its own traffic used it): those resolved for
    /// the workers, and those the kernel knew already, which the workers may use as well.
    fn refresh(&mut self, now: u64) {
        let due: Vec<At<F>> = self
            .meta
            .iter()
            .filter(|(_, m)| now.saturating_sub(m.confirmed_ms) >= REACHABLE_MS)
            .map(|(at, _)| *at)
            .collect();
        for at in due {
            let (ip, port) = at;
            let Some(n) = self.neighbors.lookup(ip, port) else {
                self.meta.remove(&at);
                continue;
            };
            if self.request(port, ip, Some(n.mac), now) {
                self.counters.probes_sent.inc();
                if let Some(m) = self.meta.get_mut(&at) {
                    m.confirmed_ms = now;
                }
            }
        }
    }

    /// Answers what waited for an unresolvable neighbour with the family's error (ICMP Host
    /// Unreachable, ICMPv6 Address Unreachable).
    fn unreachable(&mut self, p: Pending, now: u64) {
        let tables = self.tables.load_full();
        let mut scratch = [0u8; SCRATCH_LEN];
        for (ingress, frame) in p.queue {
            let neighbors = (&*self.neighbors, &*self.peer);
            let a = F::unreachable(&frame, ingress, &tables, neighbors, &mut self.icmp, now, &mut scratch);
            if let Action::Reply { port, len, .. } = a {
                self.send(port, &scratch[..usize::from(len)]);
                self.counters.host_unreachable_sent.inc();
            }
        }
    }

    /// Replaces the static neighbours.
    pub fn set_statics(&mut self, list: Vec<(F::Addr, MacAddr)>) {
        let tables = self.tables.load();
        // Each on the port whose connected prefixes hold it.
        let placed: Vec<(At<F>, MacAddr)> = list
            .into_iter()
            .filter_map(|(ip, mac)| F::connected_port(&tables, ip).map(|port| ((F::key(ip, port), port), mac)))
            .collect();
        let new: HashSet<At<F>> = placed.iter().map(|(at, _)| *at).collect();
        for &(ip, port) in self.statics.iter().filter(|at| !new.contains(at)) {
            self.neighbors.remove(ip, port);
        }
        self.statics.clear();
        for (at, mac) in placed {
            let (ip, port) = at;
            self.meta.remove(&at);
            if self.neighbors.insert(ip, mac, port, true).is_ok() {
                self.statics.insert(at);
            } else {
                self.counters.table_full.inc();
            }
            if let Some(mut p) = self.pending.remove(&at) {
                for (_, mut frame) in p.queue.drain(..) {
                    readdress(&mut frame, mac, self.mac(port));
                    self.send(port, &frame);
                }
            }
        }
    }

    /// Changes the number of packets held per unresolved neighbour.
    pub fn set_glean_queue(&mut self, n: usize) {
        self.cfg.glean_queue = n.max(1);
    }

    /// Whether resolutions are in progress (their timers want frequent attention).
    pub fn resolving(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The frames to send, as (port, frame), in order; the caller sends them.
    pub fn take_output(&mut self) -> Vec<(PortId, Vec<u8>)> {
        std::mem::take(&mut self.out)
    }
}
