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
}

impl Reason {
    /// Number of reasons (length of a counter array).
    pub const COUNT: usize = 6;

    /// Every reason, in counter order.
    pub const ALL: [Reason; Reason::COUNT] = [
        Reason::Runt,
        Reason::InvalidSource,
        Reason::ReservedGroup,
        Reason::SameSegment,
        Reason::TxRingFull,
        Reason::NoFreeFrame,
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
