//! ARP, as the IPv4 family of the neighbour resolver ([`super::engine`]): it answers ARP for
//! the box's addresses and resolves IPv4 next hops.
//!
//! Behaviour, as Linux does it (with `arp_accept=0`):
//! - a request for one of the box's addresses on the port it belongs to is answered, and its
//!   sender learnt when it is on a connected subnet of that port;
//! - a reply or gratuitous ARP updates an existing entry; it creates one only when we asked;
//! - requests, retries, probes, expiry and the packets waiting for a next hop are the
//!   resolver's (the same for both families); a next hop that never answers gets the packets
//!   that waited for it answered with ICMP Host Unreachable.

use std::net::{IpAddr, Ipv4Addr};

use super::engine::{Family, Resolver};
use crate::action::{Action, SCRATCH_LEN};
use crate::l3::family::{ErrorEnv, RouterState};
use crate::l3::neighbors::{Key6, NeighborTable6};
use crate::l3::router::{icmp_error, IcmpError};
use crate::l3::tables::{connected_to, NhKind, RouterTables};
use crate::l3::NeighborTable;
use crate::wire::ethernet::{self, ETHERTYPE_ARP};
use crate::wire::{arp, ArpPacket, EthernetFrame, MacAddr};
use crate::PortId;

pub use super::engine::{
    ArpConfig, ArpCounters, Glean, MAX_PROBES, MAX_TRIES, REACHABLE_MS, REQUEST_BURST, REQUEST_RATE, RETRANS_MS,
};

/// IPv4's family: ARP requests and ICMP Host Unreachable.
#[derive(Debug)]
pub struct Arp;

/// The ARP engine: the resolver for IPv4.
pub type ArpEngine = Resolver<Arp>;

impl Family for Arp {
    type Addr = Ipv4Addr;
    type Peer = Key6;

    fn from_ip(a: IpAddr) -> Option<Ipv4Addr> {
        match a {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }
    }

    fn request(
        tables: &RouterTables,
        port: PortId,
        me: MacAddr,
        target: Ipv4Addr,
        to: Option<MacAddr>,
        out: &mut Vec<u8>,
    ) {
        // The address Linux would pick: the box's address on the subnet of the route to the
        // target (for a `dev` route, the port's first address).
        let spa = connected_to(&tables.ports, target)
            .filter(|(p, _)| *p == port)
            .map(|(_, a)| a)
            .or_else(|| tables.route(target).filter(|nh| nh.port == port).map(|nh| nh.src))
            .or_else(|| tables.ports.get(port.index()).and_then(|s| s.addrs.first().map(|a| a.0)))
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let mut frame = [0u8; ethernet::MIN_FRAME_LEN];
        let n = arp::write_frame(
            &mut frame,
            to.unwrap_or(MacAddr::BROADCAST),
            me,
            arp::OP_REQUEST,
            me,
            spa,
            MacAddr([0; 6]),
            target,
        );
        out.extend_from_slice(&frame[..n]);
    }

    fn unreachable(
        frame: &[u8],
        ingress: PortId,
        tables: &RouterTables,
        (neighbors, neighbors6): (&NeighborTable, &NeighborTable6),
        state: &mut RouterState,
        now: u64,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let mut env = ErrorEnv { ingress, tables, neighbors, neighbors6, state, now_ms: now, scratch };
        icmp_error(frame, &mut env, IcmpError::HOST_UNREACHABLE)
    }

    fn connected_port(tables: &RouterTables, a: Ipv4Addr) -> Option<PortId> {
        connected_to(&tables.ports, a).map(|(p, _)| p)
    }
}

impl Resolver<Arp> {
    /// Announces the box's addresses on `port` with its current MAC (a gratuitous ARP request
    /// per address, RFC 5227 section 3): after the port's MAC changed, the neighbours' caches
    /// move to the new one instead of sending to the old until they expire.
    pub fn announce(&mut self, port: PortId) {
        let tables = self.tables.load_full();
        let Some(spec) = tables.ports.get(port.index()) else { return };
        let me = spec.mac;
        for &(a, _) in &spec.addrs {
            let mut out = [0u8; ethernet::MIN_FRAME_LEN];
            let n = arp::write_frame(&mut out, MacAddr::BROADCAST, me, arp::OP_REQUEST, me, a, MacAddr([0; 6]), a);
            self.send(port, &out[..n]);
            self.counters.announcements_sent.inc();
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
                    let me = self.mac(port);
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
        let asked = self.pending.contains_key(&(spa, port));
        let known = self.neighbors.lookup(spa, port).is_some();
        if !spa.is_unspecified()
            && on_link
            && (asked || known || (a.op() == arp::OP_REPLY && ours && self.meta.contains_key(&(spa, port))))
        {
            self.learn(spa, sha, port, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arc_swap::ArcSwap;
    use std::sync::Arc;

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
        let ports = crate::l3::testing::reference_ports();
        let tables = Arc::new(ArcSwap::from_pointee(RouterTables::build(ports, &[]).unwrap()));
        let neighbors = Arc::new(NeighborTable::new(capacity));
        let counters = Arc::new(ArpCounters::default());
        let cfg = ArpConfig { glean_queue, max_pending: 64, icmp_rate: 0, icmp_burst: 10 };
        let e = ArpEngine::new(
            tables,
            (Arc::clone(&neighbors), Arc::new(NeighborTable6::new6(8))),
            cfg,
            Arc::clone(&counters),
        );
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
        assert_eq!(n.lookup(ip("198.18.30.2"), P4).map(|x| (x.mac, x.port)), Some((H2, P4)));
        assert_eq!((c.replies_sent.get(), c.learnt.get()), (1, 1));
        // Not ours, or ours but on the other port: no answer, nothing learnt.
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H1, "198.18.30.9", ZERO, "198.18.30.77"), 0);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H1, "198.18.30.9", ZERO, "198.18.10.2"), 0);
        assert!(e.take_output().is_empty());
        assert_eq!(n.lookup(ip("198.18.30.9"), P4), None);
    }

    #[test]
    fn a_port_whose_mac_changed_answers_with_the_new_one_and_announces_it() {
        let (mut e, _, c) = engine(64, 4);
        const NEW: MacAddr = MacAddr([2, 0, 0, 0, 0x44, 0x45]);
        let mut ports = e.tables.load().ports.clone();
        ports[P4.index()].mac = NEW;
        e.tables.store(Arc::new(RouterTables::build(ports, &[]).unwrap()));
        e.announce(P4);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        let a = ip("198.18.30.1");
        assert_eq!(parse(&out[0]), (P4, MacAddr::BROADCAST, arp::OP_REQUEST, NEW, a, ZERO, a), "RFC 5227 announcement");
        assert_eq!(c.announcements_sent.get(), 1);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.2", ZERO, "198.18.30.1"), 0);
        assert_eq!(parse(&e.take_output()[0]), (P4, H2, arp::OP_REPLY, NEW, a, H2, ip("198.18.30.2")));
    }

    #[test]
    fn gratuitous_arp_updates_an_existing_entry_and_creates_none() {
        let (mut e, n, _) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.2", ZERO, "198.18.30.1"), 0);
        let moved = MacAddr([2, 0, 0, 0, 0, 0x22]);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, moved, "198.18.30.2", ZERO, "198.18.30.2"), 10);
        assert_eq!(n.lookup(ip("198.18.30.2"), P4).unwrap().mac, moved);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, moved, "198.18.30.3", ZERO, "198.18.30.3"), 10);
        assert_eq!(n.lookup(ip("198.18.30.3"), P4), None);
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
        assert!(n.lookup(ip("198.18.30.2"), P4).is_some());
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
        assert_eq!(n.lookup(ip("198.18.30.99"), P4), None);
        assert!(!e.resolving());
    }

    #[test]
    fn with_the_kernel_resolving_requests_become_asks_and_its_entries_are_used() {
        let (mut e, n, c) = engine(64, 4);
        e.resolve_by_kernel();
        let glean = |e: &mut ArpEngine, dst: &str, now| {
            e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip(dst)), frame: &udp_from_h1(dst) }, now)
        };
        glean(&mut e, "198.18.30.7", 0);
        assert!(e.take_output().is_empty(), "no ARP of its own");
        assert_eq!(e.take_asks(), vec![(P4, ip("198.18.30.7"))]);
        // The kernel resolves it: the waiting frame leaves, rewritten.
        let gw = MacAddr([2, 0, 0, 0, 0, 7]);
        e.kernel_entry(ip("198.18.30.7"), P4, Some(gw), false, 100);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].0, &out[0].1[0..6]), (P4, &gw.0[..]));
        assert_eq!(n.lookup(ip("198.18.30.7"), P4).map(|x| x.mac), Some(gw));
        // Kept fresh: asked again every reachable time, never expired by xfwd.
        e.timers(100 + REACHABLE_MS - 1);
        assert!(e.take_asks().is_empty());
        e.timers(100 + REACHABLE_MS);
        assert_eq!(e.take_asks(), vec![(P4, ip("198.18.30.7"))]);
        e.timers(100 + 10 * REACHABLE_MS);
        assert!(n.lookup(ip("198.18.30.7"), P4).is_some());
        assert!(e.take_output().is_empty());
        assert_eq!(e.take_asks().len(), 1);
        // The kernel drops it: so does xfwd.
        e.kernel_entry(ip("198.18.30.7"), P4, None, false, 200);
        assert_eq!(n.lookup(ip("198.18.30.7"), P4), None);
        // The kernel gives up: what waited gets Host Unreachable at once.
        glean(&mut e, "198.18.30.8", 300);
        assert_eq!(e.take_asks().len(), 1);
        e.kernel_entry(ip("198.18.30.8"), P4, None, true, 400);
        let out = e.take_output();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1[12..14], [0x08, 0x00], "an ICMP error");
        assert_eq!((c.unresolved.get(), c.host_unreachable_sent.get()), (1, 1));
        assert!(!e.resolving());
        // Entries the kernel knew already are used, and refreshed too.
        e.kernel_entry(ip("198.18.30.9"), P4, Some(gw), false, 500);
        e.timers(500 + 2 * REACHABLE_MS);
        assert!(e.take_asks().iter().any(|a| a.1 == ip("198.18.30.9")));
        // After a full dump, what the kernel no longer holds goes.
        e.kernel_prune(&[(ip("198.18.30.7"), P4)].into_iter().collect());
        assert_eq!(n.lookup(ip("198.18.30.9"), P4), None);
    }

    #[test]
    fn a_gateway_claimed_on_another_port_stays_on_its_own_with_its_waiting_frames() {
        // Kernel mode, the attack of a spoofed `ARP who-has <box's eth5 address> tell <G>`
        // from a host on eth5: the kernel makes a second entry (G, eth5, host's MAC) and
        // notifies. G's routes leave by eth4: their frames wait for (G, eth4), never leave by
        // eth5, and G on eth4 is not moved, renewed or removed by what happens on eth5.
        let (mut e, n, _) = engine(64, 4);
        e.resolve_by_kernel();
        let (g, spoofer) = (ip("198.18.30.7"), H1);
        e.on_glean(Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(g), frame: &udp_from_h1("198.19.1.1") }, 0);
        assert_eq!(e.take_asks(), vec![(P4, g)]);
        e.kernel_entry(g, P5, Some(spoofer), false, 10);
        assert!(e.take_output().is_empty(), "the frames waiting for G on eth4 stay");
        assert_eq!((n.lookup(g, P4), n.lookup(g, P5).map(|x| x.mac)), (None, Some(spoofer)));
        // G answers on eth4: its frames leave there, to it.
        e.kernel_entry(g, P4, Some(H2), false, 20);
        let out = e.take_output();
        assert_eq!(out.iter().map(|(p, f)| (*p, &f[0..6])).collect::<Vec<_>>(), [(P4, &H2.0[..])]);
        // The claim renewed, then dropped by the kernel, then a dump without it: G stays.
        e.kernel_entry(g, P5, Some(spoofer), false, 30);
        assert_eq!(n.lookup(g, P4).map(|x| x.mac), Some(H2));
        e.kernel_entry(g, P5, None, true, 40);
        assert_eq!(n.lookup(g, P4).map(|x| x.mac), Some(H2));
        e.kernel_entry(g, P5, Some(spoofer), false, 50);
        e.kernel_prune(&[(g, P4)].into_iter().collect());
        assert_eq!((n.lookup(g, P4).map(|x| x.mac), n.lookup(g, P5)), (Some(H2), None));
        // And the other way: G gone from eth4 leaves a claim on eth5 unused by eth4's routes.
        e.kernel_entry(g, P5, Some(spoofer), false, 60);
        e.kernel_entry(g, P4, None, false, 70);
        assert_eq!(n.lookup(g, P4), None);
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
        assert!(n.lookup(ip("198.18.30.2"), P4).is_some(), "confirmed by its reply");
        assert_eq!(n.lookup(ip("198.18.30.3"), P4), None, "three unanswered probes remove it");
        assert_eq!(c.expired.get(), 1);
        e.timers(1_000_000);
        assert!(n.lookup(ip("198.18.30.50"), P4).is_some_and(|x| x.is_static), "static entries never expire");
    }

    #[test]
    fn entries_learnt_in_passing_are_not_probed_and_expire() {
        let (mut e, n, c) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.2", ZERO, "198.18.30.1"), 0);
        e.take_output();
        e.timers(REACHABLE_MS + 1);
        assert!(e.take_output().is_empty(), "no probe for a host that only asked");
        assert!(n.lookup(ip("198.18.30.2"), P4).is_some());
        e.timers(2 * REACHABLE_MS + 1);
        assert_eq!(n.lookup(ip("198.18.30.2"), P4), None);
        assert_eq!(c.probes_sent.get(), 0);
    }

    #[test]
    fn a_dev_route_neighbour_off_every_subnet_resolves() {
        let ports = crate::l3::testing::reference_ports();
        let statics = [("172.16.0.0/12".parse().unwrap(), crate::l3::tables::RouteTarget::Dev(P4))];
        let tables = Arc::new(ArcSwap::from_pointee(RouterTables::build(ports, &statics).unwrap()));
        let n = Arc::new(NeighborTable::new(64));
        let cfg = ArpConfig { glean_queue: 4, max_pending: 64, icmp_rate: 0, icmp_burst: 10 };
        let peer = Arc::new(NeighborTable6::new6(8));
        let mut e = ArpEngine::new(tables, (Arc::clone(&n), peer), cfg, Arc::new(ArpCounters::default()));
        e.on_glean(
            Glean { ingress: P5, port: P4, next_hop: IpAddr::V4(ip("172.16.1.1")), frame: &udp_from_h1("172.16.1.1") },
            0,
        );
        let out = e.take_output();
        assert_eq!(parse(&out[0]).4, ip("198.18.30.1"), "asked from the port's address");
        e.on_arp(P4, &arp_frame(arp::OP_REPLY, H2, "172.16.1.1", A4, "198.18.30.1"), 5);
        assert_eq!(n.lookup(ip("172.16.1.1"), P4).map(|x| x.mac), Some(H2));
        assert_eq!(e.take_output().len(), 1, "the waiting frame left");
    }

    #[test]
    fn a_sender_claiming_our_address_is_a_conflict_not_a_neighbour() {
        let (mut e, n, c) = engine(64, 4);
        e.on_arp(P4, &arp_frame(arp::OP_REQUEST, H2, "198.18.30.1", ZERO, "198.18.30.1"), 0);
        assert_eq!(n.lookup(ip("198.18.30.1"), P4), None);
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
