//! The decision a worker applies to each frame: the trait, and the bridge's and the router's
//! decisions behind it (the decisions themselves live in [`crate::l2`] and [`crate::l3`]).

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::action::{Action, SCRATCH_LEN};
use crate::l2::{self, Fdb, Learn};
use crate::l3::{self, NeighborTable, NeighborTable6, RouterState, RouterTables, TokenBucket};
use crate::resolve::glean::GleanSender;
use crate::stats::{PortCounters, QueueCounters};
use crate::time::Seconds;
use crate::PortId;

/// The decision a worker applies to each received frame.
pub trait Decide: Send {
    /// What to do with `frame`, received on `ingress` at `now_ms` (milliseconds of the
    /// worker's [`crate::time::Clock`]). May rewrite the frame in place, or build an answer in `scratch`
    /// ([`Action::Reply`]). `counters` are the ingress port's, for outcomes that are not drops.
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action;

    /// Takes a copy of a frame, received on `ingress`, whose next hop `next_hop` on `port` is
    /// unresolved ([`Action::Glean`]). Returns false when it could not be queued (the frame is
    /// then dropped as [`crate::Reason::GleanQueueFull`]).
    fn glean(&mut self, _frame: &[u8], _ingress: PortId, _port: PortId, _next_hop: IpAddr) -> bool {
        false
    }

    /// Called once per round with the queue's counters, for state the decision keeps itself.
    fn publish(&mut self, _counters: &QueueCounters) {}

    /// Called before the worker sleeps: lets go of what others wait for while it sleeps (the
    /// router's tables, which the writer of the kernel's routes reuses once no reader holds
    /// them: see `routes::incremental`).
    fn sleeping(&mut self) {}

    /// How many frames ahead of the decision [`Decide::prefetch`] runs (0: never). Far enough
    /// for a table line to arrive from memory while the frames before it are decided, near
    /// enough not to overrun the CPU's outstanding-miss slots (64 at once measured worst).
    const PREFETCH_DISTANCE: usize = 0;

    /// Starts the table reads `decide` will make for `frame`, [`Decide::PREFETCH_DISTANCE`]
    /// frames before its decision (a hint: no effect on results).
    fn prefetch(&mut self, _frame: &[u8]) {}

    /// Whether a frame of `len` bytes may leave by `port` when flooded (a decision that
    /// checks sizes itself for what it forwards to one port; the router builds no floods).
    fn fits(&self, _len: usize, _port: usize) -> bool {
        true
    }
}

/// The learning bridge ([`crate::l2::bridge`]) as a worker decision. A frame longer than its
/// egress port's MTU allows (the MTU, an Ethernet header and one VLAN tag, as the kernel's
/// bridge checks) is not sent there: dropped as [`crate::Reason::TooBigToForward`].
#[derive(Debug, Clone)]
pub struct BridgeDecide {
    /// The FDB shared by all workers.
    pub fdb: Arc<Fdb>,
    /// The longest frame each port sends, by port: followed at run time
    /// ([`crate::io::Forwarder::port_changed`]).
    pub frame_max: Arc<[AtomicU32]>,
    /// The ports' settings (learning, flooding, isolation).
    pub policies: l2::Policies,
}

impl Decide for BridgeDecide {
    // Measured (benches/bridge.rs): 4 ahead gains a tenth over 64k stations and costs a
    // sixth over 4k, where the table is in cache and the prefetch's hashing is pure overhead.
    const PREFETCH_DISTANCE: usize = 4;

    #[inline]
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        counters: &PortCounters,
        _scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let v = l2::decide(frame, ingress, &self.fdb, Seconds::from_ms(now_ms), &self.policies);
        if v.learn == Some(Learn::Full) {
            counters.fdb_full.inc();
        }
        match v.action {
            Action::Forward(out) if !self.fits(frame.len(), out.index()) => {
                Action::Drop(crate::Reason::TooBigToForward)
            }
            a => a,
        }
    }

    #[inline]
    fn prefetch(&mut self, frame: &[u8]) {
        l2::prefetch(frame, &self.fdb);
    }

    #[inline]
    fn fits(&self, len: usize, port: usize) -> bool {
        self.frame_max.get(port).is_none_or(|m| len <= m.load(Relaxed) as usize)
    }
}

/// Whether an untagged frame says it carries IPv6 (the decision checks the rest).
#[inline(always)]
fn is_ipv6(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&crate::wire::ethernet::ETHERTYPE_IPV6.to_be_bytes()[..])
}

/// The router ([`crate::l3::router`] for IPv4, [`crate::l3::router6`] for IPv6, by EtherType)
/// as a worker decision.
pub struct RouterDecide {
    /// The current tables; a reload swaps them, and the next frame sees the new ones.
    pub tables: Arc<arc_swap::ArcSwap<RouterTables>>,
    /// The tables this worker holds (`None` while it sleeps).
    pub cache: Option<arc_swap::Cache<Arc<arc_swap::ArcSwap<RouterTables>>, Arc<RouterTables>>>,
    /// The neighbour table (read only: the ARP thread writes it).
    pub neighbors: Arc<NeighborTable>,
    /// The IPv6 neighbour table (read only: the ARP thread writes it).
    pub neighbors6: Arc<NeighborTable6>,
    /// This worker's ICMP rate limit and IP identification.
    pub state: RouterState,
    /// Where frames with unresolved next hops go.
    pub glean: GleanSender,
    /// Number of parts (workers and the ARP thread) the router's ICMP rate and burst are
    /// divided among ([`l3::icmp_share`]).
    pub icmp_parts: u32,
}

impl std::fmt::Debug for RouterDecide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterDecide").finish_non_exhaustive()
    }
}

impl Decide for RouterDecide {
    // Measured (benches/router.rs, 1M prefixes): 16 ahead, 42 Mpps over 1M random
    // destinations against 24 with the whole batch prefetched first and 11 without.
    const PREFETCH_DISTANCE: usize = 16;

    #[inline]
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        _counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let t = self.cache.get_or_insert_with(|| arc_swap::Cache::new(Arc::clone(&self.tables))).load();
        if is_ipv6(frame) {
            return l3::decide::<l3::V6>(
                frame,
                ingress,
                t,
                &self.neighbors,
                &self.neighbors6,
                &mut self.state,
                now_ms,
                scratch,
            );
        }
        l3::decide::<l3::V4>(frame, ingress, t, &self.neighbors, &self.neighbors6, &mut self.state, now_ms, scratch)
    }

    #[inline]
    fn prefetch(&mut self, frame: &[u8]) {
        let t = self.cache.get_or_insert_with(|| arc_swap::Cache::new(Arc::clone(&self.tables))).load();
        if is_ipv6(frame) {
            l3::prefetch6(frame, t);
        } else {
            l3::prefetch(frame, t);
        }
    }

    fn glean(&mut self, frame: &[u8], ingress: PortId, port: PortId, next_hop: IpAddr) -> bool {
        self.glean.send(frame, ingress, port, next_hop)
    }

    fn sleeping(&mut self) {
        self.cache = None;
    }

    fn publish(&mut self, counters: &QueueCounters) {
        counters.icmp_rate_limited.set(self.state.icmp_rate_limited);
        // A reload may carry new ICMP limits and more next hops: they travel with the tables,
        // and are taken in here, between batches, where the decision's state may allocate.
        let t = self.cache.get_or_insert_with(|| arc_swap::Cache::new(Arc::clone(&self.tables))).load();
        let share = l3::icmp_share(t.icmp_rate, t.icmp_burst, self.icmp_parts);
        if share != self.state.icmp_limit.config() {
            self.state.icmp_limit = TokenBucket::new(share.0, share.1);
        }
        self.state.fit(t);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    #[test]
    fn the_bridge_sends_no_frame_longer_than_its_egress_ports_mtu_allows_and_follows_a_new_mtu() {
        let mut d = BridgeDecide {
            fdb: Arc::new(Fdb::new(16, 300)),
            frame_max: vec![AtomicU32::new(1518), AtomicU32::new(1418)].into(),
            policies: l2::Policies::uniform(2),
        };
        let counters = PortCounters::default();
        let mut scratch = [0u8; SCRATCH_LEN];
        let (h1, h2) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let frame = |dst: [u8; 6], src: [u8; 6], len: usize| {
            let mut f = dst.to_vec();
            f.extend_from_slice(&src);
            f.extend_from_slice(&[0x88, 0xb5]);
            f.resize(len, 0xEE);
            f
        };
        // h2 is learnt on port 1 (MTU 1400: 1418-byte frames at most, tag included).
        let mut learn = frame(h1, h2, 60);
        assert_eq!(d.decide(&mut learn, PortId(1), 0, &counters, &mut scratch), Action::Flood(l2::PortSet(0b01)));
        let mut at_limit = frame(h2, h1, 1418);
        assert_eq!(d.decide(&mut at_limit, PortId(0), 0, &counters, &mut scratch), Action::Forward(PortId(1)));
        let mut over = frame(h2, h1, 1419);
        assert_eq!(
            d.decide(&mut over, PortId(0), 0, &counters, &mut scratch),
            Action::Drop(crate::Reason::TooBigToForward)
        );
        // Port 0 takes 1518 bytes; floods are checked port by port.
        let mut back = frame(h1, h2, 1518);
        assert_eq!(d.decide(&mut back, PortId(1), 0, &counters, &mut scratch), Action::Forward(PortId(0)));
        assert!(d.fits(1518, 0) && !d.fits(1519, 0) && !d.fits(1419, 1));
        // The port's MTU raised at run time: the same frame now passes.
        d.frame_max[1].store(crate::io::frame_max(1500), Ordering::Relaxed);
        assert_eq!(d.decide(&mut over, PortId(0), 0, &counters, &mut scratch), Action::Forward(PortId(1)));
    }
}
