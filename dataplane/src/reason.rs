//! Why a frame was dropped. Every drop in xfwd names one of these and bumps its counter: the
//! enum is `#[repr(u8)]` and indexes the per-port drop array in [`crate::stats`].

use core::fmt;

/// A drop reason. Decision code returns it inside its action; the I/O layer adds its own.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Shorter than an Ethernet header.
    Runt = 0,
    /// The source MAC is multicast, broadcast or all zeroes: no station sends that.
    InvalidSource,
    /// Destined to an IEEE 802.1D link-local group (PAUSE, LACP, LLDP, ...): never bridged.
    ReservedGroup,
    /// The destination was learnt on the ingress port: the segment already delivered it.
    SameSegment,
    /// The egress port's TX ring had no room for the frame.
    TxRingFull,
    /// A flood needed a copy and no free UMEM frame was left.
    NoFreeFrame,
    /// The decision named no usable egress port (a port index out of range, or a flood with no
    /// other port): a decision bug, never expected, counted rather than hidden.
    NoEgress,
    /// Router: the destination MAC is neither the port's own (the port may be promiscuous).
    NotOurMac,
    /// Router: neither IPv4 nor IPv6 (the XDP program hands ARP and the rest to the kernel).
    NotIp,
    /// Router: IPv4 header invalid (version, IHL, total length).
    Ipv4Malformed,
    /// Router: IPv4 header checksum wrong.
    Ipv4Checksum,
    /// Router: martian source (0/8, 127/8, 224/4, 255.255.255.255; 240/4 too with
    /// `limits.rfc1812_martians`).
    MartianSource,
    /// Router: destination never forwarded (0/8, 127/8, limited broadcast, multicast; 240/4
    /// too with `limits.rfc1812_martians`).
    MartianDestination,
    /// Router: link-local destination 169.254/16 (RFC 3927: never forwarded), with
    /// `limits.rfc1812_martians` (the kernel forwards it).
    LinkLocalDestination,
    /// Router: directed broadcast of a connected subnet (RFC 2644: not forwarded).
    DirectedBroadcast,
    /// Router: no route to the destination.
    NoRoute,
    /// Router: TTL would reach zero.
    TtlExceeded,
    /// Router: larger than the egress MTU with DF set.
    FragmentationNeeded,
    /// Router: larger than the egress MTU without DF; xfwd does not fragment.
    TooBigToForward,
    /// Router: for the box itself but not an ICMP echo (the XDP program hands those to the
    /// kernel; this counts any that reach a worker).
    LocalDelivery,
    /// Router: the next hop is unresolved and the queue to the ARP thread is full.
    GleanQueueFull,
    /// CoDel: the frame waited too long, for too long ([`crate::aqm::codel`]); an ECN-capable
    /// frame is marked instead (counted as `ecn-marked`), unless the queue is at its hard limit.
    AqmDrop,
    /// Flow queues: no slot was free, so the head of the queue holding the most bytes was
    /// dropped to make room ([`crate::aqm::fq`]); counted on the egress port.
    FqOverflow,
    /// Router: an IPv6 header that is cut short or not version 6, or a hop-by-hop jumbogram
    /// (payload length 0), which no Ethernet frame can hold.
    Ipv6Malformed,
    /// Router: the IPv6 hop limit would reach zero.
    HopLimitExceeded,
    /// Router: an IPv6 packet larger than the egress MTU (routers never fragment IPv6).
    PacketTooBig,
    /// Router: an IPv6 packet from a link-local source that would leave its link.
    BeyondScope,
    /// Router: the route is a blackhole (the kernel's `blackhole` type): dropped silently.
    Blackhole,
    /// Router: the route is of the kernel's `unreachable` type (answered Host Unreachable, or
    /// ICMPv6 No Route).
    UnreachableRoute,
    /// Router: the route is of the kernel's `prohibit` type (answered Communication
    /// Administratively Prohibited).
    Prohibited,
    /// Router: the route leaves through an interface xfwd does not own; with the kernel's
    /// forwarding off nobody can forward it (answered as for no route).
    ForeignEgress,
    /// Router: a kernel route xfwd cannot forward as the kernel would (a `throw`, an
    /// encapsulation, a `via` of another family than IPv4 or IPv6): answered as for no route.
    UnsupportedRoute,
    /// Router: the source is one of the box's own addresses (the kernel drops it too).
    LocalSource,
    /// Router: an IPv4 loose or strict source route option (LSRR, SSRR): dropped, as the
    /// kernel does with `accept_source_route = 0`, its default.
    SourceRouted,
    /// Router: IPv4 options that run past the header or have a length below 2: answered with
    /// Parameter Problem, as the kernel does.
    Ipv4BadOption,
    /// Bridge: from an isolated port to a station behind another isolated port (`isolated`):
    /// isolated ports reach only the ports that are not.
    Isolated,
    /// Bridge: a flood that no port takes (every other port has that kind of flooding off, or
    /// is isolated from the ingress).
    NotFlooded,
    /// Bridge: a flood beyond its ingress port's storm-control limit for this second
    /// (`storm_limit`).
    StormControl,
}

impl Reason {
    /// Number of reasons (length of a counter array).
    pub const COUNT: usize = 38;

    /// Every reason, in counter order.
    pub const ALL: [Reason; Reason::COUNT] = [
        Reason::Runt,
        Reason::InvalidSource,
        Reason::ReservedGroup,
        Reason::SameSegment,
        Reason::TxRingFull,
        Reason::NoFreeFrame,
        Reason::NoEgress,
        Reason::NotOurMac,
        Reason::NotIp,
        Reason::Ipv4Malformed,
        Reason::Ipv4Checksum,
        Reason::MartianSource,
        Reason::MartianDestination,
        Reason::LinkLocalDestination,
        Reason::DirectedBroadcast,
        Reason::NoRoute,
        Reason::TtlExceeded,
        Reason::FragmentationNeeded,
        Reason::TooBigToForward,
        Reason::LocalDelivery,
        Reason::GleanQueueFull,
        Reason::AqmDrop,
        Reason::FqOverflow,
        Reason::Ipv6Malformed,
        Reason::HopLimitExceeded,
        Reason::PacketTooBig,
        Reason::BeyondScope,
        Reason::Blackhole,
        Reason::UnreachableRoute,
        Reason::Prohibited,
        Reason::ForeignEgress,
        Reason::UnsupportedRoute,
        Reason::LocalSource,
        Reason::SourceRouted,
        Reason::Ipv4BadOption,
        Reason::Isolated,
        Reason::NotFlooded,
        Reason::StormControl,
    ];

    /// Stable short name, used in stats output and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Reason::Runt => "runt",
            Reason::InvalidSource => "invalid-source",
            Reason::ReservedGroup => "reserved-group",
            Reason::SameSegment => "same-segment",
            Reason::TxRingFull => "tx-ring-full",
            Reason::NoFreeFrame => "no-free-frame",
            Reason::NoEgress => "no-egress",
            Reason::NotOurMac => "not-our-mac",
            Reason::NotIp => "not-ip",
            Reason::Ipv4Malformed => "ipv4-malformed",
            Reason::Ipv4Checksum => "ipv4-checksum",
            Reason::MartianSource => "martian-source",
            Reason::MartianDestination => "martian-destination",
            Reason::LinkLocalDestination => "link-local-destination",
            Reason::DirectedBroadcast => "directed-broadcast",
            Reason::NoRoute => "no-route",
            Reason::TtlExceeded => "ttl-exceeded",
            Reason::FragmentationNeeded => "fragmentation-needed",
            Reason::TooBigToForward => "too-big-to-forward",
            Reason::LocalDelivery => "local-delivery",
            Reason::GleanQueueFull => "glean-queue-full",
            Reason::AqmDrop => "aqm-drop",
            Reason::FqOverflow => "fq-overflow",
            Reason::Ipv6Malformed => "ipv6-malformed",
            Reason::HopLimitExceeded => "hop-limit-exceeded",
            Reason::PacketTooBig => "packet-too-big",
            Reason::BeyondScope => "beyond-scope",
            Reason::Blackhole => "blackhole",
            Reason::UnreachableRoute => "unreachable-route",
            Reason::Prohibited => "prohibited",
            Reason::ForeignEgress => "egress-not-owned",
            Reason::UnsupportedRoute => "unsupported-route",
            Reason::LocalSource => "local-source",
            Reason::SourceRouted => "source-routed",
            Reason::Isolated => "isolated",
            Reason::NotFlooded => "not-flooded",
            Reason::StormControl => "storm-control",
            Reason::Ipv4BadOption => "ipv4-bad-option",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_discriminant_order() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut names: Vec<_> = Reason::ALL.iter().map(|r| r.name()).collect();
        names.dedup();
        assert_eq!(names.len(), Reason::COUNT);
    }
}
