//! ARP and neighbour resolution, as a pure state machine driven by the ARP thread
//! ([`crate::io::arp`]): it answers ARP for the box's addresses, resolves next hops, holds the
//! packets waiting for them, and is the only writer of the neighbour table.
//!
//! Behaviour, as Linux does it (with `arp_accept=0`):
//! - a request for one of the box's addresses on the port it belongs to is answered, and its
//!   sender learnt when it is on a connected subnet of that port;
//! - a reply or gratuitous ARP updates an existing entry; it creates one only when we asked;
//! - an unresolved next hop gets a broadcast request, retried every second, three times; the
//!   packets that wait for it (at most `glean_queue` per neighbour, at most `max_pending`
//!   neighbours) leave when it resolves, or are answered with ICMP Host Unreachable when it
//!   does not;
//! - an entry not confirmed for 30 s is probed by unicast requests; three unanswered probes
//!   remove it; static entries never expire;
//! - every request xfwd sends passes a token bucket (100 per second, burst 20), so a flood of
//!   packets to unresolvable addresses cannot turn into an ARP flood.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::router::{icmp_error, ErrorEnv, IcmpError, RouterState, TokenBucket};
use super::tables::{connected_to, NhKind, RouterTables};
use super::NeighborTable;
use crate::action::{Action, SCRATCH_LEN};
use crate::stats::Counter;
use crate::wire::ethernet::{self, ETHERTYPE_ARP};
use crate::wire::{arp, ipv4, ArpPacket, EthernetFrame, MacAddr};
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

/// What the ARP thread counts (it is their only writer).
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

struct Pending {
    port: PortId,
    queue: VecDeque<(PortId, Vec<u8>)>,
    tries: u32,
    next_ms: u64,
}

struct Meta {
    confirmed_ms: u64,
    probes: u32,
    next_probe_ms: u64,
    /// Resolved because xfwd needed it (probed when stale); otherwise learnt in passing from a
    /// request (left to expire, re-resolved on demand if ever needed: probing every host that
    /// once asked would not scale).
    resolved: bool,
}

/// The ARP state machine (see the module documentation). Pure: it reads no clock and does no
/// I/O; frames it wants sent are collected for [`ArpEngine::take_output`].
pub struct ArpEngine {
    macs: Vec<MacAddr>,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    counters: Arc<ArpCounters>,
    cfg: ArpConfig,
    pending: HashMap<Ipv4Addr, Pending>,
    meta: HashMap<Ipv4Addr, Meta>,
    statics: HashSet<Ipv4Addr>,
    requests: TokenBucket,
    icmp: RouterState,
    out: Vec<(PortId, Vec<u8>)>,
}

impl std::fmt::Debug for ArpEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArpEngine").field("pending", &self.pending.len()).field("tracked", &self.meta.len()).finish()
    }
}

impl ArpEngine {
    /// An engine for ports with these MACs (in port order), writing `neighbors`.
    pub fn new(
        macs: Vec<MacAddr>,
        tables: Arc<ArcSwap<RouterTables>>,
        neighbors: Arc<NeighborTable>,
        cfg: ArpConfig,
        counters: Arc<ArpCounters>,
    ) -> ArpEngine {
        ArpEngine {
            macs,
            tables,
            neighbors,
            counters,
            cfg,
            pending: HashMap::new(),
            meta: HashMap::new(),
            statics: HashSet::new(),
            requests: TokenBucket::new(REQUEST_RATE, REQUEST_BURST),
            icmp: RouterState::new(cfg.icmp_rate, cfg.icmp_burst),
            out: Vec::new(),
        }
    }
}

/// Sets a waiting frame's MACs for its next hop, `dst`, out of a port with MAC `src`. Gleaned
/// frames hold at least an Ethernet and an IPv4 header ([`ArpEngine::on_glean`] checks).
fn readdress(frame: &mut [u8], dst: MacAddr, src: MacAddr) {
    if let Ok(mut eth) = EthernetFrame::new_checked(frame) {
        eth.set_dst(dst);
        eth.set_src(src);
    }
}

impl ArpEngine {
    fn send(&mut self, port: PortId, frame: &[u8]) {
        self.out.push((port, frame.to_vec()));
    }

    fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr, port: PortId, now: u64) {
        if self.statics.contains(&ip) {
            return;
        }
        let known = self.neighbors.lookup(ip);
        let resolved = self.pending.contains_key(&ip) || self.meta.get(&ip).is_some_and(|m| m.resolved);
        match self.neighbors.insert(ip, mac, port, false) {
            Ok(()) => {
                if known.is_none() {
                    self.counters.learnt.inc();
                }
                self.meta.insert(ip, Meta { confirmed_ms: now, probes: 0, next_probe_ms: 0, resolved });
            }
            Err(_) => self.counters.table_full.inc(),
        }
        if let Some(p) = self.pending.remove(&ip) {
            let mut p = p;
            for (_, mut frame) in p.queue.drain(..) {
                readdress(&mut frame, mac, self.macs[port.index()]);
                self.send(port, &frame);
                self.counters.glean_sent.inc();
            }
        }
    }

    /// An ARP frame that arrived on `port` at `now` (ms).
    pub fn on_arp(&mut self, port: PortId, frame: &[u8], now: u64) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else { return };
        if eth.ethertype() != ETHERTYPE_ARP {
            return;
        }
        let Ok(a) = ArpPacket::new_checked(eth.payload()) else { return };
        let (sha, spa, tpa) = (a.sha(), a.spa(), a.tpa());
        if sha.is_multicast() || sha.is_zero() {
            return;
        }
        let tables = self.tables.load();
        let Some(spec) = tables.ports.get(port.index()) else { return };
        let ours = spec.addrs.iter().any(|&(addr, _)| addr == tpa);
        // A sender claiming one of the box's own addresses is a conflict, never a neighbour.
        if tables.is_local(spa) {
            self.counters.conflicts.inc();
            return;
        }
        // On link: the route to the sender leaves by this port straight to it (a connected
        // subnet, or a `dev` route).
        let on_link = tables.route(spa).is_some_and(|nh| nh.kind == NhKind::Connected && nh.port == port);
        match a.op() {
            arp::OP_REQUEST => {
                self.counters.requests_received.inc();
                if ours {
                    let mut out = [0u8; ethernet::MIN_FRAME_LEN];
                    let me = self.macs[port.index()];
                    let n = arp::write_frame(&mut out, sha, me, arp::OP_REPLY, me, tpa, sha, spa);
                    self.send(port, &out[..n]);
                    self.counters.replies_sent.inc();
                    if !spa.is_unspecified() && on_link {
                        self.learn(spa, sha, port, now);
                        return;
                    }
                }
            }
            arp::OP_REPLY => self.counters.replies_received.inc(),
            _ => return,
        }
        // Replies, gratuitous ARP and others' requests: update what we know or asked for.
        let asked = self.pending.get(&spa).is_some_and(|p| p.port == port);
        let known = self.neighbors.lookup(spa).is_some();
        if !spa.is_unspecified()
            && on_link
            && (asked || known || (a.op() == arp::OP_REPLY && ours && self.meta.contains_key(&spa)))
        {
            self.learn(spa, sha, port, now);
        }
    }

    /// A frame a worker could not send for want of its next hop's MAC, at `now` (ms). The
    /// frame is copied if it is sent or has to wait; `m` can be reused once this returns.
    pub fn on_glean(&mut self, m: Glean<'_>, now: u64) {
        // Workers glean whole IPv4 frames; anything shorter than the headers is refused here,
        // so that every later rewrite of its MACs and every ICMP error about it is in bounds
        // (found by the `arp` fuzz target).
        let IpAddr::V4(next_hop) = m.next_hop else {
            self.counters.glean_dropped.inc();
            return;
        };
        if m.frame.len() < ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN {
            self.counters.glean_dropped.inc();
            return;
        }
        if let Some(n) = self.neighbors.lookup(next_hop).filter(|n| n.port == m.port) {
            // Resolved since the worker looked.
            let mut frame = m.frame.to_vec();
            readdress(&mut frame, n.mac, self.macs[m.port.index()]);
            self.out.push((m.port, frame));
            self.counters.glean_sent.inc();
            return;
        }
        let cap = self.cfg.glean_queue;
        let full = self.pending.len() >= self.cfg.max_pending;
        match self.pending.get_mut(&next_hop) {
            // A reload moved the neighbour to another port: resolve it there.
            Some(p) if p.port != m.port => {
                p.port = m.port;
                p.queue.clear();
                p.queue.push_back((m.ingress, m.frame.to_vec()));
                self.counters.glean_queued.inc();
            }
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
                self.pending.insert(next_hop, Pending { port: m.port, queue, tries: 0, next_ms: now });
                self.timers(now);
            }
        }
    }

    /// Sends a request for `target` out of `port` (broadcast, or unicast to `to` for a probe).
    fn request(&mut self, port: PortId, target: Ipv4Addr, to: Option<MacAddr>, now: u64) -> bool {
        if !self.requests.take(now) {
            self.counters.requests_rate_limited.inc();
            return false;
        }
        let tables = self.tables.load();
        // The address Linux would pick: the box's address on the subnet of the route to the
        // target (for a `dev` route, the port's first address).
        let spa = connected_to(&tables.ports, target)
            .filter(|(p, _)| *p == port)
            .map(|(_, a)| a)
            .or_else(|| tables.route(target).filter(|nh| nh.port == port).map(|nh| nh.src))
            .or_else(|| tables.ports.get(port.index()).and_then(|s| s.addrs.first().map(|a| a.0)))
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let me = self.macs[port.index()];
        let mut out = [0u8; ethernet::MIN_FRAME_LEN];
        let n = arp::write_frame(
            &mut out,
            to.unwrap_or(MacAddr::BROADCAST),
            me,
            arp::OP_REQUEST,
            me,
            spa,
            MacAddr([0; 6]),
            target,
        );
        self.send(port, &out[..n]);
        true
    }

    /// Retries, give-ups, probes and expiry due at `now` (ms).
    pub fn timers(&mut self, now: u64) {
        // Resolutions in progress.
        let due: Vec<Ipv4Addr> = self.pending.iter().filter(|(_, p)| p.next_ms <= now).map(|(ip, _)| *ip).collect();
        for ip in due {
            let Some(p) = self.pending.get(&ip) else { continue };
            let (port, tries) = (p.port, p.tries);
            if tries >= MAX_TRIES {
                if let Some(p) = self.pending.remove(&ip) {
                    self.counters.unresolved.inc();
                    self.unreachable(p, now);
                }
                continue;
            }
            if self.request(port, ip, None, now) {
                self.counters.requests_sent.inc();
                if let Some(p) = self.pending.get_mut(&ip) {
                    p.tries += 1;
                    p.next_ms = now + RETRANS_MS;
                }
            }
        }
        // Entries to confirm or expire. Resolved ones are probed when stale and removed after
        // MAX_PROBES unanswered probes (or, should the request bucket keep refusing probes, at
        // a hard deadline); ones learnt in passing expire at twice the reachable time.
        let deadline = REACHABLE_MS + u64::from(MAX_PROBES + 2) * RETRANS_MS;
        let stale: Vec<Ipv4Addr> = self
            .meta
            .iter()
            .filter(|(_, m)| now.saturating_sub(m.confirmed_ms) > REACHABLE_MS && m.next_probe_ms <= now)
            .map(|(ip, _)| *ip)
            .collect();
        for ip in stale {
            let Some(n) = self.neighbors.lookup(ip) else {
                self.meta.remove(&ip);
                continue;
            };
            let Some(m) = self.meta.get(&ip) else { continue };
            let age = now.saturating_sub(m.confirmed_ms);
            let expired = if m.resolved { m.probes >= MAX_PROBES || age > deadline } else { age > 2 * REACHABLE_MS };
            if expired {
                self.neighbors.remove(ip);
                self.meta.remove(&ip);
                self.counters.expired.inc();
                continue;
            }
            if !m.resolved {
                continue;
            }
            if self.request(n.port, ip, Some(n.mac), now) {
                self.counters.probes_sent.inc();
                if let Some(m) = self.meta.get_mut(&ip) {
                    m.probes += 1;
                    m.next_probe_ms = now + RETRANS_MS;
                }
            }
        }
    }

    /// Answers what waited for an unresolvable neighbour with ICMP Host Unreachable.
    fn unreachable(&mut self, p: Pending, now: u64) {
        let tables = self.tables.load_full();
        let mut scratch = [0u8; SCRATCH_LEN];
        for (ingress, frame) in p.queue {
            let mut env = ErrorEnv {
                ingress,
                tables: &tables,
                neighbors: &self.neighbors,
                state: &mut self.icmp,
                now_ms: now,
                scratch: &mut scratch,
            };
            let a = icmp_error(&frame, &mut env, IcmpError::HOST_UNREACHABLE);
            if let Action::Reply { port, len, .. } = a {
                self.send(port, &scratch[..usize::from(len)]);
                self.counters.host_unreachable_sent.inc();
            }
        }
    }

    /// Replaces the static neighbours.
    pub fn set_statics(&mut self, list: Vec<(Ipv4Addr, MacAddr)>) {
        let tables = self.tables.load();
        let new: HashSet<Ipv4Addr> = list.iter().map(|(ip, _)| *ip).collect();
        for old in self.statics.iter().filter(|ip| !new.contains(ip)) {
            self.neighbors.remove(*old);
        }
        self.statics.clear();
        for (ip, mac) in list {
            let Some((port, _)) = connected_to(&tables.ports, ip) else { continue };
            self.meta.remove(&ip);
            if self.neighbors.insert(ip, mac, port, true).is_ok() {
                self.statics.insert(ip);
            } else {
                self.counters.table_full.inc();
            }
            if let Some(mut p) = self.pending.remove(&ip) {
                for (_, mut frame) in p.queue.drain(..) {
                    readdress(&mut frame, mac, self.macs[port.index()]);
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

#[cfg(test)]
mod tests {
    use super::super::tables::PortSpec;
    use super::*;

    const A5: MacAddr = MacAddr([2, 0, 0, 0, 5, 5]);
    const A4: MacAddr = MacAddr([2, 0, 0, 0, 4, 4]);
    const H1: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const H2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const P5: PortId = PortId(0);
    const P4: PortId = PortId(1);
    const ZERO: MacAddr = MacAddr([0; 6]);

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn engine(capacity: usize, glean_queue: usize) -> (ArpEngine, Arc<NeighborTable>, Arc<ArpCounters>) {
        let ports = vec![
            PortSpec {
                name: "eth5".into(),
                mac: A5,
                mtu: 1500,
                addrs: vec![(ip("198.18.10.2"), 24)],
                addrs6: Vec::new(),
                link_local: None,
            },
            PortSpec {
                name: "eth4".into(),
                mac: A4,
                mtu: 1500,
                addrs: vec![(ip("198.18.30.1"), 24)],
                addrs6: Vec::new(),
                link_local: None,
            },
        ];
        let tables = Arc::new(ArcSwap::from_pointee(RouterTables::build(ports, &[]).unwrap()));
        let neighbors = Arc::new(NeighborTable::new(capacity));
        let counters = Arc::new(ArpCounters::default());
        let cfg = ArpConfig { glean_queue, max_pending: 64, icmp_rate: 0, icmp_burst: 10 };
        let e = ArpEngine::new(vec![A5, A4], tables, Arc::clone(&neighbors), cfg, Arc::clone(&counters));
        (e, neighbors, counters)
    }

    fn arp_frame(op: u16, sha: MacAddr, spa: &str, tha: MacAddr, tpa: &str) -> Vec<u8> {
        let mut f = [0u8; 60];
        let dst = if op == arp::OP_REQUEST { MacAddr::BROADCAST } else { A4 };
        let n = arp::write_frame(&mut f, dst, sha, op, sha, ip(spa), tha, ip(tpa));
        f[..n].to_vec()
    }

    /// (port, eth dst, op, sha, spa, tha, tpa) of an ARP frame in the output.
    fn parse(out: &(PortId, Vec<u8>)) -> (PortId, MacAddr, u16, MacAddr, Ipv4Addr, MacAddr, Ipv4Addr) {
        let eth = EthernetFrame::new_checked(&out.1[..]).unwrap();
        assert_eq!(eth.ethertype(), ETHERTYPE_ARP);
        let a = ArpPacket::new_checked(eth.payload()).unwrap();
        (out.0, eth.dst(), a.op(), a.sha(), a.spa(), a.tha(), a.tpa())
    }

    fn udp_from_h1(dst: &str) -> Vec<u8> {
        let mut v = Vec::new();
        etherparse::PacketBuilder::ethernet2(H1.0, A5.0)
            .ipv4(ip("198.18.10.1").octets(), ip(dst).octets(), 63)
            .udp(1000, 9)
            .write(&mut v, b"payload!")
            .unwrap();
        v
    }

    #[test]
    fn a_request_for_our_address_is_answered_on_its_port_and_the_requester_learnt() {
        let (mut e, n, c) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.2", ZERO, "198.18.30.1"), 0);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        assert_eq!(parse(&out[0]), (P4, H2, arp::OP_REPLY, A4, ip("198.18.30.1"), H2, ip("198.18.30.2")));
        assert_eq!(n.lookup(ip("198.18.30.2")).map(|x| (x.mac, x.port)), Some((H2, P4)));
        assert_eq!((c.replies_sent.get(), c.learnt.get()), (1, 1));
        // Not ours, or ours but on the other port: no answer, nothing learnt.
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H1, "198.18.30.9", ZERO, "198.18.30.77"), 0);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H1, "198.18.30.9", ZERO, "198.18.10.2"), 0);
        assert!(e.take_output().is_empty());
        assert_eq!(n.lookup(ip("198.18.30.9")), None);
    }

    #[test]
    fn gratuitous_arp_updates_an_existing_entry_and_creates_none() {
        let (mut e, n, _) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.2", ZERO, "198.18.30.1"), 0);
        let moved = MacAddr([2, 0, 0, 0, 0, 0x22]);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, moved, "198.18.30.2", ZERO, "198.18.30.2"), 10);
        assert_eq!(n.lookup(ip("198.18.30.2")).unwrap().mac, moved);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, moved, "198.18.30.3", ZERO, "198.18.30.3"), 10);
        assert_eq!(n.lookup(ip("198.18.30.3")), None);
    }

    #[test]
    fn a_gleaned_frame_waits_for_the_reply_then_leaves_rewritten() {
        let (mut e, n, c) = engine(64, 4);
        let frame = udp_from_h1("198.18.30.2");
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip("198.18.30.2")), frame: &frame }, 0);
        let out = e.take_output();
        assert_eq!(out.len(), 1, "one request");
        assert_eq!(
            parse(&out[0]),
            (P4, MacAddr::BROADCAST, arp::OP_REQUEST, A4, ip("198.18.30.1"), ZERO, ip("198.18.30.2"))
        );
        e.on_arp(P4, &arp_frame(arp::OP_REPLY, H2, "198.18.30.2", A4, "198.18.30.1"), 5);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, P4);
        assert_eq!(&out[0].1[0..6], &H2.0);
        assert_eq!(&out[0].1[6..12], &A4.0);
        assert_eq!(&out[0].1[12..], &frame[12..], "only the MACs change");
        assert!(n.lookup(ip("198.18.30.2")).is_some());
        assert_eq!((c.glean_queued.get(), c.glean_sent.get()), (1, 1));
        // Resolved now: a later glean (a worker raced the insertion) is sent at once.
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip("198.18.30.2")), frame: &frame }, 6);
        assert_eq!(e.take_output().len(), 1);
    }

    #[test]
    fn the_glean_queue_is_bounded_per_neighbour() {
        let (mut e, _, c) = engine(64, 2);
        for _ in 0..5 {
            e.on_glean(
                Glean {
                    ingress: P5,
                    port: P4,
                    next_hop: IpAddr::V4(ip("198.18.30.2")),
                    frame: &udp_from_h1("198.18.30.2"),
                },
                0,
            );
        }
        assert_eq!((c.glean_queued.get(), c.glean_dropped.get()), (2, 3));
        assert_eq!(c.requests_sent.get(), 1, "one request, not one per packet");
    }

    #[test]
    fn an_unresolved_neighbour_gets_three_requests_then_host_unreachable() {
        let (mut e, n, c) = engine(64, 4);
        e.on_glean(
            Glean {
                ingress: P5,
                port: P4,
                next_hop: IpAddr::V4(ip("198.18.30.99")),
                frame: &udp_from_h1("198.18.30.99"),
            },
            0,
        );
        let mut out = e.take_output();
        for t in [500, 1000, 1500, 2000, 2500, 3000] {
            e.timers(t);
            out.extend(e.take_output());
        }
        let requests = out.iter().filter(|o| o.1[12..14] == [0x08, 0x06]).count();
        assert_eq!(requests, 3, "retried once a second, three times");
        let icmp: Vec<_> = out.iter().filter(|o| o.1[12..14] == [0x08, 0x00]).collect();
        assert_eq!(icmp.len(), 1);
        let (port, f) = icmp[0];
        assert_eq!(*port, P5, "back where the packet came from");
        assert_eq!(&f[0..6], &H1.0);
        let (h, rest) = etherparse::Ipv4Header::from_slice(&f[14..]).unwrap();
        assert_eq!((Ipv4Addr::from(h.source), Ipv4Addr::from(h.destination)), (ip("198.18.10.2"), ip("198.18.10.1")));
        assert_eq!((rest[0], rest[1]), (crate::wire::icmp::DEST_UNREACHABLE, crate::wire::icmp::CODE_HOST_UNREACHABLE));
        assert_eq!((c.unresolved.get(), c.host_unreachable_sent.get()), (1, 1));
        assert_eq!(n.lookup(ip("198.18.30.99")), None);
        assert!(!e.resolving());
    }

    /// Resolves `ip` (on eth4) the way a forwarded packet does: glean, request, reply.
    fn resolve(e: &mut ArpEngine, ip_s: &str, mac: MacAddr, now: u64) {
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip(ip_s)), frame: &udp_from_h1(ip_s) }, now);
        e.on_arp(P4, &arp_frame(arp::OP_REPLY, mac, ip_s, A4, "198.18.30.1"), now);
        e.take_output();
    }

    #[test]
    fn resolved_entries_are_probed_when_stale_and_removed_unless_they_answer_statics_never() {
        let (mut e, n, c) = engine(64, 4);
        e.set_statics(vec![(ip("198.18.30.50"), MacAddr([2, 0, 0, 0, 0, 0x50]))]);
        resolve(&mut e, "198.18.30.2", H2, 0);
        resolve(&mut e, "198.18.30.3", H1, 0);
        // Stale after 30 s: unicast probes to each.
        e.timers(REACHABLE_MS + 1);
        let probes: Vec<_> = e.take_output().iter().map(parse).collect();
        assert_eq!(probes.len(), 2);
        assert!(probes.iter().any(|p| p.1 == H2 && p.6 == ip("198.18.30.2")), "unicast to the known MAC: {probes:?}");
        // .2 answers; .3 stays silent through three probes.
        e.on_arp(P4, &arp_frame(arp::OP_REPLY, H2, "198.18.30.2", A4, "198.18.30.1"), REACHABLE_MS + 100);
        for k in 1..=4 {
            e.timers(REACHABLE_MS + 1 + k * RETRANS_MS);
        }
        assert!(n.lookup(ip("198.18.30.2")).is_some(), "confirmed by its reply");
        assert_eq!(n.lookup(ip("198.18.30.3")), None, "three unanswered probes remove it");
        assert_eq!(c.expired.get(), 1);
        e.timers(1_000_000);
        assert!(n.lookup(ip("198.18.30.50")).is_some_and(|x| x.is_static), "static entries never expire");
    }

    #[test]
    fn entries_learnt_in_passing_are_not_probed_and_expire() {
        let (mut e, n, c) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.2", ZERO, "198.18.30.1"), 0);
        e.take_output();
        e.timers(REACHABLE_MS + 1);
        assert!(e.take_output().is_empty(), "no probe for a host that only asked");
        assert!(n.lookup(ip("198.18.30.2")).is_some());
        e.timers(2 * REACHABLE_MS + 1);
        assert_eq!(n.lookup(ip("198.18.30.2")), None);
        assert_eq!(c.probes_sent.get(), 0);
    }

    #[test]
    fn a_dev_route_neighbour_off_every_subnet_resolves() {
        let ports = vec![
            PortSpec {
                name: "eth5".into(),
                mac: A5,
                mtu: 1500,
                addrs: vec![(ip("198.18.10.2"), 24)],
                addrs6: Vec::new(),
                link_local: None,
            },
            PortSpec {
                name: "eth4".into(),
                mac: A4,
                mtu: 1500,
                addrs: vec![(ip("198.18.30.1"), 24)],
                addrs6: Vec::new(),
                link_local: None,
            },
        ];
        let statics = [("172.16.0.0/12".parse().unwrap(), super::super::tables::RouteTarget::Dev(P4))];
        let tables = Arc::new(ArcSwap::from_pointee(RouterTables::build(ports, &statics).unwrap()));
        let n = Arc::new(NeighborTable::new(64));
        let cfg = ArpConfig { glean_queue: 4, max_pending: 64, icmp_rate: 0, icmp_burst: 10 };
        let mut e = ArpEngine::new(vec![A5, A4], tables, Arc::clone(&n), cfg, Arc::new(ArpCounters::default()));
        e.on_glean(
            Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip("172.16.1.1")), frame: &udp_from_h1("172.16.1.1") },
            0,
        );
        let out = e.take_output();
        assert_eq!(parse(&out[0]).4, ip("198.18.30.1"), "asked from the port's address");
        e.on_arp(P4, &arp_frame(arp::OP_REPLY, H2, "172.16.1.1", A4, "198.18.30.1"), 5);
        assert_eq!(n.lookup(ip("172.16.1.1")).map(|x| x.mac), Some(H2));
        assert_eq!(e.take_output().len(), 1, "the waiting frame left");
    }

    #[test]
    fn a_sender_claiming_our_address_is_a_conflict_not_a_neighbour() {
        let (mut e, n, c) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.1", ZERO, "198.18.30.1"), 0);
        assert_eq!(n.lookup(ip("198.18.30.1")), None);
        assert_eq!(c.conflicts.get(), 1);
    }

    #[test]
    fn an_arp_flood_answers_but_cannot_grow_the_table() {
        let (mut e, n, c) = engine(64, 4);
        for i in 0..10_000u32 {
            let spa = Ipv4Addr::from(u32::from(ip("198.18.30.0")) | (i % 250 + 2));
            let sha = MacAddr::from_u64(0x0200_0000_0000 | u64::from(i));
            e.on_arp(P4, &arp_frame(arp::OP_REQUEST, sha, &spa.to_string(), ZERO, "198.18.30.1"), u64::from(i));
        }
        assert!(n.len() <= 64, "{} entries", n.len());
        assert_eq!(c.replies_sent.get(), 10_000);
        assert!(c.table_full.get() > 0);
    }

    #[test]
    fn requests_are_rate_limited() {
        let (mut e, _, c) = engine(64, 4);
        for i in 0..60u32 {
            let nh = Ipv4Addr::from(u32::from(ip("198.18.30.100")) + i);
            e.on_glean(
                Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(nh), frame: &udp_from_h1(&nh.to_string()) },
                0,
            );
        }
        assert_eq!(c.requests_sent.get(), u64::from(REQUEST_BURST));
        assert!(c.requests_rate_limited.get() > 0);
        // A second later the bucket has refilled and the rest go out.
        e.timers(1000);
        assert!(c.requests_sent.get() > u64::from(REQUEST_BURST));
    }

    #[test]
    fn frames_too_short_to_be_ipv4_are_not_gleaned() {
        // Found by the `arp` fuzz target: a short frame used to reach the MAC rewrite and the
        // ICMP error's slicing.
        let (mut e, _, c) = engine(64, 4);
        for len in [0, 5, 13, 33] {
            e.on_glean(
                Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip("198.18.30.7")), frame: &vec![0; len] },
                0,
            );
        }
        assert_eq!(c.glean_dropped.get(), 4);
        for t in [1000, 2000, 3000, 4000] {
            e.timers(t);
        }
        assert!(e.take_output().is_empty());
    }
}
