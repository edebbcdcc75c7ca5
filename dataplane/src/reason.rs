//! Why a frame was dropped. Every drop in xfwd names one of these and bumps its counter: the
//! enum is `#[repr(u8)]` and indexes the per-port drop array in [`crate::stats`].
//!
//! Each reason is declared once, in the table below (its doc, its variant, its stable name);
//! the enum, [`Reason::COUNT`], [`Reason::ALL`] and [`Reason::name`] are made from it. Adding a
//! reason is one row there plus its use.

use core::fmt;

/// Declares the reasons: `/// doc` then `Variant = "name",` per row, in counter order.
macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)+) => {
        /// A drop reason. Decision code returns it inside its action; the I/O layer adds its own.
        #[repr(u8)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)+
        }

        impl Reason {
            /// Number of reasons (length of a counter array).
            pub const COUNT: usize = [$(Reason::$variant),+].len();

            /// Every reason, in counter order.
            pub const ALL: [Reason; Reason::COUNT] = [$(Reason::$variant),+];

            /// Stable short name, used in stats output and JSON.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Reason::$variant => $name,)+
                }
            }
        }
    };
}

reasons! {
    /// Shorter than an Ethernet header.
    Runt = "runt",
    /// The source MAC is multicast, broadcast or all zeroes: no station sends that.
    InvalidSource = "invalid-source",
    /// Destined to an IEEE 802.1D link-local group (PAUSE, LACP, LLDP, ...): never bridged.
    ReservedGroup = "reserved-group",
    /// The destination was learnt on the ingress port: the segment already delivered it.
    SameSegment = "same-segment",
    /// The egress port's TX ring had no room for the frame.
    TxRingFull = "tx-ring-full",
    /// A flood needed a copy and no free UMEM frame was left.
    NoFreeFrame = "no-free-frame",
    /// The decision named no usable egress port (a port index out of range, or a flood with no
    /// other port): a decision bug, never expected, counted rather than hidden.
    NoEgress = "no-egress",
    /// Router: the destination MAC is neither the port's own (the port may be promiscuous).
    NotOurMac = "not-our-mac",
    /// Router: neither IPv4 nor IPv6 (the XDP program hands ARP and the rest to the kernel).
    NotIp = "not-ip",
    /// Router: IPv4 header invalid (version, IHL, total length).
    Ipv4Malformed = "ipv4-malformed",
    /// Router: IPv4 header checksum wrong.
    Ipv4Checksum = "ipv4-checksum",
    /// Router: martian source (0/8, 127/8, 224/4, 255.255.255.255; 240/4 too with
    /// `limits.rfc1812_martians`).
    MartianSource = "martian-source",
    /// Router: destination never forwarded (0/8, 127/8, limited broadcast, multicast; 240/4
    /// too with `limits.rfc1812_martians`).
    MartianDestination = "martian-destination",
    /// Router: link-local destination 169.254/16 (RFC 3927: never forwarded), with
    /// `limits.rfc1812_martians` (the kernel forwards it).
    LinkLocalDestination = "link-local-destination",
    /// Router: directed broadcast of a connected subnet (RFC 2644: not forwarded).
    DirectedBroadcast = "directed-broadcast",
    /// Router: no route to the destination.
    NoRoute = "no-route",
    /// Router: TTL would reach zero.
    TtlExceeded = "ttl-exceeded",
    /// Router: larger than the egress MTU with DF set.
    FragmentationNeeded = "fragmentation-needed",
    /// Router: larger than the egress MTU without DF; xfwd does not fragment.
    TooBigToForward = "too-big-to-forward",
    /// Router: for the box itself but not an ICMP echo (the XDP program hands those to the
    /// kernel; this counts any that reach a worker).
    LocalDelivery = "local-delivery",
    /// Router: the next hop is unresolved and the queue to the ARP thread is full.
    GleanQueueFull = "glean-queue-full",
    /// CoDel: the frame waited too long, for too long ([`crate::aqm::codel`]); an ECN-capable
    /// frame is marked instead (counted as `ecn-marked`), unless the queue is at its hard limit.
    AqmDrop = "aqm-drop",
    /// Flow queues: no slot was free, so the head of the queue holding the most bytes was
    /// dropped to make room ([`crate::aqm::fq`]); counted on the egress port.
    FqOverflow = "fq-overflow",
    /// Router: an IPv6 header that is cut short or not version 6, or a hop-by-hop jumbogram
    /// (payload length 0), which no Ethernet frame can hold.
    Ipv6Malformed = "ipv6-malformed",
    /// Router: the IPv6 hop limit would reach zero.
    HopLimitExceeded = "hop-limit-exceeded",
    /// Router: an IPv6 packet larger than the egress MTU (routers never fragment IPv6).
    PacketTooBig = "packet-too-big",
    /// Router: an IPv6 packet from a link-local source that would leave its link.
    BeyondScope = "beyond-scope",
    /// Router: the route is a blackhole (the kernel's `blackhole` type): dropped silently.
    Blackhole = "blackhole",
    /// Router: the route is of the kernel's `unreachable` type (answered Host Unreachable, or
    /// ICMPv6 No Route).
    UnreachableRoute = "unreachable-route",
    /// Router: the route is of the kernel's `prohibit` type (answered Communication
    /// Administratively Prohibited).
    Prohibited = "prohibited",
    /// Router: the route leaves through an interface xfwd does not own; with the kernel's
    /// forwarding off nobody can forward it (answered as for no route).
    ForeignEgress = "egress-not-owned",
    /// Router: a kernel route xfwd cannot forward as the kernel would (a `throw`, an
    /// encapsulation, a `via` of another family than IPv4 or IPv6): answered as for no route.
    UnsupportedRoute = "unsupported-route",
    /// Router: the source is one of the box's own addresses (the kernel drops it too).
    LocalSource = "local-source",
    /// Router: an IPv4 loose or strict source route option (LSRR, SSRR): dropped, as the
    /// kernel does with `accept_source_route = 0`, its default.
    SourceRouted = "source-routed",
    /// Router: IPv4 options that run past the header or have a length below 2: answered with
    /// Parameter Problem, as the kernel does.
    Ipv4BadOption = "ipv4-bad-option",
    /// Bridge: from an isolated port to a station behind another isolated port (`isolated`):
    /// isolated ports reach only the ports that are not.
    Isolated = "isolated",
    /// Bridge: a flood that no port takes (every other port has that kind of flooding off, or
    /// is isolated from the ingress).
    NotFlooded = "not-flooded",
    /// Bridge: a flood beyond its ingress port's storm-control limit for this second
    /// (`storm_limit`).
    StormControl = "storm-control",
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
    fn all_is_in_discriminant_order_and_names_are_unique() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut names: Vec<_> = Reason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "two reasons share a name");
        assert_eq!(before, Reason::COUNT);
    }

    #[test]
    fn names_are_lowercase_words_joined_by_hyphens() {
        for r in Reason::ALL {
            let n = r.name();
            assert!(!n.is_empty() && !n.starts_with('-') && !n.ends_with('-'), "{n}");
            assert!(n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{n}");
        }
    }
}
