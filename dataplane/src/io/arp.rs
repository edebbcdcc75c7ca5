//! The ARP thread: answers ARP for the box's addresses, resolves next hops, holds the packets
//! waiting for them, and is the only writer of the neighbour table.
//!
//! ARP must keep working for the kernel too (its own management sessions need replies), so the
//! XDP program hands every ARP frame to the kernel, and this thread reads them from a packet
//! socket per port (`AF_PACKET`, `ETH_P_ARP`): packet sockets see what XDP passed. It sends
//! through the same sockets. One thread, because ARP is a few frames per second per neighbour
//! and a single writer keeps the neighbour table lock-free for the workers.
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
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use crossbeam_channel::Receiver;

use crate::action::{Action, SCRATCH_LEN};
use crate::l3::router::{icmp_error, RouterState, TokenBucket};
use crate::l3::tables::{connected_to, RouterTables};
use crate::l3::NeighborTable;
use crate::reason::Reason;
use crate::stats::Counter;
use crate::time::Clock;
use crate::wire::{arp, icmp, ArpPacket, EthernetFrame, MacAddr};
use crate::PortId;

const ETH_P_ARP: u16 = 0x0806;
const RETRANS_MS: u64 = 1000;
const MAX_TRIES: u32 = 3;
const REACHABLE_MS: u64 = 30_000;
const MAX_PROBES: u32 = 3;
const POLL_MS: i32 = 10;

/// A frame a worker could not send for want of its next hop's MAC.
#[derive(Debug)]
pub struct GleanMsg {
    /// Port it came in on (for an ICMP error if resolution fails).
    pub ingress: PortId,
    /// Port it must leave by.
    pub port: PortId,
    /// The neighbour to resolve.
    pub next_hop: Ipv4Addr,
    /// The frame, TTL already decremented, MACs as received.
    pub frame: Vec<u8>,
}

/// Requests to the ARP thread from the control thread.
#[derive(Debug)]
pub enum Control {
    /// Replace the static neighbours (on reload).
    StaticNeighbors(Vec<(Ipv4Addr, MacAddr)>),
    /// Change the number of packets held per unresolved neighbour (on reload).
    GleanQueue(usize),
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
        ]
        .iter()
        .map(|(n, c)| ((*n).to_owned(), c.get()))
        .collect()
    }
}

/// A port as the ARP thread needs it.
#[derive(Debug, Clone)]
pub struct ArpPort {
    /// Interface index.
    pub ifindex: u32,
    /// Its MAC.
    pub mac: MacAddr,
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

/// A packet socket bound to one interface for ARP.
#[derive(Debug)]
struct PacketSocket {
    fd: std::os::fd::OwnedFd,
}

impl PacketSocket {
    fn open(ifindex: u32) -> io::Result<PacketSocket> {
        use std::os::fd::FromRawFd;
        let proto = ETH_P_ARP.to_be();
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, i32::from(proto))
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh socket that nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        use std::os::fd::AsRawFd;
        // SAFETY: `addr` is a valid sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { fd })
    }

    fn raw(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Receives one frame that arrived on the interface (not one it sent). None: nothing left.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            // SAFETY: sockaddr_ll is plain data; all-zero is valid.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` and `from` are writable for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.raw(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(n as usize);
        }
    }

    fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is readable for its length; the socket is bound to its interface.
        let n = unsafe { libc::send(self.raw(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
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
}

struct ArpThread {
    ports: Vec<ArpPort>,
    sockets: Vec<PacketSocket>,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    counters: Arc<ArpCounters>,
    cfg: ArpConfig,
    pending: HashMap<Ipv4Addr, Pending>,
    meta: HashMap<Ipv4Addr, Meta>,
    statics: HashSet<Ipv4Addr>,
    requests: TokenBucket,
    icmp: RouterState,
    clock: Clock,
}

/// Opens the packet sockets and starts the ARP thread.
#[allow(clippy::too_many_arguments, reason = "the thread's whole world, handed over once")]
pub fn spawn(
    ports: Vec<ArpPort>,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Arc<NeighborTable>,
    statics: Vec<(Ipv4Addr, MacAddr)>,
    cfg: ArpConfig,
    counters: Arc<ArpCounters>,
    glean: Receiver<GleanMsg>,
    control: Receiver<Control>,
    stop: Arc<AtomicBool>,
    clock: Clock,
) -> io::Result<JoinHandle<()>> {
    let sockets = ports.iter().map(|p| PacketSocket::open(p.ifindex)).collect::<io::Result<Vec<_>>>()?;
    let mut t = ArpThread {
        ports,
        sockets,
        tables,
        neighbors,
        counters,
        cfg,
        pending: HashMap::new(),
        meta: HashMap::new(),
        statics: HashSet::new(),
        requests: TokenBucket::new(100, 20),
        icmp: RouterState::new(cfg.icmp_rate, cfg.icmp_burst),
        clock,
    };
    t.set_statics(statics);
    std::thread::Builder::new().name("xfwd-arp".into()).spawn(move || t.run(&glean, &control, &stop))
}

impl ArpThread {
    fn run(&mut self, glean: &Receiver<GleanMsg>, control: &Receiver<Control>, stop: &AtomicBool) {
        let mut buf = vec![0u8; 2048];
        let mut last_timers = 0u64;
        while !stop.load(Ordering::Relaxed) {
            self.wait();
            for p in 0..self.sockets.len() {
                while let Some(n) = self.sockets[p].recv(&mut buf) {
                    self.on_arp(PortId(p as u8), &buf[..n]);
                }
            }
            while let Ok(m) = glean.try_recv() {
                self.on_glean(m);
            }
            while let Ok(c) = control.try_recv() {
                match c {
                    Control::StaticNeighbors(list) => self.set_statics(list),
                    Control::GleanQueue(n) => self.cfg.glean_queue = n.max(1),
                }
            }
            let now = self.clock.now_ms();
            if now >= last_timers + 50 || !self.pending.is_empty() {
                self.timers(now);
                last_timers = now;
            }
        }
    }

    fn wait(&self) {
        let mut pfds: Vec<libc::pollfd> =
            self.sockets.iter().map(|s| libc::pollfd { fd: s.raw(), events: libc::POLLIN, revents: 0 }).collect();
        // SAFETY: `pfds` is a valid array of initialised pollfd over our open sockets.
        let _ = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, POLL_MS) };
    }

    fn send(&self, port: PortId, frame: &[u8]) {
        if let Some(s) = self.sockets.get(port.index()) {
            if s.send(frame).is_err() {
                self.counters.send_errors.inc();
            }
        }
    }

    fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr, port: PortId, now: u64) {
        if self.statics.contains(&ip) {
            return;
        }
        let known = self.neighbors.lookup(ip);
        match self.neighbors.insert(ip, mac, port, false) {
            Ok(()) => {
                if known.is_none() {
                    self.counters.learnt.inc();
                }
                self.meta.insert(ip, Meta { confirmed_ms: now, probes: 0, next_probe_ms: 0 });
            }
            Err(_) => self.counters.table_full.inc(),
        }
        if let Some(p) = self.pending.remove(&ip) {
            let mut p = p;
            for (_, mut frame) in p.queue.drain(..) {
                frame[0..6].copy_from_slice(&mac.0);
                frame[6..12].copy_from_slice(&self.ports[port.index()].mac.0);
                self.send(port, &frame);
                self.counters.glean_sent.inc();
            }
        }
    }

    fn on_arp(&mut self, port: PortId, frame: &[u8]) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else { return };
        if eth.ethertype() != ETH_P_ARP {
            return;
        }
        let Ok(a) = ArpPacket::new_checked(&frame[14..]) else { return };
        let (sha, spa, tpa) = (a.sha(), a.spa(), a.tpa());
        if sha.is_multicast() || sha.is_zero() {
            return;
        }
        let tables = self.tables.load();
        let Some(spec) = tables.ports.get(port.index()) else { return };
        let ours = spec.addrs.iter().any(|&(addr, _)| addr == tpa);
        let on_link = connected_to(&tables.ports, spa).is_some_and(|(p, _)| p == port);
        let now = self.clock.now_ms();
        match a.op() {
            arp::OP_REQUEST => {
                self.counters.requests_received.inc();
                if ours {
                    let mut out = [0u8; 60];
                    let me = self.ports[port.index()].mac;
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

    fn on_glean(&mut self, m: GleanMsg) {
        if let Some(n) = self.neighbors.lookup(m.next_hop).filter(|n| n.port == m.port) {
            // Resolved since the worker looked.
            let mut frame = m.frame;
            frame[0..6].copy_from_slice(&n.mac.0);
            frame[6..12].copy_from_slice(&self.ports[m.port.index()].mac.0);
            self.send(m.port, &frame);
            self.counters.glean_sent.inc();
            return;
        }
        let now = self.clock.now_ms();
        let cap = self.cfg.glean_queue;
        let full = self.pending.len() >= self.cfg.max_pending;
        match self.pending.get_mut(&m.next_hop) {
            Some(p) if p.queue.len() < cap => {
                p.queue.push_back((m.ingress, m.frame));
                self.counters.glean_queued.inc();
            }
            Some(_) => self.counters.glean_dropped.inc(),
            None if full => self.counters.glean_dropped.inc(),
            None => {
                let mut queue = VecDeque::with_capacity(cap.min(64));
                queue.push_back((m.ingress, m.frame));
                self.counters.glean_queued.inc();
                self.pending.insert(m.next_hop, Pending { port: m.port, queue, tries: 0, next_ms: now });
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
        let spa = connected_to(&tables.ports, target)
            .filter(|(p, _)| *p == port)
            .map(|(_, a)| a)
            .or_else(|| tables.ports.get(port.index()).and_then(|s| s.addrs.first().map(|a| a.0)))
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let me = self.ports[port.index()].mac;
        let mut out = [0u8; 60];
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

    fn timers(&mut self, now: u64) {
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
        // Entries to confirm or expire.
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
            let probes = self.meta.get(&ip).map_or(0, |m| m.probes);
            if probes >= MAX_PROBES {
                self.neighbors.remove(ip);
                self.meta.remove(&ip);
                self.counters.expired.inc();
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
            let a = icmp_error(
                &frame,
                ingress,
                &tables,
                &self.neighbors,
                &mut self.icmp,
                now,
                &mut scratch,
                Reason::NoRoute,
                icmp::DEST_UNREACHABLE,
                icmp::CODE_HOST_UNREACHABLE,
                0,
            );
            if let Action::Reply { port, len, .. } = a {
                self.send(port, &scratch[..usize::from(len)]);
                self.counters.host_unreachable_sent.inc();
            }
        }
    }

    fn set_statics(&mut self, list: Vec<(Ipv4Addr, MacAddr)>) {
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
                    frame[0..6].copy_from_slice(&mac.0);
                    frame[6..12].copy_from_slice(&self.ports[port.index()].mac.0);
                    self.send(port, &frame);
                }
            }
        }
    }
}
