//! The values of the options that choose how the data plane runs: [`PollMode`], [`XdpMode`],
//! [`ZeroCopy`] and [`Sockets`]. Each is defined here once; the command line and the router's file take them
//! from here instead of keeping their own copies to map by hand.
//!
//! - The command line parses them with `clap::ValueEnum`, derived with the `clap` feature (off by
//!   default, so that the data plane alone does not build clap). A variant's `value(help)` is
//!   reset: its doc comment is for readers of this crate, and `--help` keeps the option's one
//!   line, which already says what each value does.
//! - The router's file reads them through the options table ([`super::settings`]), by their
//!   `ALL` and `name`; `serde::Deserialize` (derived always: serde is a dependency of the data
//!   plane anyway, for its reports) and [`FromStr`] remain for other readers.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// How a worker waits for frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum PollMode {
    /// Spin on the rings without ever sleeping.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Busy,
    /// Spin briefly after work, then sleep in poll(2) until frames arrive (bounded timeout).
    #[default]
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Adaptive,
}

impl PollMode {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [PollMode; 2] = [PollMode::Busy, PollMode::Adaptive];

    /// The value's word on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            PollMode::Busy => "busy",
            PollMode::Adaptive => "adaptive",
        }
    }
}

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum XdpMode {
    /// In the driver (fastest); fails where the driver has no XDP support.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Native,
    /// In the generic network stack path (works everywhere, slower).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Generic,
    /// Native where the driver supports it, generic otherwise.
    #[default]
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Auto,
}

impl XdpMode {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [XdpMode; 3] = [XdpMode::Native, XdpMode::Generic, XdpMode::Auto];

    /// The value's word on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
            XdpMode::Auto => "auto",
        }
    }
}

/// Whether AF_XDP sockets bind in zero-copy mode. One worker's sockets share a UMEM, which has
/// one mode for all of them, so zero-copy needs every port's driver to support it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ZeroCopy {
    /// Zero-copy where every port supports it, copy mode otherwise (said at start).
    #[default]
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Auto,
    /// Zero-copy or refuse to start.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    On,
    /// Copy mode.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Off,
}

/// How the workers' AF_XDP sockets are laid out over the ports' queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Sockets {
    /// Per CPU where the mode and every port's driver give all frames queue 0 (generic XDP on
    /// veth or dpaa_eth, see [`super::drivers`]), per queue otherwise (said at start).
    #[default]
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Auto,
    /// Worker *q* binds queue *q* of every port with a UMEM of its own; the XDP program picks
    /// the socket by the frame's queue index.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    PerQueue,
    /// Every worker binds queue 0 of every port, on a UMEM per port whose fill and completion
    /// rings the workers share under a lock; the XDP program picks the socket by the CPU the
    /// frame arrived on. For drivers that give every frame queue 0 from several CPUs.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    PerCpu,
}

impl ZeroCopy {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [ZeroCopy; 3] = [ZeroCopy::Auto, ZeroCopy::On, ZeroCopy::Off];

    /// The value's word on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            ZeroCopy::Auto => "auto",
            ZeroCopy::On => "on",
            ZeroCopy::Off => "off",
        }
    }
}

impl Sockets {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [Sockets; 3] = [Sockets::Auto, Sockets::PerQueue, Sockets::PerCpu];

    /// The value's word on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            Sockets::Auto => "auto",
            Sockets::PerQueue => "per-queue",
            Sockets::PerCpu => "per-cpu",
        }
    }
}

impl fmt::Display for Sockets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the router forwards the common case: every frame in the user-space workers (the
/// AF_XDP path), or the common case in the XDP program from the workers' own tables and the
/// rest in the workers (the XDP path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DataPath {
    /// Every frame to be forwarded goes to a worker through its AF_XDP socket.
    #[default]
    #[cfg_attr(feature = "clap", value(name = "af-xdp", help = None::<&str>))]
    AfXdp,
    /// The XDP program forwards the common case itself, redirecting to the egress port: the
    /// router's IPv4 and IPv6 through resolved next hops, the bridge's frames between known
    /// stations and its floods; every exception (ICMP errors, gleaning, the box's own traffic,
    /// learning) goes to the workers as on the AF_XDP path.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Xdp,
}

impl DataPath {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [DataPath; 2] = [DataPath::AfXdp, DataPath::Xdp];

    /// The value's word on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            DataPath::AfXdp => "af-xdp",
            DataPath::Xdp => "xdp",
        }
    }
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Queue management on the workers' queues (the command line's `--aqm`, the router file's
/// `[aqm] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum AqmMode {
    /// Flow queues in the RFC 8290 style between the RX and TX rings, one set per egress
    /// port: deficit round robin with new flows first, CoDel per flow on the time since the
    /// XDP program's stamp, and on overflow a drop from the head of the fattest flow. The
    /// default: with a quantum of four frames they cost 2.7 % of throughput against `off` on
    /// the rig (4 TCP flows, 12 runs per arm; no difference proven) and keep a ping beside bulk
    /// flows under a millisecond; see docs/design/queues-and-scheduling.md for where they
    /// collapse (a worker that is the bottleneck of hundreds of TCP flows).
    #[default]
    #[cfg_attr(feature = "clap", value(name = "fq-codel", help = None::<&str>))]
    FqCodel,
    /// CoDel (RFC 8289) on each worker's RX ring of each port, by how long frames waited there
    /// (the XDP program stamps their arrival): drops, or marks ECN-capable frames, once frames
    /// have waited longer than the target for an interval. No fairness between flows.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Codel,
    /// No queue management: the rings are plain FIFOs; no stamp either.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Off,
}

impl AqmMode {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [AqmMode; 3] = [AqmMode::FqCodel, AqmMode::Codel, AqmMode::Off];

    /// The value's word on the command line and in the file.
    pub fn name(self) -> &'static str {
        match self {
            AqmMode::Codel => "codel",
            AqmMode::FqCodel => "fq-codel",
            AqmMode::Off => "off",
        }
    }
}

/// Whether the workers run under SCHED_FIFO, ahead of ordinary processes, as the kernel's own
/// packet processing (softirq) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RtPriority {
    /// Normal threads.
    Off,
    /// SCHED_FIFO at [`RtPriority::AUTO`] where the system allows it (CAP_SYS_NICE, and a
    /// real-time budget for the cgroup), normal threads otherwise, said at start; normal
    /// threads with `--poll busy`.
    #[default]
    Auto,
    /// SCHED_FIFO at this priority (1–99), or no start.
    Fixed(u8),
}

impl RtPriority {
    /// The priority `auto` takes: above ordinary work and the kernel's own threads at their
    /// default (ksoftirqd is not real-time), below real-time services that set their own.
    pub const AUTO: u8 = 10;
}

impl fmt::Display for RtPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RtPriority::Off => f.write_str("off"),
            RtPriority::Auto => f.write_str("auto"),
            RtPriority::Fixed(p) => write!(f, "{p}"),
        }
    }
}

impl FromStr for RtPriority {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "off" => Ok(RtPriority::Off),
            "auto" => Ok(RtPriority::Auto),
            n => match n.parse::<u8>() {
                Ok(p @ 1..=99) => Ok(RtPriority::Fixed(p)),
                _ => Err(format!("`{text}` is not off, auto or a priority from 1 to 99")),
            },
        }
    }
}

/// A word that is not one of an option's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option} `{given}` is not one of {}", .expected.join(", "))]
pub struct UnknownValue {
    /// The option, as the router's file spells it.
    pub option: &'static str,
    /// The word given.
    pub given: String,
    /// The option's values, in order.
    pub expected: Vec<&'static str>,
}

/// The value of `all` whose name is `text`, or why there is none.
fn value_of<T: Copy>(
    option: &'static str,
    all: &[T],
    name: fn(T) -> &'static str,
    text: &str,
) -> Result<T, UnknownValue> {
    all.iter().copied().find(|&v| name(v) == text).ok_or_else(|| UnknownValue {
        option,
        given: text.to_owned(),
        expected: all.iter().map(|&v| name(v)).collect(),
    })
}

/// A word-valued option's parsing and printing, from its `ALL` and `name`: `FromStr` (naming
/// the option and its values when the word is none of them), `TryFrom<String>` for
/// `serde(try_from)` so that a file's error is the command line's, and `Display`.
macro_rules! named_values {
    ($($t:ty => $option:literal),* $(,)?) => {$(
        impl FromStr for $t {
            type Err = UnknownValue;

            fn from_str(text: &str) -> Result<Self, UnknownValue> {
                value_of($option, &<$t>::ALL, <$t>::name, text)
            }
        }

        impl TryFrom<String> for $t {
            type Error = UnknownValue;

            fn try_from(text: String) -> Result<Self, UnknownValue> {
                text.parse()
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}

named_values!(AqmMode => "aqm.mode", PollMode => "poll", XdpMode => "xdp_mode");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_others_are_refused_with_the_values() {
        for m in PollMode::ALL {
            assert_eq!(m.name().parse::<PollMode>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        for m in XdpMode::ALL {
            assert_eq!(m.name().parse::<XdpMode>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        for m in AqmMode::ALL {
            assert_eq!(m.name().parse::<AqmMode>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        let names: Vec<&str> = DataPath::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["af-xdp", "xdp"]);
        assert_eq!(
            "fq".parse::<AqmMode>().unwrap_err().to_string(),
            "aqm.mode `fq` is not one of fq-codel, codel, off"
        );
        assert_eq!(
            "sometimes".parse::<PollMode>().unwrap_err().to_string(),
            "poll `sometimes` is not one of busy, adaptive"
        );
        assert_eq!(
            "offload".parse::<XdpMode>().unwrap_err().to_string(),
            "xdp_mode `offload` is not one of native, generic, auto"
        );
        assert!("Busy".parse::<PollMode>().is_err(), "words are lower case, as on the command line");
        for (text, want) in [
            ("off", RtPriority::Off),
            ("auto", RtPriority::Auto),
            ("1", RtPriority::Fixed(1)),
            ("99", RtPriority::Fixed(99)),
        ] {
            assert_eq!(text.parse::<RtPriority>(), Ok(want));
            assert_eq!(want.to_string(), text);
        }
        for bad in ["0", "100", "high", ""] {
            assert!(
                bad.parse::<RtPriority>().unwrap_err().contains("not off, auto or a priority from 1 to 99"),
                "{bad}"
            );
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        assert_eq!(PollMode::default(), PollMode::Adaptive);
        assert_eq!(XdpMode::default(), XdpMode::Auto);
        assert_eq!(ZeroCopy::default(), ZeroCopy::Auto);
        assert_eq!(Sockets::default(), Sockets::Auto);
        assert_eq!(RtPriority::default(), RtPriority::Auto);
        assert_eq!(AqmMode::default(), AqmMode::FqCodel);
    }

    /// The command line's words and their order (what `--help` lists) are the ones above.
    #[cfg(feature = "clap")]
    #[test]
    fn the_command_line_spells_them_the_same() {
        use clap::ValueEnum;
        fn words<T: ValueEnum>() -> Vec<String> {
            T::value_variants().iter().map(|v| v.to_possible_value().unwrap().get_name().to_owned()).collect()
        }
        assert_eq!(words::<PollMode>(), PollMode::ALL.map(PollMode::name));
        assert_eq!(words::<XdpMode>(), XdpMode::ALL.map(XdpMode::name));
        assert_eq!(words::<ZeroCopy>(), ["auto", "on", "off"]);
        assert_eq!(words::<AqmMode>(), AqmMode::ALL.map(AqmMode::name));
        assert_eq!(words::<Sockets>(), [Sockets::Auto, Sockets::PerQueue, Sockets::PerCpu].map(Sockets::name));
        fn helps<T: ValueEnum>() -> usize {
            T::value_variants().iter().filter(|v| v.to_possible_value().unwrap().get_help().is_some()).count()
        }
        assert_eq!(
            helps::<PollMode>() + helps::<XdpMode>() + helps::<ZeroCopy>() + helps::<Sockets>(),
            0,
            "a value with help makes `--help` list the values on lines of their own"
        );
    }
}
