//! The router decision's steps that both IP families share, and the trait that says what
//! differs between them.
//!
//! Where a frame goes: a worker takes it from its RX ring and hands it to
//! `io::frames::worker::decide` (`RouterDecide`), which picks the family by EtherType and calls
//! [`decide`] for [`super::V4`] or [`super::V6`]. The decision has three steps: [`arrived`]
//! here (the frame is for the ingress port's MAC, of the family's EtherType), the family's
//! header ([`IpFamily::decide`]: IPv4's checksum and options in [`super::router`], IPv6's
//! jumbograms in [`super::router6`], each family's martians), then [`route`] here (the FIB
//! lookup, the equal-cost pick, the TTL or hop limit, the scope, the egress MTU, the
//! gateway-MAC cache, the MAC rewrite and the trim). The [`Action`] goes back to the worker,
//! which puts the frame on the egress port's TX ring, sends the answer built in the scratch
//! buffer, gleans the frame to the neighbour resolver or drops it, and counts each by its
//! [`Action`] and [`Reason`].
//!
//! Why [`IpFamily`] has this shape: it is the list of the points where the families part past
//! the header, and no more. IPv4 routes have broadcast next hops and IPv6 gateways (RFC 5549),
//! so what a next hop kind does is the family's ([`IpFamily::neighbor`],
//! [`IpFamily::not_forwarded`]); only IPv6 has a scope the router enforces
//! ([`IpFamily::beyond_scope`]); a packet too big is fragmentation's business in IPv4 and
//! Packet Too Big in IPv6 ([`IpFamily::too_big`]); the TTL carries a checksum and the hop
//! limit none ([`IpFamily::decrement`]); IPv6 keys link-local neighbours by port
//! ([`IpFamily::resolve`]); and each has its ICMP ([`IpFamily::error`]). The families are
//! types with no values and every method a forwarded frame goes through is
//! `#[inline(always)]`, so that [`route`] is compiled once per family with nothing of the
//! trait left at run time.
//!
//! The header's fields go to [`route`] by value, from inside [`IpFamily::decide`], rather
//! than back to a caller: a method that returned them or the frame's fate
//! (`Result<Header, Action>`) kept them in memory, and cost the IPv4 forward path 9
//! instructions a frame and IPv6's 33 (callgrind, `examples/decision_cost.rs`); passed on,
//! they stay in registers. Likewise [`IpFamily::neighbor`] answers a small `Option`, and the
//! rare next hops that do not forward go to [`IpFamily::not_forwarded`]. The
//! alternative to a trait, one enum over both families' headers and next hops, would branch
//! on the family at every step.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::fib::NhIndex;
use super::neighbors::{NeighborTable, NeighborTable6};
use super::tables::{FamilyTables, Hop, NextHop4, NextHop6, RouterTables, Special};
use crate::action::{Action, SCRATCH_LEN};
use crate::reason::Reason;
use crate::wire::{ethernet, EthernetFrame, MacAddr};
use crate::PortId;

/// The fields of a packet's header the shared sequence reads, once the family has checked it.
#[derive(Debug, Clone, Copy)]
pub struct Header<A> {
    /// Source address.
    pub src: A,
    /// Destination address.
    pub dst: A,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// The IP packet's length, header included.
    pub ip_len: usize,
    /// IPv4's Don't Fragment (IPv6 has none: routers never fragment it).
    pub dont_frag: bool,
}

/// What the router decision does differently for one IP family, past the header (see the
/// module documentation for why these and no others).
pub trait IpFamily {
    /// The family's addresses.
    type Addr: Copy;
    /// The family's next hops.
    type NextHop: Hop;
    /// The family's FIB.
    type Fib: 'static;
    /// The family's prefixes (of its routes, for display).
    type Prefix: 'static;
    /// An ICMP error of the family.
    type Error: Copy;
    /// The EtherType of its frames.
    const ETHERTYPE: u16;
    /// The error for a destination without a route.
    const NO_ROUTE: Self::Error;
    /// The error for a TTL or hop limit that ran out.
    const TTL_EXCEEDED: Self::Error;
    /// The error for a route of the kernel's `unreachable` type ([`Special::answer`]).
    const UNREACHABLE_ROUTE: Self::Error;
    /// The error for a `prohibit` route.
    const PROHIBITED: Self::Error;
    /// The error for a route out of an interface xfwd does not own.
    const FOREIGN_EGRESS: Self::Error;
    /// The error for a kernel route xfwd cannot forward.
    const UNSUPPORTED: Self::Error;

    /// The family's part of the decision before [`route`]: checks the IP header of `frame`
    /// (whose Ethernet header [`arrived`] checked) and its addresses, then hands the fields
    /// [`route`] reads to it, by value.
    fn decide(frame: &mut [u8], env: &mut ErrorEnv<'_>) -> Action;
    /// The family's part of `t`: its FIB, next hops, groups and routes.
    fn tables(t: &RouterTables) -> &Family<Self>;
    /// `fib`'s next hop index for `dst`.
    fn lookup(fib: &Self::Fib, dst: Self::Addr) -> Option<NhIndex>;
    /// The neighbour a packet to `dst` goes to through `nh` (a plain next hop); `None` for a
    /// next hop that does not forward, which [`IpFamily::not_forwarded`] answers.
    fn neighbor(nh: &Self::NextHop, dst: Self::Addr) -> Option<Self::Addr>;
    /// What becomes of a frame whose next hop does not forward: the box's own address, a
    /// broadcast route, a route that is not forwarded.
    fn not_forwarded(frame: &mut [u8], env: &mut ErrorEnv<'_>, nh: &Self::NextHop) -> Action;
    /// The error for a packet from `src` that would leave the scope of its source address by
    /// `egress`.
    fn beyond_scope(src: Self::Addr, egress: PortId, ingress: PortId) -> Option<Self::Error>;
    /// What becomes of a packet longer than `mtu`: an error, or a drop for this reason.
    fn too_big(mtu: u32, dont_frag: bool) -> Result<Self::Error, Reason>;
    /// Decrements the TTL or hop limit of the packet in `frame`.
    fn decrement(frame: &mut [u8]);
    /// The MAC and port of `next_hop`, the neighbour of next hop `idx` (`nh`).
    fn resolve(
        env: &mut ErrorEnv<'_>,
        idx: usize,
        nh: &Self::NextHop,
        next_hop: Self::Addr,
    ) -> Option<(MacAddr, PortId)>;
    /// The address the neighbour resolver is asked for, for a frame gleaned at `nh`.
    fn glean(nh: &Self::NextHop, next_hop: Self::Addr) -> IpAddr;
    /// Answers `frame` with error `e`, or drops it.
    fn error(frame: &[u8], env: &mut ErrorEnv<'_>, e: Self::Error) -> Action;
}

impl Special {
    /// What a frame of family `F` routed by a route of this type gets, as the kernel answers
    /// it (Linux's `ip_error` and `ip6_pkt_discard`/`ip6_pkt_prohibit`): dropped silently, or
    /// the family's error ([`IpFamily::UNREACHABLE_ROUTE`] …).
    pub fn answer<F: IpFamily>(self, frame: &[u8], env: &mut ErrorEnv<'_>) -> Action {
        let e = match self {
            Special::Blackhole => return Action::Drop(Reason::Blackhole),
            Special::Unreachable => F::UNREACHABLE_ROUTE,
            Special::Prohibit => F::PROHIBITED,
            Special::Foreign => F::FOREIGN_EGRESS,
            Special::Unsupported => F::UNSUPPORTED,
        };
        F::error(frame, env, e)
    }
}

/// The tables of family `F` ([`IpFamily::tables`]).
pub type Family<F> = FamilyTables<<F as IpFamily>::Fib, <F as IpFamily>::NextHop, <F as IpFamily>::Prefix>;

/// Decides the fate of `frame` of family `F` (`decide::<V4>`, `decide::<V6>`), received on
/// `ingress` at `now_ms`: [`arrived`], the family's header ([`IpFamily::decide`]), then
/// [`route`]. May rewrite the frame in place (forwarding, echo reply) or build an answer in
/// `scratch` ([`Action::Reply`]). Both neighbour tables, whatever the family: an IPv4 route
/// may go through an IPv6 gateway (RFC 5549).
#[inline(always)]
#[allow(clippy::too_many_arguments, reason = "the decision's whole world, by reference; no struct to build per frame")]
pub fn decide<F: IpFamily>(
    frame: &mut [u8],
    ingress: PortId,
    t: &RouterTables,
    neighbors: &NeighborTable,
    neighbors6: &NeighborTable6,
    st: &mut RouterState,
    now_ms: u64,
    scratch: &mut [u8; SCRATCH_LEN],
) -> Action {
    if let Err(why) = arrived::<F>(frame, t, ingress) {
        return Action::Drop(why);
    }
    let mut env = ErrorEnv { ingress, tables: t, neighbors, neighbors6, state: st, now_ms, scratch };
    F::decide(frame, &mut env)
}

/// The decision's first step: whether `frame` is for the port it came in on (`ingress`), and
/// of family `F`.
#[inline(always)]
pub fn arrived<F: IpFamily>(frame: &[u8], t: &RouterTables, ingress: PortId) -> Result<(), Reason> {
    let Some(port) = t.ports.get(ingress.index()) else {
        return Err(Reason::NotOurMac);
    };
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Err(Reason::Runt);
    };
    if eth.dst() != port.mac {
        return Err(Reason::NotOurMac);
    }
    if eth.ethertype() != F::ETHERTYPE {
        return Err(Reason::NotIp);
    }
    Ok(())
}

/// The decision past the header, which family `F` has checked and read into `h`: the route,
/// the TTL or hop limit, the scope, the MTU, then the frame forwarded to its neighbour or
/// gleaned. May rewrite the frame in place (forwarding, echo reply) or build an answer in
/// `env.scratch` ([`Action::Reply`]).
#[inline(always)]
pub fn route<F: IpFamily>(frame: &mut [u8], env: &mut ErrorEnv<'_>, h: Header<F::Addr>) -> Action {
    let t = env.tables;
    // The next hops are read before the lookup, which keeps IPv6's from being read again
    // after it, past its FIB's Arc (callgrind: 4 instructions a frame); the groups only for a
    // group.
    let ft = F::tables(t);
    let nexthops = ft.nexthops.as_slice();
    let Some(mut idx) = F::lookup(&ft.fib, h.dst) else {
        return F::error(frame, env, F::NO_ROUTE);
    };
    let mut nh = &nexthops[usize::from(idx.0)];
    if let Some((first, len)) = nh.group() {
        // Equal-cost paths: the flow's hash picks one, the same for every packet of the flow.
        let pick = first as usize + ecmp_pick(frame, len);
        let Some(&member) = ft.groups.get(pick) else {
            return Action::Drop(Reason::NoEgress);
        };
        idx = member;
        nh = &nexthops[usize::from(idx.0)];
    }
    let Some(next_hop) = F::neighbor(nh, h.dst) else {
        return F::not_forwarded(frame, env, nh);
    };
    if h.ttl <= 1 {
        return F::error(frame, env, F::TTL_EXCEEDED);
    }
    if let Some(e) = F::beyond_scope(h.src, nh.port(), env.ingress) {
        return F::error(frame, env, e);
    }
    let egress = &t.ports[nh.port().index()];
    let mtu = if nh.mtu() != 0 { nh.mtu().min(egress.mtu) } else { egress.mtu };
    if h.ip_len > mtu as usize {
        return match F::too_big(mtu, h.dont_frag) {
            Ok(e) => F::error(frame, env, e),
            Err(why) => Action::Drop(why),
        };
    }
    // Forward: TTL (and checksum), then MACs. A gleaned frame keeps its MACs: the resolver
    // sets both when the next hop resolves, and needs the sender's if it must answer instead.
    F::decrement(frame);
    match F::resolve(env, usize::from(idx.0), nh, next_hop) {
        Some((mac, p)) if p == nh.port() => send(frame, nh.port(), egress.mac, mac, h.ip_len),
        _ => Action::Glean { port: nh.port(), next_hop: F::glean(nh, next_hop) },
    }
}

/// Sends `frame`, an IP packet of `ip_len` bytes, out of `port` (whose MAC is `from`) to `to`:
/// the MACs rewritten, and bytes after the packet, beyond Ethernet's minimum frame, trimmed
/// (Linux trims them too; the MTU checks are on the IP length). Forwarded frames and echo
/// replies leave this way.
#[inline(always)]
pub fn send(frame: &mut [u8], port: PortId, from: MacAddr, to: MacAddr, ip_len: usize) -> Action {
    // The view cannot fail here (the frame held a header before); the check compiles away.
    if let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) {
        eth.set_dst(to);
        eth.set_src(from);
    }
    let len = (ethernet::HEADER_LEN + ip_len).max(ethernet::MIN_FRAME_LEN);
    if frame.len() > len {
        return Action::ForwardTrimmed { port, len: len as u16 };
    }
    Action::Forward(port)
}

/// The flow hash that picks among equal-cost paths: addresses, protocol and, for TCP and UDP
/// outside fragments, the ports (the kernel's `fib_multipath_hash_policy` 1), so that the flows
/// between two hosts spread too. A fixed seed: a flow keeps its path across table changes.
#[inline]
pub(crate) fn ecmp_hash(frame: &[u8]) -> u32 {
    crate::aqm::flow::flow_key(frame).hash(ECMP_SEED)
}

/// Which of `len` equal-cost members `frame`'s flow takes (0 for an empty group).
#[inline]
pub(crate) fn ecmp_pick(frame: &[u8], len: u16) -> usize {
    (ecmp_hash(frame) % u32::from(len.max(1))) as usize
}

/// The seed of [`ecmp_hash`]; the XDP program's copy of the hash (`dir4_member`) uses the same
/// (`XFWD_ECMP_SEED`).
pub(crate) const ECMP_SEED: u64 = 0x6563_6d70;

/// Gateways' MACs and ports by next-hop index, valid while `key` (the tables' id and the
/// neighbour tables' generations) holds: most forwarded packets go through a handful of
/// gateways, and this saves them the neighbour lookup (callgrind: about a fifth of the
/// decision's instructions). One per family, in [`super::RouterState`]: IPv4's is keyed by
/// both neighbour tables (its next hops may be IPv6 gateways), IPv6's by its own.
#[derive(Debug, Clone, Default)]
pub struct GatewayCache<K> {
    slots: Vec<Option<(MacAddr, PortId)>>,
    key: K,
}

impl<K: Copy + PartialEq> GatewayCache<K> {
    /// The answer for next hop `idx` under `key`: cached, or `lookup`'s, cached for next time.
    #[inline(always)]
    pub fn get(
        &mut self,
        idx: usize,
        key: K,
        lookup: impl FnOnce() -> Option<(MacAddr, PortId)>,
    ) -> Option<(MacAddr, PortId)> {
        if key != self.key {
            self.slots.iter_mut().for_each(|c| *c = None);
            self.key = key;
        }
        let Some(slot) = self.slots.get_mut(idx) else {
            // Tables with more next hops than the cache was fitted for (a reload the worker
            // has not fitted it to yet): the same answer, uncached, until it has.
            return lookup();
        };
        if let Some(hit) = *slot {
            return Some(hit);
        }
        let found = lookup();
        *slot = found;
        found
    }

    /// Next hops it has room for.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it has room for none.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Its slots, by next hop index.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &Option<(MacAddr, PortId)>> {
        self.slots.iter()
    }

    /// Room for `n` next hops. Allocates when it grows: outside the decision only.
    pub fn fit(&mut self, n: usize) {
        if self.slots.len() != n {
            self.slots.resize(n, None);
        }
    }
}

/// What building an ICMP error needs besides the frame: where it came in, the tables, and the
/// caller's rate limit and scratch buffer.
#[derive(Debug)]
pub struct ErrorEnv<'a> {
    /// Port the frame came in on.
    pub ingress: PortId,
    /// The router's tables.
    pub tables: &'a RouterTables,
    /// The neighbour table.
    pub neighbors: &'a NeighborTable,
    /// The IPv6 neighbour table (for routes through IPv6 gateways, RFC 5549).
    pub neighbors6: &'a NeighborTable6,
    /// Rate limit and IP identification.
    pub state: &'a mut RouterState,
    /// Now, ms.
    pub now_ms: u64,
    /// Where the answer is built.
    pub scratch: &'a mut [u8; SCRATCH_LEN],
}

/// A token bucket for ICMP errors: `rate` per second, up to `burst` at once.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_s: u32,
    burst: u32,
    tokens_milli: u64,
    last_ms: u64,
}

impl TokenBucket {
    /// A full bucket. `rate_per_s == 0` means no limit.
    pub fn new(rate_per_s: u32, burst: u32) -> TokenBucket {
        TokenBucket { rate_per_s, burst: burst.max(1), tokens_milli: u64::from(burst.max(1)) * 1000, last_ms: 0 }
    }

    /// `(rate per second, burst)` it was made with.
    pub fn config(&self) -> (u32, u32) {
        (self.rate_per_s, self.burst)
    }

    /// Takes one token at `now_ms` if there is one.
    #[inline]
    pub fn take(&mut self, now_ms: u64) -> bool {
        if self.rate_per_s == 0 {
            return true;
        }
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = now_ms.max(self.last_ms);
        let cap = u64::from(self.burst) * 1000;
        self.tokens_milli =
            self.tokens_milli.saturating_add(elapsed.saturating_mul(u64::from(self.rate_per_s))).min(cap);
        if self.tokens_milli >= 1000 {
            self.tokens_milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// One of `parts` equal shares of a router-wide ICMP rate and burst, for one token bucket:
/// each worker and the ARP thread keeps its own bucket (no shared state on the packet path),
/// so that together they stay within the configured limits. 0 stays 0 (unlimited); a share of
/// a positive limit is at least 1.
pub fn icmp_share(rate: u32, burst: u32, parts: u32) -> (u32, u32) {
    let parts = parts.max(1);
    let rate = if rate == 0 { 0 } else { (rate / parts).max(1) };
    (rate, (burst / parts).max(1))
}

/// A worker's own router state.
#[derive(Debug, Clone)]
pub struct RouterState {
    /// ICMP error rate limit.
    pub icmp_limit: TokenBucket,
    /// Identification field of the next ICMP error.
    pub ident: u16,
    /// ICMP errors not sent because of the rate limit.
    pub icmp_rate_limited: u64,
    /// Gateways' MACs by IPv4 next-hop index, valid for the tables id and the generations of
    /// both neighbour tables (IPv4 next hops may be IPv6 gateways). Sized by
    /// [`RouterState::fit`], outside the decision, so that the decision never allocates.
    pub(super) nh_cache: GatewayCache<(u64, u64, u64)>,
    /// The same for IPv6 gateways, by IPv6 next-hop index, valid for the tables id and the
    /// IPv6 neighbour table's generation.
    pub(super) nh_cache6: GatewayCache<(u64, u64)>,
}

impl RouterState {
    /// Sizes the gateway cache for `tables`' next hops. It allocates when they have more than
    /// the cache has room for, so it belongs where allocating is fine: when the state is made,
    /// and once per worker round (which is how a reload's tables reach it), never per frame.
    pub fn fit(&mut self, tables: &RouterTables) {
        self.nh_cache.fit(tables.v4.nexthops.len());
        self.nh_cache6.fit(tables.v6.nexthops.len());
    }

    /// State with an ICMP limit of `rate` per second and `burst`, and no gateway cache until
    /// [`RouterState::fit`] sizes one.
    pub fn new(rate: u32, burst: u32) -> RouterState {
        RouterState {
            icmp_limit: TokenBucket::new(rate, burst),
            ident: 0,
            icmp_rate_limited: 0,
            nh_cache: GatewayCache::default(),
            nh_cache6: GatewayCache::default(),
        }
    }
}

/// IPv4, for the decision ([`super::decide`]`::<V4>`).
#[derive(Debug, Clone, Copy)]
pub enum V4 {}

/// IPv6, for the decision ([`super::decide`]`::<V6>`).
#[derive(Debug, Clone, Copy)]
pub enum V6 {}

impl RouterTables {
    /// The next hop of family `F` for `dst`, if routed. An equal-cost group stands for its
    /// first member here (the way back for the router's own answers); the decision picks
    /// members by flow.
    #[inline]
    pub fn route_of<F: IpFamily>(&self, dst: F::Addr) -> Option<&F::NextHop> {
        let ft = F::tables(self);
        let nh = &ft.nexthops[usize::from(F::lookup(&ft.fib, dst)?.0)];
        match nh.group() {
            Some((first, _)) => ft.nexthops.get(usize::from(ft.groups.get(first as usize)?.0)),
            None => Some(nh),
        }
    }

    /// The IPv6 next hop for `dst`, if routed ([`RouterTables::route_of`]).
    #[inline]
    pub fn route6(&self, dst: Ipv6Addr) -> Option<&NextHop6> {
        self.route_of::<V6>(dst)
    }

    /// The IPv4 next hop for `dst`, if routed ([`RouterTables::route_of`]).
    #[inline]
    pub fn route(&self, dst: Ipv4Addr) -> Option<&NextHop4> {
        self.route_of::<V4>(dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    /// Each member's share of `flows` UDP flows from `src` to `dst` over `len` equal-cost
    /// members, the flows made by `ports(k)` (source, destination).
    fn shares(src: &str, dst: &str, len: u16, flows: u16, ports: impl Fn(u16) -> (u16, u16)) -> Vec<f64> {
        let mut count = vec![0u32; usize::from(len)];
        for k in 0..flows {
            let (sp, dp) = ports(k);
            let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
            let b = match (src.parse().unwrap(), dst.parse().unwrap()) {
                (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => b.ipv4(s.octets(), d.octets(), 64),
                (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => b.ipv6(s.octets(), d.octets(), 64),
                _ => unreachable!(),
            };
            let mut f = Vec::new();
            b.udp(sp, dp).write(&mut f, &[0; 8]).unwrap();
            count[ecmp_pick(&f, len)] += 1;
        }
        count.iter().map(|&c| f64::from(c) / f64::from(flows)).collect()
    }

    #[test]
    fn equal_cost_members_share_many_flows_evenly_in_both_families() {
        // 32,768 flows: a fair hash gives each of n members 1/n with a standard deviation of
        // at most 0.28 percentage points; 2 points is seven of them.
        type Ports = fn(u16) -> (u16, u16);
        let patterns: [(&str, Ports); 3] = [
            ("one source port, destination ports 0-32767", |k| (1024, k)),
            ("source ports 1024-33791, one destination port", |k| (1024 + k, 5201)),
            ("both ports stepping", |k| (k ^ 0x5a5a, k + 1)),
        ];
        for (src, dst) in [("198.18.0.1", "198.18.1.1"), ("2001:2::1", "2001:2:0:1::1")] {
            for (what, ports) in patterns {
                for len in [2u16, 3, 4] {
                    let s = shares(src, dst, len, 32_768, ports);
                    let fair = 1.0 / f64::from(len);
                    assert!(
                        s.iter().all(|&x| (x - fair).abs() < 0.02),
                        "{src} -> {dst}, {what}, {len} members: shares {s:?}"
                    );
                }
            }
        }
    }
}
