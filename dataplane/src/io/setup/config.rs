//! What to start ([`ForwarderConfig`]: ports, workers, mode) and why a start failed
//! ([`StartError`]). Plain data: the CLI builds it; starting plans it and carries it out.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::port::PortError;
use super::settings::{Refusal, WorkerOptions};
use crate::io::program::xdp::XdpError;
use crate::l3::tables::{RouteTarget4, RouteTarget6, RouterLimits};
use crate::l3::{Prefix, Prefix6};
use crate::wire::MacAddr;

/// What to start.
#[derive(Debug, Clone)]
pub struct ForwarderConfig {
    /// Port names, in port order.
    pub ports: Vec<String>,
    /// The worker options: their values, checked by [`WorkerOptions::check`].
    pub workers: WorkerOptions,
    /// What the ports do.
    pub mode: Mode,
}

/// What a forwarder does with its ports.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Learning bridge.
    Bridge {
        /// FDB capacity (entries).
        fdb_size: usize,
        /// FDB ageing time, seconds.
        ageing_s: u32,
        /// Per-port settings and static stations.
        settings: BridgeSettings,
    },
    /// IPv4 router (boxed: it is much larger than the bridge's settings).
    Router(Box<RouterSetup>),
}

/// A bridge's per-port settings (as `bridge link set` gives them) and its static stations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgeSettings {
    /// Each port's settings, in port order; empty for the defaults everywhere.
    pub ports: Vec<crate::l2::PortPolicy>,
    /// Stations that never age and never move: a MAC and its port.
    pub statics: Vec<(MacAddr, crate::PortId)>,
}

impl BridgeSettings {
    /// Whether this is a plain learning bridge: every port at its defaults, no static entry.
    pub fn is_default(&self) -> bool {
        self.ports.iter().all(|p| p.is_default()) && self.statics.is_empty()
    }

    /// The settings as the decision reads them, for `n` ports.
    pub fn policies(&self, n: usize) -> crate::l2::Policies {
        if self.ports.is_empty() {
            crate::l2::Policies::uniform(n)
        } else {
            crate::l2::Policies::new(&self.ports)
        }
    }
}

/// The router's configuration, in port order.
#[derive(Debug, Clone)]
pub struct RouterSetup {
    /// Each port's addresses (same order as the ports).
    pub addresses: Vec<Vec<(Ipv4Addr, u8)>>,
    /// Each port's IPv6 addresses (same order; empty where it has none).
    pub addresses6: Vec<Vec<(Ipv6Addr, u8)>>,
    /// Each port's link-local address where it is configured (else the kernel's is used).
    pub link_locals: Vec<Option<Ipv6Addr>>,
    /// Static routes.
    pub routes: Vec<(Prefix, RouteTarget4)>,
    /// Static IPv6 routes.
    pub routes6: Vec<(Prefix6, RouteTarget6)>,
    /// Static neighbours.
    pub neighbors: Vec<(Ipv4Addr, MacAddr)>,
    /// Static IPv6 neighbours.
    pub neighbors6: Vec<(Ipv6Addr, MacAddr)>,
    /// Limits.
    pub limits: RouterLimits,
    /// Where the routes come from.
    pub fib: FibSource,
}

/// Where the router's routes, addresses and neighbours come from (the router file's `[fib]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FibSource {
    /// The router file: its addresses, routes and static neighbours; xfwd resolves.
    #[default]
    Config,
    /// The kernel: its addresses, the routes of its local table and of `table`, followed over
    /// rtnetlink; the kernel resolves neighbours.
    Kernel {
        /// The routing table mirrored besides the local one (254: main).
        table: u32,
        /// Receive buffer of the notification socket, bytes: what a burst of changes must fit
        /// in between two reads (an overrun costs a full resynchronisation).
        buffer: usize,
    },
}

/// Why what was asked for cannot work, whatever the options: each with the data to word it,
/// and the fix where there is one.
#[derive(Debug, thiserror::Error)]
pub enum Request {
    /// A bridge over fewer than two ports.
    #[error("a bridge needs at least two ports")]
    BridgePorts,
    /// More ports than the XDP program has room for.
    #[error("at most {max} ports, {given} given")]
    TooManyPorts {
        /// Ports given.
        given: usize,
        /// The most there may be.
        max: usize,
    },
    /// An FDB of no entries.
    #[error("--fdb-size must be at least 1")]
    FdbSize,
    /// Bridge settings that do not match its ports (a caller's bug: the config checks first).
    #[error("the bridge's per-port settings name {given} ports and {ports} are bridged")]
    BridgeSettings {
        /// Ports in the settings.
        given: usize,
        /// Ports bridged.
        ports: usize,
    },
    /// Static entries that do not fit the FDB (their buckets full of other static ones).
    #[error("static entry {mac}: no room in the FDB for it among the other static entries; raise fdb_size")]
    StaticsFull {
        /// The entry that did not fit.
        mac: MacAddr,
    },
    /// A router whose ports' addresses do not match its ports.
    #[error("every port needs its addresses")]
    Addresses,
    /// An IPv6 address on a link below IPv6's minimum MTU (RFC 8200 section 5): no Packet Too
    /// Big could name an MTU a sender may use.
    #[error("{port}: MTU {mtu} is below IPv6's minimum of 1280; raise it (ip link set {port} mtu 1280) or give the port no IPv6 address")]
    Ipv6Mtu {
        /// The port.
        port: String,
        /// Its MTU.
        mtu: u32,
    },
    /// The routes given cannot make tables.
    #[error(transparent)]
    Tables(#[from] crate::l3::tables::TablesError),
    /// The kernel's routing the mirror cannot follow (policy rules, a table without default).
    #[error(transparent)]
    KernelRouting(crate::routes::kernel::SyncError),
    /// More local addresses and broadcasts in the kernel than the XDP program holds.
    #[error("the kernel has {count} local addresses and broadcasts; the XDP program holds at most {max}")]
    TooManyLocal {
        /// Addresses the kernel has.
        count: usize,
        /// The most the program holds.
        max: usize,
    },
}

/// Why a forwarder did not start. Nothing is left attached or bound when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A port cannot be used (the message names it and says what to do).
    #[error(transparent)]
    Port(#[from] PortError),
    /// The options cannot work (the caller words it: it knows where each value came from).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The request itself cannot work (port count, addresses, the tables it gives).
    #[error(transparent)]
    Request(#[from] Request),
    /// The XDP program could not be loaded.
    #[error(transparent)]
    Xdp(#[from] XdpError),
    /// The system refused something that should have worked (a thread, memory).
    #[error("{0}")]
    System(String),
    /// `--path xdp` with ports whose drivers do not take frames an XDP program redirects to
    /// them: each named with its features and the fix.
    #[error("--path xdp: {}", .0.join("; "))]
    NoRedirects(Vec<String>),
    /// Dropping privileges before the threads start failed.
    #[error("dropping privileges: {0}")]
    Privileges(String),
}

impl StartError {
    /// Whether the user can fix this by changing the request or the ports (exit code 2), as
    /// opposed to a failure of the system (exit code 1).
    pub fn is_usage(&self) -> bool {
        !matches!(
            self,
            StartError::System(_)
                | StartError::Privileges(_)
                | StartError::Xdp(
                    XdpError::Load(_) | XdpError::Map { .. } | XdpError::Missing(_) | XdpError::TestRun(_)
                )
        )
    }
}
