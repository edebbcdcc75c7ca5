//! The worker options, each declared once. The table at the end of this module
//! (`worker_options!`) gives every option its type, its default, its command-line flag and
//! its key in the router's file; from it come:
//!
//! - [`WorkerOptions`], the values a start uses (inside [`crate::io::ForwarderConfig`]), with the
//!   table's defaults as its [`Default`];
//! - [`Opt`], an option's names, for messages;
//! - [`Layer`], what one source gave, each value with its [`Source`], and
//!   [`WorkerOptions::merge`]: defaults, then the file, then the flags, remembering in
//!   [`Origins`] where each value came from;
//! - with the `clap` feature, `WorkerFlags`, the flags the command line flattens in.
//!
//! Adding an option is one row of the table and the code that uses its value.
//!
//! The checks across options are one function, [`WorkerOptions::check`], whose refusal
//! ([`Refusal`]) names options, not flags: only the caller knows whether the user wrote
//! `--aqm-target` or `aqm.target` at `router.toml:5:10`, and words it
//! ([`Refusal::describe`] with the names it chooses).
//!
//! Why a macro rather than a const array of descriptors: the options have different types
//! (durations, counts, modes, core lists), and an array would hold them as text or behind a
//! trait object, so that every use would parse or downcast again. The macro keeps one row per
//! option and gives each a typed field.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::options::{AqmMode, DataPath, PollMode, RtPriority, Sockets, XdpMode, ZeroCopy};
use crate::io::frames::xsk::RingSizes;
use crate::MAX_QUEUES;

/// The smallest and largest send buffer `--sndbuf` takes, in bytes.
pub const SNDBUF_MIN: u32 = 65_536;
/// See [`SNDBUF_MIN`].
pub const SNDBUF_MAX: u32 = 268_435_456;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Source {
    /// Nobody gave it: the table's default.
    #[default]
    Default,
    /// The router's file, at this place.
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
    },
    /// The command line.
    Flag,
}

/// A value as a file gives it, whatever the file's format: what [`OptionValue::from_file`]
/// reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Given<'a> {
    /// A string.
    Text(&'a str),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A list of integers.
    Ints(Vec<i64>),
    /// Anything else (a table, a float, a list of something else): named for the error.
    Other(&'static str),
}

impl Given<'_> {
    /// What this is, for an error that expected something else.
    fn kind(&self) -> String {
        match self {
            Given::Text(t) => format!("`\"{t}\"`"),
            Given::Int(i) => format!("`{i}`"),
            Given::Bool(b) => format!("`{b}`"),
            Given::Ints(_) => "a list".into(),
            Given::Other(what) => (*what).into(),
        }
    }
}

/// The type of an option's value.
pub trait OptionValue: Sized + Clone {
    /// The value a file gives; the error is a phrase that follows the option's name
    /// ("`sometimes` is not one of busy, adaptive").
    fn from_file(given: &Given<'_>) -> Result<Self, String>;
    /// The value as a user writes it (`5ms`, `fq-codel`, `0,1`).
    fn show(&self) -> String;
}

/// Why a value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not a duration.
    #[error("`{0}` is not a duration: write a number and a unit, such as 500us, 500ms, 1s, 5m or 2h")]
    Duration(String),
    /// Not a core list.
    #[error("`{0}` is not a core list: write core numbers and ranges, such as 0,2 or 0-3")]
    Cores(String),
}

/// Parses a duration such as `500us`, `500ms`, `1s`, `1.5s`, `5m`, `2h` (a bare number means
/// seconds), and tc's unit names (`usec`, `msec`, `sec`), so that a value written for tc's CoDel
/// (`target 500us`) is taken as it is.
pub fn parse_duration(text: &str) -> Result<Duration, ValueError> {
    let err = || ValueError::Duration(text.to_owned());
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| err())?;
    let scale = match unit.trim() {
        "us" | "µs" | "usec" => 1e-6,
        "ms" | "msec" => 1e-3,
        "" | "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(err()),
    };
    let secs = value * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a core list such as `0,2` or `0-3` or `1,4-5`, keeping the order given.
pub fn parse_cores(text: &str) -> Result<Vec<usize>, ValueError> {
    let err = || ValueError::Cores(text.to_owned());
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| err())?;
                let b: usize = b.trim().parse().map_err(|_| err())?;
                if b < a || b - a > 4096 {
                    return Err(err());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| err())?),
        }
    }
    if out.is_empty() {
        return Err(err());
    }
    Ok(out)
}

/// The cores of the workers: a list, in queue order, or each worker on the CPU of its queue's
/// interrupt on the first port (which the command line finds before the start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cores {
    /// These cores.
    List(Vec<usize>),
    /// The interrupts' CPUs.
    Irq,
}

impl FromStr for Cores {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<Cores, ValueError> {
        if text == "irq" {
            return Ok(Cores::Irq);
        }
        parse_cores(text).map(Cores::List)
    }
}

impl fmt::Display for Cores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cores::Irq => f.write_str("irq"),
            Cores::List(l) => f.write_str(&l.iter().map(usize::to_string).collect::<Vec<_>>().join(",")),
        }
    }
}

impl OptionValue for Cores {
    fn from_file(given: &Given<'_>) -> Result<Cores, String> {
        match given {
            Given::Ints(list) if !list.is_empty() => list
                .iter()
                .map(|&c| usize::try_from(c).map_err(|_| format!("`{c}` is not a core number")))
                .collect::<Result<Vec<_>, _>>()
                .map(Cores::List),
            Given::Text(t) => t.parse().map_err(|e: ValueError| e.to_string()),
            other => Err(format!("expects a list of core numbers such as [0, 1], not {}", other.kind())),
        }
    }

    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptionValue for Duration {
    fn from_file(given: &Given<'_>) -> Result<Duration, String> {
        match given {
            Given::Text(t) => parse_duration(t).map_err(|e| e.to_string()),
            other => Err(format!("expects a duration such as \"5ms\", not {}", other.kind())),
        }
    }

    fn show(&self) -> String {
        format!("{self:?}")
    }
}

impl OptionValue for bool {
    fn from_file(given: &Given<'_>) -> Result<bool, String> {
        match given {
            Given::Bool(b) => Ok(*b),
            other => Err(format!("expects true or false, not {}", other.kind())),
        }
    }

    fn show(&self) -> String {
        self.to_string()
    }
}

/// Counts: an integer of the type's range.
macro_rules! count_value {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            fn from_file(given: &Given<'_>) -> Result<$t, String> {
                match given {
                    Given::Int(i) => <$t>::try_from(*i)
                        .map_err(|_| format!("`{i}` is out of range (0 to {})", <$t>::MAX)),
                    other => Err(format!("expects a whole number, not {}", other.kind())),
                }
            }

            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
count_value!(u16, u32);

impl OptionValue for RtPriority {
    fn from_file(given: &Given<'_>) -> Result<RtPriority, String> {
        match given {
            Given::Text(t) => t.parse(),
            Given::Int(i) => i.to_string().parse(),
            other => Err(format!("expects \"off\", \"auto\" or a priority from 1 to 99, not {}", other.kind())),
        }
    }

    fn show(&self) -> String {
        self.to_string()
    }
}

/// Modes: one of their words.
macro_rules! word_value {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            fn from_file(given: &Given<'_>) -> Result<$t, String> {
                let words = || <$t>::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ");
                match given {
                    Given::Text(t) => <$t>::ALL
                        .iter()
                        .copied()
                        .find(|v| v.name() == *t)
                        .ok_or_else(|| format!("`{t}` is not one of {}", words())),
                    other => Err(format!("expects one of {}, not {}", words(), other.kind())),
                }
            }

            fn show(&self) -> String {
                self.name().to_owned()
            }
        }
    )*};
}
word_value!(PollMode, XdpMode, ZeroCopy, Sockets, AqmMode, DataPath);

/// Why the options cannot work together, or one cannot work at all. The options are named by
/// the caller ([`Refusal::describe`]); [`fmt::Display`] names them by their flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A count of zero.
    AtLeastOne(Opt),
    /// A duration of zero.
    AboveZero(Opt),
    /// A number outside its range.
    OutOfRange {
        /// The option.
        opt: Opt,
        /// Its value.
        given: u64,
        /// The smallest allowed.
        min: u64,
        /// The largest allowed.
        max: u64,
    },
    /// A ring size that is not a power of two from [`RingSizes::MIN`] to [`RingSizes::MAX`].
    RingSize {
        /// The ring's option.
        opt: Opt,
        /// Its size.
        given: u32,
    },
    /// CoDel's target not below its interval.
    TargetNotBelowInterval {
        /// The target.
        target: Duration,
        /// The interval.
        interval: Duration,
    },
    /// A fixed real-time priority for workers that never sleep.
    RealTimeBusy,
    /// Per-CPU sockets in native XDP mode.
    PerCpuNative,
    /// Zero-copy sockets fed by generic XDP.
    ZeroCopyGeneric,
    /// More workers than the XDP program has sockets for.
    TooManyQueues {
        /// The count asked for.
        asked: u32,
    },
    /// Fewer cores listed than workers.
    TooFewCores {
        /// Cores listed.
        given: usize,
        /// Workers.
        queues: u32,
    },
    /// A listed core that the machine does not have.
    NoSuchCore {
        /// The core.
        core: usize,
        /// The machine's cores.
        ncores: usize,
    },
    /// `irq` reached the start: the command line resolves it to a list first.
    CoresIrqUnresolved,
}

/// Each option named by its flag.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(&|o: Opt| o.flag().to_owned()))
    }
}

impl std::error::Error for Refusal {}

impl Refusal {
    /// The options to change, the one to look at first first.
    pub fn options(&self) -> Vec<Opt> {
        match self {
            Refusal::AtLeastOne(o) | Refusal::AboveZero(o) => vec![*o],
            Refusal::OutOfRange { opt, .. } | Refusal::RingSize { opt, .. } => vec![*opt],
            Refusal::TargetNotBelowInterval { .. } => vec![Opt::AqmTarget, Opt::AqmInterval],
            Refusal::RealTimeBusy => vec![Opt::RtPriority, Opt::Poll],
            Refusal::PerCpuNative => vec![Opt::Sockets, Opt::XdpMode],
            Refusal::ZeroCopyGeneric => vec![Opt::ZeroCopy, Opt::XdpMode],
            Refusal::TooManyQueues { .. } => vec![Opt::Queues],
            Refusal::TooFewCores { .. } | Refusal::NoSuchCore { .. } | Refusal::CoresIrqUnresolved => {
                vec![Opt::Cores]
            }
        }
    }

    /// What is wrong and what to do, each option called what `name` calls it.
    pub fn describe(&self, name: &dyn Fn(Opt) -> String) -> String {
        let n = |o| name(o);
        match self {
            Refusal::AtLeastOne(o) => format!("{} must be at least 1", n(*o)),
            Refusal::AboveZero(o) => format!("{} must be above zero", n(*o)),
            Refusal::OutOfRange { opt, given, min, max } => format!("{} {given}: give {min} to {max}", n(*opt)),
            Refusal::RingSize { opt, given } => format!(
                "{} {given}: give a power of two from {} to {} (the kernel's rings index with a mask)",
                n(*opt),
                RingSizes::MIN,
                RingSizes::MAX
            ),
            Refusal::TargetNotBelowInterval { target, interval } => format!(
                "{} ({target:?}) must be below {} ({interval:?}); RFC 8289's defaults are 5ms and 100ms",
                n(Opt::AqmTarget),
                n(Opt::AqmInterval)
            ),
            Refusal::RealTimeBusy => format!(
                "{} with {} busy: a real-time worker that never sleeps takes its core from everything else, the kernel's own threads included; use adaptive polling",
                n(Opt::RtPriority),
                n(Opt::Poll)
            ),
            Refusal::PerCpuNative => format!(
                "{} per-cpu with {} native: in native mode a queue's frames are taken on one CPU at a time, so no CPU has frames of its own to hand over; use generic mode",
                n(Opt::Sockets),
                n(Opt::XdpMode)
            ),
            Refusal::ZeroCopyGeneric => format!(
                "{} on with {} generic: zero-copy needs the driver's native XDP",
                n(Opt::ZeroCopy),
                n(Opt::XdpMode)
            ),
            Refusal::TooManyQueues { asked } => format!("{} {asked}: at most {MAX_QUEUES} queues", n(Opt::Queues)),
            Refusal::TooFewCores { given, queues } => {
                format!("{} names {given} core(s) for {queues} queue(s); give one core per queue", n(Opt::Cores))
            }
            Refusal::NoSuchCore { core, ncores } => {
                format!("{}: core {core} does not exist (cores 0..{})", n(Opt::Cores), ncores.saturating_sub(1))
            }
            Refusal::CoresIrqUnresolved => {
                format!("{} irq: the interrupts' CPUs must be found before the start", n(Opt::Cores))
            }
        }
    }
}

impl WorkerOptions {
    /// Refuses what cannot work whatever the ports: each value alone, then together.
    pub fn check(&self) -> Result<(), Refusal> {
        if self.queues == Some(0) {
            return Err(Refusal::AtLeastOne(Opt::Queues));
        }
        if let Some(q) = self.queues.filter(|&q| q as usize > MAX_QUEUES) {
            return Err(Refusal::TooManyQueues { asked: q });
        }
        if let Some(b) = self.tx_budget.filter(|b| !(32..=2048).contains(b)) {
            return Err(Refusal::OutOfRange { opt: Opt::TxBudget, given: b.into(), min: 32, max: 2048 });
        }
        if let Some(b) = self.sndbuf.filter(|b| !(SNDBUF_MIN..=SNDBUF_MAX).contains(b)) {
            return Err(Refusal::OutOfRange {
                opt: Opt::SndBuf,
                given: b.into(),
                min: SNDBUF_MIN.into(),
                max: SNDBUF_MAX.into(),
            });
        }
        if let RtPriority::Fixed(p) = self.rt_priority {
            if !(1..=99).contains(&p) {
                return Err(Refusal::OutOfRange { opt: Opt::RtPriority, given: p.into(), min: 1, max: 99 });
            }
            if self.poll == PollMode::Busy {
                return Err(Refusal::RealTimeBusy);
            }
        }
        if self.aqm != AqmMode::Off {
            for (opt, d) in [(Opt::AqmTarget, self.aqm_target), (Opt::AqmInterval, self.aqm_interval)] {
                if d.is_zero() {
                    return Err(Refusal::AboveZero(opt));
                }
            }
            if self.aqm_target >= self.aqm_interval {
                return Err(Refusal::TargetNotBelowInterval { target: self.aqm_target, interval: self.aqm_interval });
            }
        }
        let rings = [
            (Opt::RxRing, self.rx_ring),
            (Opt::TxRing, self.tx_ring),
            (Opt::FillRing, self.fill_ring),
            (Opt::CompletionRing, self.completion_ring),
        ];
        if let Some((opt, given)) =
            rings.into_iter().find(|(_, n)| !n.is_power_of_two() || !(RingSizes::MIN..=RingSizes::MAX).contains(n))
        {
            return Err(Refusal::RingSize { opt, given });
        }
        if (self.sockets, self.xdp_mode) == (Sockets::PerCpu, XdpMode::Native) {
            return Err(Refusal::PerCpuNative);
        }
        if (self.zero_copy, self.xdp_mode) == (ZeroCopy::On, XdpMode::Generic) {
            return Err(Refusal::ZeroCopyGeneric);
        }
        Ok(())
    }

    /// The sockets' ring sizes.
    pub fn rings(&self) -> RingSizes {
        RingSizes { rx: self.rx_ring, tx: self.tx_ring, fill: self.fill_ring, completion: self.completion_ring }
    }
}

/// The type a start uses for an option of type `$t`: `Option<$t>` where the default is
/// `auto` (chosen at start: `None`), `$t` otherwise.
macro_rules! resolved {
    ($t:ty, auto) => { Option<$t> };
    ($t:ty, ($d:expr)) => { $t };
}

/// The default of an option.
macro_rules! default_of {
    (auto) => {
        None
    };
    (($d:expr)) => {
        $d
    };
}

/// A given value as the start takes it.
macro_rules! resolve {
    (auto, $v:expr) => {
        Some($v)
    };
    (($d:expr), $v:expr) => {
        $v
    };
}

/// An option's value as a user writes it; `(automatic)` where the start chooses.
macro_rules! show_of {
    (auto, $v:expr) => {
        $v.as_ref().map_or_else(|| "(automatic)".to_owned(), OptionValue::show)
    };
    (($d:expr), $v:expr) => {
        OptionValue::show($v)
    };
}

/// The table. A row: its doc comment (the flag's help: keep the `[default: …]` in it true),
/// `name: Type = default` (`auto`: chosen at start, else an expression in parentheses), its
/// [`Opt`] variant, `flag "name"` (with any further `#[arg(…)]` settings in brackets), and
/// `file "table.key"`.
macro_rules! worker_options {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $t:ty = $default:tt, $variant:ident,
            flag $flag:literal $([$($arg:tt)*])?, file $key:literal;
    )*) => {
        /// A worker option, for messages: its flag and its key in the router's file.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Opt {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Opt {
            /// Every option, in the table's order.
            pub const ALL: &'static [Opt] = &[$(Opt::$variant,)*];

            /// `--flag`.
            pub fn flag(self) -> &'static str {
                match self { $(Opt::$variant => concat!("--", $flag),)* }
            }

            /// `table.key` in the router's file.
            pub fn key(self) -> &'static str {
                match self { $(Opt::$variant => $key,)* }
            }

            /// The option whose key in the router's file is `key` (`table.key`).
            pub fn by_key(key: &str) -> Option<Opt> {
                Opt::ALL.iter().copied().find(|o| o.key() == key)
            }
        }

        /// The worker options a start uses.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct WorkerOptions {
            $($(#[doc = $doc])* pub $name: resolved!($t, $default),)*
        }

        /// The table's defaults.
        impl Default for WorkerOptions {
            fn default() -> WorkerOptions {
                WorkerOptions { $($name: default_of!($default),)* }
            }
        }

        impl WorkerOptions {
            /// `opt`'s value as a user writes it.
            pub fn show(&self, opt: Opt) -> String {
                match opt { $(Opt::$variant => show_of!($default, &self.$name),)* }
            }

            /// The defaults overridden by each layer in turn (later ones win), and where each
            /// value came from.
            pub fn merge(layers: &[&Layer]) -> (WorkerOptions, Origins) {
                let mut options = WorkerOptions::default();
                let mut origins = Origins::default();
                for layer in layers {
                    $(if let Some((v, source)) = &layer.$name {
                        options.$name = resolve!($default, v.clone());
                        origins.$name = source.clone();
                    })*
                }
                (options, origins)
            }
        }

        /// What one source gave, each value with where it came from; `None`: not given.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Layer {
            $($(#[doc = $doc])* pub $name: Option<($t, Source)>,)*
        }

        impl Layer {
            /// Sets `opt` from a file's value; the error is a phrase to follow its name.
            pub fn set_from_file(&mut self, opt: Opt, given: &Given<'_>, source: Source) -> Result<(), String> {
                match opt { $(Opt::$variant => self.$name = Some((OptionValue::from_file(given)?, source)),)* }
                Ok(())
            }

            /// Whether `opt` is given.
            pub fn has(&self, opt: Opt) -> bool {
                match opt { $(Opt::$variant => self.$name.is_some(),)* }
            }
        }

        /// Where each value of a [`WorkerOptions`] came from.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Origins {
            $($(#[doc = $doc])* pub $name: Source,)*
        }

        impl Origins {
            /// Where `opt`'s value came from.
            pub fn of(&self, opt: Opt) -> &Source {
                match opt { $(Opt::$variant => &self.$name,)* }
            }
        }

        /// The worker options as command-line flags (`None`: not given).
        #[cfg(feature = "clap")]
        #[derive(Debug, Clone, clap::Args)]
        pub struct WorkerFlags {
            $($(#[doc = $doc])* #[arg(long = $flag $(, $($arg)*)?)] pub $name: Option<$t>,)*
        }

        #[cfg(feature = "clap")]
        impl WorkerFlags {
            /// The flags given, as a layer.
            pub fn layer(&self) -> Layer {
                Layer { $($name: self.$name.clone().map(|v| (v, Source::Flag)),)* }
            }
        }
    };
}

worker_options! {
    /// af-xdp forwards every frame in the workers; xdp forwards the common case in the XDP
    /// program (the router: IPv4 and IPv6 through resolved next hops; the bridge: known
    /// stations, and floods) and the rest in the workers [default: af-xdp].
    path: DataPath = (DataPath::AfXdp), Path, flag "path", file "workers.path";
    /// Workers, one per queue id [default: the smallest RX queue count of the ports, capped by cores].
    queues: u32 = auto, Queues, flag "queues", file "workers.queues";
    /// Core of each worker, in queue order, e.g. 0,1 or 2-3; or `irq`: each worker on the CPU
    /// of its queue's interrupt on the first port [default: queue i on core i].
    cores: Cores = auto, Cores, flag "cores", file "workers.cores";
    /// How workers wait for frames: busy spins; adaptive sleeps in poll(2) when idle [default: adaptive].
    poll: PollMode = (PollMode::Adaptive), Poll, flag "poll", file "workers.poll";
    /// How the XDP program attaches: native (driver), generic, or auto (native if possible) [default: auto].
    xdp_mode: XdpMode = (XdpMode::Auto), XdpMode, flag "xdp-mode", file "workers.xdp_mode";
    /// AF_XDP zero-copy: auto uses it where every port's driver supports it [default: auto].
    zero_copy: ZeroCopy = (ZeroCopy::Auto), ZeroCopy, flag "zero-copy", file "workers.zero_copy";
    /// Socket layout: per-queue (worker i on queue i), per-cpu (every worker on queue 0, chosen
    /// by the CPU a frame arrived on, for drivers that give all frames queue 0), or auto
    /// (per-cpu in generic XDP mode on veth and dpaa_eth) [default: auto].
    sockets: Sockets = (Sockets::Auto), Sockets, flag "sockets", file "workers.sockets";
    /// Queue management, on the time since the XDP program stamped each frame: fq-codel (flow
    /// queues before each TX ring, served fairly, new flows first, CoDel per flow), codel (CoDel
    /// on the RX rings: drop, or mark ECN-capable frames, once frames have waited longer than
    /// --aqm-target for --aqm-interval) or off [default: fq-codel].
    aqm: AqmMode = (AqmMode::FqCodel), Aqm, flag "aqm", file "aqm.mode";
    /// CoDel's target sojourn time [default: 5ms].
    aqm_target: Duration = (Duration::from_millis(5)), AqmTarget,
        flag "aqm-target" [value_parser = parse_duration], file "aqm.target";
    /// CoDel's interval [default: 100ms].
    aqm_interval: Duration = (Duration::from_millis(100)), AqmInterval,
        flag "aqm-interval" [value_parser = parse_duration], file "aqm.interval";
    /// Back each worker's UMEM with 2 MiB huge pages (reserve them first: vm.nr_hugepages).
    huge_pages: bool = (false), HugePages,
        flag "huge-pages" [num_args = 0..=1, require_equals = true, default_missing_value = "true"],
        file "workers.huge_pages";
    /// With --poll busy: prefer busy polling, this many frames per poll of the driver (e.g. 64)
    /// [default: 0, off: on veth it measured no different].
    busy_poll_budget: u16 = (0), BusyPollBudget, flag "busy-poll-budget", file "workers.busy_poll_budget";
    /// Copy mode: frames one TX kick may send, 32 to 2048 (Linux 6.17+) [default: the kernel's 32].
    tx_budget: u32 = auto, TxBudget, flag "tx-budget", file "workers.tx_budget";
    /// Copy mode: bytes of frames each socket may have on their way out (its send buffer,
    /// `SO_SNDBUFFORCE`: a frame's buffer is charged to it until the driver frees it), 65536 to
    /// 268435456 [default: the kernel's, net.core.wmem_default].
    sndbuf: u32 = auto, SndBuf, flag "sndbuf", file "workers.sndbuf";
    /// Descriptors in each socket's RX ring: a power of two, 64 to 4096 [default: 512].
    rx_ring: u32 = (RingSizes::default().rx), RxRing, flag "rx-ring", file "workers.rx_ring";
    /// Descriptors in each socket's TX ring: a power of two, 64 to 4096 [default: 512].
    tx_ring: u32 = (RingSizes::default().tx), TxRing, flag "tx-ring", file "workers.tx_ring";
    /// Descriptors in each (port, queue)'s fill ring: a power of two, 64 to 4096 [default: 512].
    fill_ring: u32 = (RingSizes::default().fill), FillRing, flag "fill-ring", file "workers.fill_ring";
    /// Descriptors in each (port, queue)'s completion ring: a power of two, 64 to 4096
    /// [default: 512].
    completion_ring: u32 = (RingSizes::default().completion), CompletionRing,
        flag "completion-ring", file "workers.completion_ring";
    /// Workers under SCHED_FIFO, ahead of ordinary processes as the kernel's own packet
    /// processing is: auto (priority 10 where allowed, said otherwise; off with --poll busy),
    /// off, or a priority 1-99 (refused if not allowed) [default: auto].
    rt_priority: RtPriority = (RtPriority::Auto), RtPriority, flag "rt-priority", file "workers.rt_priority";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_buffer_outside_its_range_is_refused_naming_the_option() {
        let with = |b| WorkerOptions { sndbuf: Some(b), ..WorkerOptions::default() };
        assert_eq!(with(SNDBUF_MIN).check(), Ok(()));
        assert_eq!(with(SNDBUF_MAX).check(), Ok(()));
        let e = with(SNDBUF_MIN - 1).check().unwrap_err();
        assert_eq!(e, Refusal::OutOfRange { opt: Opt::SndBuf, given: 65_535, min: 65_536, max: 268_435_456 });
    }
}
