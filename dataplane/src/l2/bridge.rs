//! The learning-bridge decision: from one frame, its ingress port and the time, to an action.
//!
//! Pure but for the FDB it learns into: no I/O, no clock, no allocation. The rules are those of
//! an IEEE 802.1D bridge without STP, as a Linux bridge with STP off applies them:
//!
//! 1. A frame too short for an Ethernet header is dropped ([`Reason::Runt`]).
//! 2. A multicast, broadcast or all-zero source is dropped ([`Reason::InvalidSource`]): no station
//!    sends from such an address, and learning it would poison the table.
//! 3. A destination in 01:80:C2:00:00:01–0F is dropped ([`Reason::ReservedGroup`]). The XDP
//!    program already hands these to the kernel; this is the same rule for any that reach here.
//!    01:80:C2:00:00:00 (STP BPDUs) is flooded like any group address.
//! 4. The source is learnt on the ingress port (new, refreshed, or moved from another port),
//!    unless the port does not learn; a static entry is never moved.
//! 5. A group destination (broadcast, multicast) is flooded to every port but the ingress that
//!    takes that kind of flood and that the ingress reaches ([`Policies`]).
//! 6. A known unicast destination is forwarded to its port, or dropped
//!    ([`Reason::SameSegment`]) when that port is the ingress: the segment has delivered it;
//!    or ([`Reason::Isolated`]) when both ports are isolated.
//! 7. An unknown (or aged-out) unicast destination is flooded, as in 5; a flood that no port
//!    takes is dropped ([`Reason::NotFlooded`]).
//! 8. A flood beyond its ingress port's storm-control limit for this second is dropped
//!    ([`Reason::StormControl`]; a switch's setting, off by default: [`Policies`]).
//!
//! VLAN tags are not interpreted: tagged frames are bridged on their MAC addresses, transparently.

use super::fdb::{Fdb, Learn};
use super::policy::{FloodKind, Policies};
use crate::action::Action;
use crate::reason::Reason;
use crate::time::Seconds;
use crate::wire::EthernetFrame;
use crate::PortId;

/// The action (only `Forward`, `Flood` and `Drop`), and what learning the source did (the worker counts refusals of a full table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// What to do with the frame.
    pub action: Action,
    /// What learning the source address did, if it was learnt at all.
    pub learn: Option<Learn>,
}

impl Verdict {
    #[inline]
    fn drop(reason: Reason) -> Verdict {
        Verdict { action: Action::Drop(reason), learn: None }
    }
}

/// The batch's first stage: brings the FDB lines that [`decide`] will read for `frame` (its
/// source's and its destination's buckets) towards the cache, so that a batch's table reads
/// overlap instead of waiting one after the other.
#[inline]
pub fn prefetch(frame: &[u8], fdb: &Fdb) {
    if let Ok(eth) = EthernetFrame::new_checked(frame) {
        fdb.prefetch(eth.src());
        fdb.prefetch(eth.dst());
    }
}

/// Decides the fate of `frame`, which arrived on `ingress` at `now`, learning its source, with
/// the ports' settings `pol`.
#[inline(always)]
pub fn decide(frame: &[u8], ingress: PortId, fdb: &Fdb, now: Seconds, pol: &Policies) -> Verdict {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Verdict::drop(Reason::Runt);
    };
    let src = eth.src();
    if src.is_multicast() || src.is_zero() {
        return Verdict::drop(Reason::InvalidSource);
    }
    let dst = eth.dst();
    if dst.is_reserved_link_local() {
        return Verdict::drop(Reason::ReservedGroup);
    }
    let learn = pol.learns(ingress).then(|| fdb.learn(src, ingress, now));
    let kind = if dst.0 == [0xff; 6] {
        FloodKind::Broadcast
    } else if dst.is_multicast() {
        FloodKind::Multicast
    } else {
        match fdb.lookup(dst, now) {
            Some(port) if port == ingress => return Verdict { action: Action::Drop(Reason::SameSegment), learn },
            Some(port) if !pol.reaches(ingress, port) => {
                return Verdict { action: Action::Drop(Reason::Isolated), learn }
            }
            Some(port) => return Verdict { action: Action::Forward(port), learn },
            None => FloodKind::Unknown,
        }
    };
    let set = pol.flood_set(ingress, kind);
    let action = if set.is_empty() {
        Action::Drop(Reason::NotFlooded)
    } else if !pol.storm_allows(ingress, now) {
        Action::Drop(Reason::StormControl)
    } else {
        Action::Flood(set)
    };
    Verdict { action, learn }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;
    use etherparse::{EtherType, Ethernet2Header};

    const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
    const B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
    const P0: PortId = PortId(0);
    const P1: PortId = PortId(1);
    const P2: PortId = PortId(2);
    const T: Seconds = Seconds(100);

    /// Three ports with the default settings.
    fn pol() -> Policies {
        Policies::uniform(3)
    }

    /// A flood to every port of three but `ingress`.
    fn flood_from(ingress: PortId) -> Action {
        Action::Flood(crate::l2::PortSet(0b111 & !(1 << ingress.0)))
    }

    fn frame(dst: MacAddr, src: MacAddr, ether_type: EtherType) -> Vec<u8> {
        let mut v = Vec::new();
        Ethernet2Header { source: src.0, destination: dst.0, ether_type }.write(&mut v).unwrap();
        v.resize(60, 0);
        v
    }

    fn ipv4(dst: MacAddr, src: MacAddr) -> Vec<u8> {
        frame(dst, src, EtherType::IPV4)
    }

    #[test]
    fn unknown_unicast_floods_and_learns_the_source() {
        let fdb = Fdb::new(64, 300);
        let v = decide(&ipv4(B, A), P0, &fdb, T, &pol());
        assert_eq!(v, Verdict { action: flood_from(P0), learn: Some(Learn::New) });
        assert_eq!(fdb.lookup(A, T), Some(P0));
    }

    #[test]
    fn known_unicast_goes_to_its_port_only() {
        let fdb = Fdb::new(64, 300);
        decide(&ipv4(B, A), P0, &fdb, T, &pol());
        let v = decide(&ipv4(A, B), P1, &fdb, T, &pol());
        assert_eq!(v.action, Action::Forward(P0));
        assert_eq!(decide(&ipv4(B, A), P0, &fdb, T, &pol()).action, Action::Forward(P1));
    }

    #[test]
    fn destination_on_the_ingress_port_is_filtered() {
        let fdb = Fdb::new(64, 300);
        decide(&ipv4(B, A), P0, &fdb, T, &pol());
        decide(&ipv4(A, B), P0, &fdb, T, &pol());
        assert_eq!(decide(&ipv4(A, B), P0, &fdb, T, &pol()).action, Action::Drop(Reason::SameSegment));
    }

    #[test]
    fn broadcast_and_multicast_flood_even_when_known() {
        let fdb = Fdb::new(64, 300);
        assert_eq!(decide(&frame(MacAddr::BROADCAST, A, EtherType::ARP), P0, &fdb, T, &pol()).action, flood_from(P0));
        let mcast = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
        assert_eq!(decide(&ipv4(mcast, A), P1, &fdb, T, &pol()).action, flood_from(P1));
        assert_eq!(fdb.lookup(A, T), Some(P1), "learnt from a multicast frame too");
    }

    #[test]
    fn group_or_zero_sources_are_dropped_and_not_learnt() {
        let fdb = Fdb::new(64, 300);
        for src in [MacAddr::BROADCAST, MacAddr([0x01, 0, 0x5e, 0, 0, 1]), MacAddr([0; 6])] {
            assert_eq!(decide(&ipv4(B, src), P0, &fdb, T, &pol()), Verdict::drop(Reason::InvalidSource));
        }
        assert!(fdb.is_empty(T));
    }

    #[test]
    fn link_local_groups_are_never_bridged_but_stp_is() {
        let fdb = Fdb::new(64, 300);
        let lldp = MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x0E]);
        let pause = MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x01]);
        let stp = MacAddr([0x01, 0x80, 0xC2, 0, 0, 0x00]);
        assert_eq!(
            decide(&frame(lldp, A, EtherType(0x88cc)), P0, &fdb, T, &pol()).action,
            Action::Drop(Reason::ReservedGroup)
        );
        assert_eq!(
            decide(&frame(pause, A, EtherType(0x8808)), P0, &fdb, T, &pol()).action,
            Action::Drop(Reason::ReservedGroup)
        );
        assert_eq!(decide(&frame(stp, A, EtherType(0x0026)), P0, &fdb, T, &pol()).action, flood_from(P0));
    }

    #[test]
    fn runt_frames_are_dropped() {
        let fdb = Fdb::new(64, 300);
        assert_eq!(decide(&[0u8; 13], P0, &fdb, T, &pol()), Verdict::drop(Reason::Runt));
        assert_eq!(decide(&[], P0, &fdb, T, &pol()), Verdict::drop(Reason::Runt));
    }

    #[test]
    fn a_station_that_moves_is_followed() {
        let fdb = Fdb::new(64, 300);
        decide(&ipv4(B, A), P0, &fdb, T, &pol());
        let v = decide(&ipv4(B, A), P2, &fdb, T, &pol());
        assert_eq!(v.learn, Some(Learn::Moved));
        assert_eq!(decide(&ipv4(A, B), P1, &fdb, T, &pol()).action, Action::Forward(P2));
    }

    #[test]
    fn aged_destination_floods_again() {
        let fdb = Fdb::new(64, 300);
        decide(&ipv4(B, A), P0, &fdb, Seconds(1), &pol());
        assert_eq!(decide(&ipv4(A, B), P1, &fdb, Seconds(301), &pol()).action, Action::Forward(P0));
        assert_eq!(decide(&ipv4(A, B), P1, &fdb, Seconds(302), &pol()).action, flood_from(P1));
    }

    #[test]
    fn full_table_floods_unknown_destinations() {
        let fdb = Fdb::new(8, 300);
        let mut refused = 0;
        for i in 0..64u8 {
            let v = decide(&ipv4(B, MacAddr([0x02, 1, 0, 0, 0, i])), P0, &fdb, T, &pol());
            assert_eq!(v.action, flood_from(P0));
            if v.learn == Some(Learn::Full) {
                refused += 1;
            }
        }
        assert_eq!(fdb.len(T), 8);
        assert_eq!(refused, 64 - 8);
        // A station that could not be learnt is flooded to, not lost.
        let v = decide(&ipv4(MacAddr([0x02, 1, 0, 0, 0, 63]), B), P1, &fdb, T, &pol());
        assert_eq!(v.action, flood_from(P1));
    }

    #[test]
    fn a_port_that_does_not_learn_leaves_its_stations_unknown() {
        use crate::l2::PortPolicy;
        let pol = Policies::new(&[PortPolicy { learning: false, ..PortPolicy::default() }, PortPolicy::default()]);
        let fdb = Fdb::new(64, 300);
        let v = decide(&ipv4(B, A), P0, &fdb, T, &pol);
        assert_eq!(v, Verdict { action: Action::Flood(crate::l2::PortSet(0b10)), learn: None });
        assert_eq!(fdb.lookup(A, T), None);
        // Unless pinned: then frames to it go to its port.
        assert!(fdb.pin(A, P0));
        assert_eq!(decide(&ipv4(A, B), P1, &fdb, T, &pol).action, Action::Forward(P0));
    }

    #[test]
    fn each_kind_of_flood_follows_the_ports_settings() {
        use crate::l2::{PortPolicy, PortSet};
        let quiet = PortPolicy { flood: false, mcast_flood: false, bcast_flood: false, ..PortPolicy::default() };
        let pol = Policies::new(&[PortPolicy::default(), PortPolicy::default(), quiet]);
        let fdb = Fdb::new(64, 300);
        let mcast = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
        for dst in [B, mcast, MacAddr::BROADCAST] {
            assert_eq!(decide(&ipv4(dst, A), P0, &fdb, T, &pol).action, Action::Flood(PortSet(0b010)));
        }
        // Known unicast still reaches the quiet port.
        decide(&ipv4(A, B), P2, &fdb, T, &pol);
        assert_eq!(decide(&ipv4(B, A), P0, &fdb, T, &pol).action, Action::Forward(P2));
        // Two ports, the other one quiet: nowhere to flood.
        let two = Policies::new(&[PortPolicy::default(), quiet]);
        let v = decide(&ipv4(MacAddr([0x02, 0, 0, 0, 0, 0x0c]), A), P0, &fdb, T, &two);
        assert_eq!(v.action, Action::Drop(Reason::NotFlooded));
        assert!(v.learn.is_some(), "the source is learnt all the same");
    }

    #[test]
    fn storm_control_takes_so_many_floods_a_second_on_the_port_and_nothing_else() {
        use crate::l2::PortPolicy;
        let limited = PortPolicy { storm_limit: Some(100), ..PortPolicy::default() };
        let pol = Policies::new(&[limited, PortPolicy::default(), PortPolicy::default()]);
        assert!(!pol.floods_everywhere(), "floods with a limit are the workers'");
        let copy = pol.clone();
        let fdb = Fdb::new(64, 300);
        let mcast = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
        let unknown = MacAddr([0x02, 0, 0, 0, 0, 0x0c]);
        // A storm in one second: broadcast, multicast and unknown unicast share the 100, across
        // every worker's copy of the settings.
        let mut taken = 0;
        for i in 0..1000 {
            let dst = [MacAddr::BROADCAST, mcast, unknown][i % 3];
            let p = if i % 2 == 0 { &pol } else { &copy };
            match decide(&ipv4(dst, A), P0, &fdb, T, p).action {
                Action::Flood(_) => taken += 1,
                Action::Drop(Reason::StormControl) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(taken, 100);
        // Known unicast from the same port is not limited; floods from another port are not.
        decide(&ipv4(A, B), P1, &fdb, T, &pol);
        assert_eq!(decide(&ipv4(B, A), P0, &fdb, T, &pol).action, Action::Forward(P1));
        assert_eq!(decide(&ipv4(MacAddr::BROADCAST, B), P1, &fdb, T, &pol).action, flood_from(P1));
        // The next second: 100 more, however many come from a worker still on the second
        // before (which count against the window open now, and open no new one).
        let next = Seconds(T.0 + 1);
        let taken = (0..300)
            .filter(|i| {
                let now = if i % 2 == 0 { next } else { T };
                matches!(decide(&ipv4(MacAddr::BROADCAST, A), P0, &fdb, now, &pol).action, Action::Flood(_))
            })
            .count();
        assert_eq!(taken, 100);
    }

    #[test]
    fn isolated_ports_do_not_talk_to_each_other() {
        use crate::l2::{PortPolicy, PortSet};
        let iso = PortPolicy { isolated: true, ..PortPolicy::default() };
        let pol = Policies::new(&[iso, iso, PortPolicy::default()]);
        let fdb = Fdb::new(64, 300);
        assert_eq!(decide(&ipv4(MacAddr::BROADCAST, A), P0, &fdb, T, &pol).action, Action::Flood(PortSet(0b100)));
        decide(&ipv4(MacAddr::BROADCAST, B), P1, &fdb, T, &pol);
        assert_eq!(decide(&ipv4(B, A), P0, &fdb, T, &pol).action, Action::Drop(Reason::Isolated));
        let c = MacAddr([0x02, 0, 0, 0, 0, 0x0c]);
        decide(&ipv4(MacAddr::BROADCAST, c), P2, &fdb, T, &pol);
        assert_eq!(decide(&ipv4(c, A), P0, &fdb, T, &pol).action, Action::Forward(P2));
        assert_eq!(decide(&ipv4(A, c), P2, &fdb, T, &pol).action, Action::Forward(P0));
    }

    #[test]
    fn a_static_station_seen_elsewhere_keeps_its_port() {
        let fdb = Fdb::new(64, 300);
        assert!(fdb.pin(A, P0));
        let v = decide(&ipv4(B, A), P1, &fdb, T, &pol());
        assert_eq!(v.learn, Some(Learn::Pinned));
        assert_eq!(decide(&ipv4(A, B), P2, &fdb, T, &pol()).action, Action::Forward(P0));
    }

    #[test]
    fn vlan_tagged_frames_are_bridged_on_their_macs() {
        let fdb = Fdb::new(64, 300);
        decide(&frame(B, A, EtherType::VLAN_TAGGED_FRAME), P0, &fdb, T, &pol());
        assert_eq!(decide(&frame(A, B, EtherType::VLAN_TAGGED_FRAME), P1, &fdb, T, &pol()).action, Action::Forward(P0));
    }

    #[test]
    fn learnt_on_one_queue_is_used_by_another_at_once() {
        // Two workers share one table: what queue 0 learns, queue 1 uses on its next frame.
        let fdb = std::sync::Arc::new(Fdb::new(64, 300));
        let q0 = {
            let fdb = fdb.clone();
            std::thread::spawn(move || decide(&ipv4(B, A), P0, &fdb, T, &pol()))
        };
        assert_eq!(q0.join().unwrap().learn, Some(Learn::New));
        let q1 = std::thread::spawn(move || decide(&ipv4(A, B), P1, &fdb, T, &pol()));
        assert_eq!(q1.join().unwrap().action, Action::Forward(P0));
    }
}
