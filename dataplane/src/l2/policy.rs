//! Per-port bridge settings, as a Linux bridge has them (`bridge link set dev PORT …`): whether a
//! port learns, which floods it takes, and whether it is isolated. Precomputed into bit sets at
//! start so that the decision reads one word per frame.
//!
//! The rules are the kernel's (net/bridge: `br_flood`, `br_skb_isolated`):
//! - `learning = false`: sources seen on the port are not learnt (its stations stay unknown,
//!   unless given as static entries, and frames to them are flooded);
//! - `flood = false`: unknown unicast is not flooded out of the port; `mcast_flood = false`:
//!   multicast is not; `bcast_flood = false`: broadcast is not. Known unicast still reaches it;
//! - `isolated = true`: the port reaches, and is reached from, only the ports that are not
//!   isolated (known unicast between two isolated ports is dropped as [`Reason::Isolated`]).
//!
//! One setting is a switch's, not the kernel's: **storm control** (`storm_limit`, off by
//! default), at most so many flooded frames (broadcast, multicast and unknown unicast) received
//! on the port in each second, the rest dropped as [`Reason::StormControl`]. A loop through the
//! bridge (two ports cabled together, a second bridge without STP) then floods at that rate
//! instead of at the machine's, and the drops say where it came in. Counted per one-second
//! window, as switches measure, in one meter per port that every worker shares.
//!
//! [`Reason::Isolated`]: crate::Reason::Isolated
//! [`Reason::StormControl`]: crate::Reason::StormControl

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::time::Seconds;
use crate::{PortId, MAX_PORTS};

/// A set of ports, one bit per port index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortSet(pub u64);

impl PortSet {
    /// The first `n` ports.
    pub const fn first(n: usize) -> PortSet {
        PortSet(if n >= 64 { u64::MAX } else { (1u64 << n) - 1 })
    }

    /// Whether `port` is in the set.
    #[inline(always)]
    pub const fn contains(self, port: usize) -> bool {
        port < 64 && self.0 & (1 << port) != 0
    }

    /// The set without `port`.
    #[inline(always)]
    pub const fn without(self, port: usize) -> PortSet {
        if port < 64 {
            PortSet(self.0 & !(1 << port))
        } else {
            self
        }
    }

    /// Whether the set is empty.
    #[inline(always)]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The ports in the set, lowest first.
    #[inline]
    pub fn iter(self) -> impl Iterator<Item = usize> {
        let mut m = self.0;
        std::iter::from_fn(move || {
            let i = m.trailing_zeros() as usize;
            m &= m.wrapping_sub(1);
            (i < 64).then_some(i)
        })
    }

    /// The highest port in the set.
    #[inline]
    pub fn highest(self) -> Option<usize> {
        (self.0 != 0).then(|| 63 - self.0.leading_zeros() as usize)
    }
}

/// One port's settings. The default is a Linux bridge port's: learns, takes every flood, not
/// isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortPolicy {
    /// Learn the sources of frames received on the port.
    pub learning: bool,
    /// Flood unknown unicast out of the port.
    pub flood: bool,
    /// Flood multicast out of the port.
    pub mcast_flood: bool,
    /// Flood broadcast out of the port.
    pub bcast_flood: bool,
    /// Reach only the ports that are not isolated.
    pub isolated: bool,
    /// Storm control: flooded frames received on the port taken per second at most (`None`:
    /// no limit).
    pub storm_limit: Option<u32>,
}

impl Default for PortPolicy {
    fn default() -> PortPolicy {
        PortPolicy {
            learning: true,
            flood: true,
            mcast_flood: true,
            bcast_flood: true,
            isolated: false,
            storm_limit: None,
        }
    }
}

impl PortPolicy {
    /// Whether every setting is the default.
    pub fn is_default(&self) -> bool {
        *self == PortPolicy::default()
    }
}

/// What a flood carries, which decides the ports it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodKind {
    /// A unicast destination the table does not know.
    Unknown,
    /// A multicast destination.
    Multicast,
    /// The broadcast address.
    Broadcast,
}

/// Every port's settings as bit sets, for the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policies {
    ports: PortSet,
    learning: PortSet,
    flood: [PortSet; 3],
    isolated: PortSet,
    /// Storm control, where a port has a limit; shared by every worker's copy.
    storm: Option<Arc<Storm>>,
}

/// Each port's storm-control limit and meter: the second of its current window and the
/// flooded frames taken in it, in one word (second in the high 32 bits).
#[derive(Debug)]
struct Storm {
    limits: Vec<u32>,
    meters: Vec<AtomicU64>,
}

impl PartialEq for Storm {
    /// Two storm controls are alike when their limits are (the meters are the running state).
    fn eq(&self, other: &Storm) -> bool {
        self.limits == other.limits
    }
}

impl Eq for Storm {}

impl Storm {
    /// Whether a flooded frame received on `port` at `now` is taken: the port's limit is not
    /// reached in this second's window (a new second opens a new window). No limit: taken.
    #[inline]
    fn take(&self, port: usize, now: Seconds) -> bool {
        let (Some(&limit), Some(meter)) = (self.limits.get(port), self.meters.get(port)) else { return true };
        if limit == 0 {
            return true;
        }
        let second = u64::from(now.0);
        let mut cur = meter.load(Ordering::Relaxed);
        loop {
            // Only a later second opens a new window: workers read the clock each at its own
            // round, and one still on the second before counts against the window open now
            // (else each disagreement at a boundary would hand out a fresh budget).
            let next = if second > cur >> 32 {
                (second << 32) | 1
            } else if cur & 0xffff_ffff < u64::from(limit) {
                cur + 1
            } else {
                return false;
            };
            match meter.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(seen) => cur = seen,
            }
        }
    }
}

impl Policies {
    /// `n` ports with the default settings.
    pub fn uniform(n: usize) -> Policies {
        Policies::new(&vec![PortPolicy::default(); n.min(MAX_PORTS)])
    }

    /// From each port's settings, in port order (at most [`MAX_PORTS`]; more are ignored).
    pub fn new(ports: &[PortPolicy]) -> Policies {
        let ports = &ports[..ports.len().min(MAX_PORTS)];
        let limits: Vec<u32> = ports.iter().map(|p| p.storm_limit.unwrap_or(0)).collect();
        let storm = limits.iter().any(|&l| l > 0).then(|| {
            Arc::new(Storm { meters: limits.iter().map(|_| AtomicU64::new(0)).collect(), limits: limits.clone() })
        });
        let mut p = Policies {
            ports: PortSet::first(ports.len()),
            learning: PortSet(0),
            flood: [PortSet(0); 3],
            isolated: PortSet(0),
            storm,
        };
        for (i, pol) in ports.iter().enumerate().take(MAX_PORTS) {
            let bit = 1u64 << i;
            let set = |s: &mut PortSet, on: bool| {
                if on {
                    s.0 |= bit;
                }
            };
            set(&mut p.learning, pol.learning);
            set(&mut p.flood[FloodKind::Unknown as usize], pol.flood);
            set(&mut p.flood[FloodKind::Multicast as usize], pol.mcast_flood);
            set(&mut p.flood[FloodKind::Broadcast as usize], pol.bcast_flood);
            set(&mut p.isolated, pol.isolated);
        }
        p
    }

    /// Whether every port has the default settings.
    pub fn is_default(&self) -> bool {
        *self == Policies::uniform(self.ports.iter().count())
    }

    /// Whether sources received on `port` are learnt.
    #[inline(always)]
    pub fn learns(&self, port: PortId) -> bool {
        self.learning.contains(port.index())
    }

    /// Whether `port` is isolated.
    pub fn is_isolated(&self, port: PortId) -> bool {
        self.isolated.contains(port.index())
    }

    /// Whether every flood goes to every port but its ingress, whatever its kind and ingress
    /// (as with the defaults: each kind flooded everywhere, and isolation, which only keeps
    /// isolated ports from each other, on at most one port), without a storm limit (which the
    /// workers apply: the XDP path then leaves floods to them).
    pub fn floods_everywhere(&self) -> bool {
        let all = self.ports.0;
        self.flood.iter().all(|s| s.0 & all == all) && (self.isolated.0 & all).count_ones() < 2 && self.storm.is_none()
    }

    /// Whether a flood received on `ingress` at `now` is within the port's storm-control
    /// limit (always, for a port without one). Counts it when it is.
    #[inline(always)]
    pub fn storm_allows(&self, ingress: PortId, now: Seconds) -> bool {
        self.storm.as_ref().is_none_or(|s| s.take(ingress.index(), now))
    }

    /// Whether a frame received on `from` may go out of `to` (isolation).
    #[inline(always)]
    pub fn reaches(&self, from: PortId, to: PortId) -> bool {
        !(self.isolated.contains(from.index()) && self.isolated.contains(to.index()))
    }

    /// The ports a flood of `kind` received on `ingress` goes to: every other port that takes
    /// that kind of flood and that the ingress reaches.
    #[inline(always)]
    pub fn flood_set(&self, ingress: PortId, kind: FloodKind) -> PortSet {
        let mut set = self.flood[kind as usize].0 & self.ports.0;
        if self.isolated.contains(ingress.index()) {
            set &= !self.isolated.0;
        }
        PortSet(set).without(ingress.index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P0: PortId = PortId(0);
    const P1: PortId = PortId(1);
    const P2: PortId = PortId(2);

    #[test]
    fn the_default_floods_everywhere_but_the_ingress_and_learns() {
        let p = Policies::uniform(3);
        assert!(p.is_default());
        for kind in [FloodKind::Unknown, FloodKind::Multicast, FloodKind::Broadcast] {
            assert_eq!(p.flood_set(P1, kind), PortSet(0b101));
        }
        assert!(p.learns(P0) && p.learns(P2) && p.reaches(P0, P1));
        assert_eq!(PortSet(0b1010_0001).iter().collect::<Vec<_>>(), [0, 5, 7]);
        assert_eq!((PortSet(0b1010_0001).highest(), PortSet(0).highest()), (Some(7), None));
        assert_eq!(PortSet(1 << 63).iter().collect::<Vec<_>>(), [63]);
        assert_eq!(Policies::uniform(64).flood_set(PortId(63), FloodKind::Unknown), PortSet(u64::MAX >> 1));
    }

    #[test]
    fn floods_everywhere_is_every_flood_set_being_all_but_the_ingress() {
        let with = |f: fn(&mut PortPolicy), on: &[usize]| {
            let mut ports = vec![PortPolicy::default(); 3];
            for &i in on {
                f(&mut ports[i]);
            }
            Policies::new(&ports)
        };
        let cases: [(Policies, bool); 6] = [
            (Policies::uniform(3), true),
            (with(|p| p.learning = false, &[0, 1, 2]), true),
            (with(|p| p.isolated = true, &[1]), true),
            (with(|p| p.isolated = true, &[0, 2]), false),
            (with(|p| p.mcast_flood = false, &[2]), false),
            (with(|p| p.flood = false, &[0]), false),
        ];
        for (p, want) in cases {
            let by_sets = (0..3).all(|i| {
                [FloodKind::Unknown, FloodKind::Multicast, FloodKind::Broadcast]
                    .iter()
                    .all(|&k| p.flood_set(PortId(i), k) == PortSet(0b111).without(usize::from(i)))
            });
            assert_eq!((p.floods_everywhere(), by_sets), (want, want), "{p:?}");
        }
        assert!(with(|p| p.isolated = true, &[0, 2]).is_isolated(P2));
    }

    #[test]
    fn each_kind_of_flood_is_turned_off_on_its_own() {
        let off = |f: fn(&mut PortPolicy)| {
            let mut pol = PortPolicy::default();
            f(&mut pol);
            Policies::new(&[PortPolicy::default(), PortPolicy::default(), pol])
        };
        let p = off(|p| p.flood = false);
        assert!(!p.is_default());
        assert_eq!(p.flood_set(P0, FloodKind::Unknown), PortSet(0b010));
        assert_eq!(p.flood_set(P0, FloodKind::Multicast), PortSet(0b110));
        let p = off(|p| p.mcast_flood = false);
        assert_eq!(p.flood_set(P0, FloodKind::Multicast), PortSet(0b010));
        assert_eq!(p.flood_set(P0, FloodKind::Broadcast), PortSet(0b110));
        let p = off(|p| p.bcast_flood = false);
        assert_eq!(p.flood_set(P0, FloodKind::Broadcast), PortSet(0b010));
        assert_eq!(p.flood_set(P0, FloodKind::Unknown), PortSet(0b110));
        let p = off(|p| p.learning = false);
        assert!(!p.learns(P2) && p.learns(P0));
    }

    #[test]
    fn isolated_ports_reach_only_the_others() {
        let iso = PortPolicy { isolated: true, ..PortPolicy::default() };
        let p = Policies::new(&[iso, iso, PortPolicy::default()]);
        assert!(!p.reaches(P0, P1) && !p.reaches(P1, P0));
        assert!(p.reaches(P0, P2) && p.reaches(P2, P0) && p.reaches(P2, P2));
        assert_eq!(p.flood_set(P0, FloodKind::Broadcast), PortSet(0b100));
        assert_eq!(p.flood_set(P2, FloodKind::Broadcast), PortSet(0b011));
        let two = Policies::new(&[iso, iso]);
        assert!(two.flood_set(P0, FloodKind::Unknown).is_empty());
    }
}
