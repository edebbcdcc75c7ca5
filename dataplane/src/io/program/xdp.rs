//! Loading and attaching bpf/xfwd.bpf.c.
//!
//! The object is compiled by clang at build time (see `build.rs`) and embedded in the binary. It
//! is loaded with libbpf-rs's `Object` API rather than the generated skeleton: the skeleton
//! borrows from storage outside itself, which would make this owner self-referential, and the
//! maps are easily found by name. What the program and this loader share is written once, in
//! `bpf/xfwd_abi.h`, and made into [`abi`] at build time.
//!
//! Attachment is a **bpf_link** per port (`bpf_link_create` with the XDP mode flag): the kernel
//! detaches the program when the last reference to the link goes away, so a crash, `kill -9`
//! included, never leaves a program behind. The older netlink attachment would stay.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use libbpf_rs::{MapCore, MapFlags, MapHandle, Object, ObjectBuilder};

use std::net::Ipv4Addr;

use crate::io::setup::options::{DataPath, XdpMode};
use crate::io::setup::port::PortInfo;
use crate::l3::export::{self, FastHop};
use crate::l3::prefix::{IpPrefix, PrefixAddr};
use crate::l3::{Key6, NeighborTable, NeighborTable6, RouterTables};
use crate::wire::MacAddr;
use crate::{PortId, MAX_PORTS, MAX_QUEUES};

pub use super::maps::{abi, WireAddr, XdpError};
use super::maps::{map_err, route_value};

const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xfwd.bpf.o"));

pub use abi::XdpCounter;

// The header's limits and wire numbers against the Rust side's own: a difference fails the build.
const _: () = {
    use crate::wire::{ethernet, icmp, icmpv6, ipv4, ipv6};
    assert!(abi::XFWD_MAX_PORTS as usize == MAX_PORTS && abi::XFWD_MAX_QUEUES as usize == MAX_QUEUES);
    assert!(abi::XFWD_ETH_HLEN as usize == ethernet::HEADER_LEN);
    assert!(abi::XFWD_ETHERTYPE_IPV4 as u16 == ethernet::ETHERTYPE_IPV4);
    assert!(abi::XFWD_ETHERTYPE_IPV6 as u16 == ethernet::ETHERTYPE_IPV6);
    assert!(abi::XFWD_ETHERTYPE_VLAN as u16 == ethernet::ETHERTYPE_VLAN);
    assert!(abi::XFWD_VLAN_TAG_LEN as usize == ethernet::VLAN_TAG_LEN);
    assert!(abi::XFWD_IPV4_MIN_HLEN as usize == ipv4::MIN_HEADER_LEN);
    assert!(abi::XFWD_IPV4_MAX_HLEN as usize == ipv4::MAX_HEADER_LEN);
    assert!(abi::XFWD_PROTO_ICMP as u8 == ipv4::PROTO_ICMP);
    assert!(abi::XFWD_ICMP_ECHO_REQUEST as u8 == icmp::ECHO_REQUEST);
    assert!(abi::XFWD_IPV6_HLEN as usize == ipv6::HEADER_LEN);
    assert!(abi::XFWD_NEXT_HEADER_ICMPV6 as u8 == ipv6::NEXT_HEADER_ICMPV6);
    assert!(abi::XFWD_ICMPV6_ECHO_REQUEST as u8 == icmpv6::ECHO_REQUEST);
    assert!(abi::XFWD_NR_CONFIG == abi::XFWD_CONFIG_DIR4 + 1);
};

/// Bytes the program adds to a redirected frame when stamping (`XFWD_STAMP_LEN`): the
/// arrival time (`CLOCK_MONOTONIC` ns), then the stamp key, both in host byte order; at the
/// frame's end where it can grow there, else in front of it.
pub const STAMP_LEN: usize = abi::XFWD_STAMP_LEN as usize;
/// Longest frame the program stamps (as `XFWD_STAMP_MAX_FRAME` computes it): grown by the stamp
/// it must still fit a UMEM frame past the kernel's headroom.
pub const STAMP_MAX_FRAME: usize = 2048 - 256 - STAMP_LEN;
/// Longest frame an AF_XDP socket of xfwd takes: a UMEM frame past the kernel's headroom. The
/// program drops longer ones as [`XdpCounter::DropTooLong`] (written to `XFWD_CONFIG_MAX_FRAME`).
pub const MAX_FRAME: u32 = crate::io::frames::xsk::FRAME_SIZE - crate::io::frames::xsk::XDP_HEADROOM;

/// Most local addresses the router-mode program knows (`XFWD_MAX_LOCAL`).
pub const MAX_LOCAL: usize = abi::XFWD_MAX_LOCAL as usize;

/// What a local address is to the router-mode program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalKind {
    /// One of the box's addresses: ICMP (ICMPv6) echo requests to it go to xfwd, the rest to
    /// the kernel.
    Address,
    /// A connected subnet's broadcast address: to the kernel.
    Broadcast,
}

/// What the program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramMode<'a> {
    /// Learning bridge: everything but link-local groups to the workers.
    Bridge,
    /// Router: IPv4 and IPv6 to be forwarded and echo requests to `local` addresses to the
    /// workers.
    Router {
        /// The box's addresses and its subnets' broadcast addresses.
        local: &'a [(std::net::IpAddr, LocalKind)],
        /// Neighbours each family's map holds (the workers' `limits.neighbors`), so that the
        /// program knows every neighbour the workers do.
        neighbors: u32,
    },
}

/// How the program picks a frame's socket (`XFWD_STEER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// By the frame's queue index: slot = queue.
    ByQueue,
    /// By the CPU that received the frame (slot = CPU mod [`MAX_QUEUES`]); every socket is
    /// bound to `queue`, and a frame on another queue goes to the kernel, counted.
    ByCpu {
        /// The queue the sockets are bound to.
        queue: u32,
    },
}

/// The maps of the box's addresses (router mode): traffic to them is the kernel's, but for
/// echo requests. Held by the thread that mirrors the kernel's addresses.
pub struct LocalMaps {
    v4: MapHandle,
    v6: MapHandle,
}

impl std::fmt::Debug for LocalMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMaps").finish_non_exhaustive()
    }
}

impl LocalMaps {
    fn pick(&self, a: std::net::IpAddr) -> (&MapHandle, &'static str, Vec<u8>) {
        match a {
            std::net::IpAddr::V4(a) => (&self.v4, "xfwd_local", a.octets().to_vec()),
            std::net::IpAddr::V6(a) => (&self.v6, "xfwd_local6", a.octets().to_vec()),
        }
    }

    /// Adds or changes one address.
    pub fn set(&self, a: std::net::IpAddr, kind: LocalKind) -> Result<(), XdpError> {
        let value: u32 = match kind {
            LocalKind::Address => abi::XFWD_LOCAL_ADDRESS,
            LocalKind::Broadcast => abi::XFWD_LOCAL_BROADCAST,
        };
        let (m, name, key) = self.pick(a);
        m.update(&key, &value.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| XdpError::Map { map: name, cause: format!("{e:#}") })
    }

    /// Removes one address (absent: nothing to do).
    pub fn remove(&self, a: std::net::IpAddr) {
        let (m, _, key) = self.pick(a);
        let _ = m.delete(&key);
    }
}

/// The loaded program and its maps; attachments are made with [`XdpProgram::attach`].
pub struct XdpProgram {
    // Kept so the program fd stays open while links are created.
    object: Object,
    xsks: MapHandle,
    counters: MapHandle,
    missed_queue: MapHandle,
    links: Vec<XdpLink>,
    /// Loaded with the XDP path in it.
    built: bool,
}

impl std::fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpProgram").field("links", &self.links).finish()
    }
}

/// One attachment: a bpf_link fd. Dropping it detaches the program from that interface.
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    /// The interface it is attached to.
    pub ifindex: u32,
    /// The mode the kernel accepted.
    pub mode: XdpMode,
}

impl XdpProgram {
    /// Loads the program for `mode` and `path`, picking sockets as `steer` says, and registers
    /// `ports` (in order: the first is port 0). Nothing is attached yet.
    /// With `stamp` (its key), every redirected frame carries its arrival time ([`STAMP_LEN`]).
    /// Loaded for [`DataPath::AfXdp`], the program holds no instruction of the XDP path (the
    /// verifier removes them): that path cannot be turned on later ([`FastMaps::set_path`]).
    pub fn load(
        ports: &[PortInfo],
        (mode, path): (ProgramMode, DataPath),
        steer: Steer,
        stamp: Option<u64>,
    ) -> Result<XdpProgram, XdpError> {
        if ports.len() > MAX_PORTS {
            return Err(XdpError::Limit(format!("at most {MAX_PORTS} ports, {} given", ports.len())));
        }
        let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(|e| XdpError::Load(format!("{e:#}")))?;
        let built = path == DataPath::Xdp;
        if let ProgramMode::Router { neighbors, .. } = mode {
            for name in ["xfwd_neigh4", "xfwd_neigh6"] {
                let mut m = open.maps_mut().find(|m| m.name() == name).ok_or(XdpError::Missing(name))?;
                m.set_max_entries(neighbors.max(1))
                    .map_err(|e| XdpError::Map { map: name, cause: format!("{e:#}") })?;
            }
        }
        open.maps_mut()
            .find(|m| m.name() == RODATA)
            .ok_or(XdpError::Missing("its .rodata.xfwd section"))?
            .set_initial_value(&u32::from(built).to_ne_bytes())
            .map_err(|e| XdpError::Map { map: RODATA_NAME, cause: format!("{e:#}") })?;
        let object = open.load().map_err(|e| XdpError::Load(format!("{e:#}")))?;
        let map = |name: &'static str| -> Result<MapHandle, XdpError> {
            let m = object.maps().find(|m| m.name() == name).ok_or(XdpError::Missing(name))?;
            MapHandle::try_from(&m).map_err(|e| XdpError::Map { map: name, cause: format!("{e:#}") })
        };
        let port_map = map("xfwd_ports")?;
        let xsks = map("xfwd_xsks")?;
        let counters = map("xfwd_counters")?;
        let missed_queue = map("xfwd_missed_queue")?;
        let config = map("xfwd_config")?;
        let local = map("xfwd_local")?;
        let local6 = map("xfwd_local6")?;
        let mode_value: u32 = match mode {
            ProgramMode::Bridge => abi::XFWD_MODE_BRIDGE,
            ProgramMode::Router { .. } => abi::XFWD_MODE_ROUTER,
        };
        let (steer_value, queue): (u32, u32) = match steer {
            Steer::ByQueue => (abi::XFWD_STEER_QUEUE, 0),
            Steer::ByCpu { queue } => (abi::XFWD_STEER_CPU, queue),
        };
        // The AF_XDP path until [`FastMaps::set_path`] says otherwise; no flooding in the
        // program until [`FastMaps::set_flood`].
        let key = stamp.unwrap_or(0);
        let slots = [
            (abi::XFWD_CONFIG_MODE, mode_value),
            (abi::XFWD_CONFIG_STEER, steer_value),
            (abi::XFWD_CONFIG_QUEUE, queue),
            (abi::XFWD_CONFIG_STAMP, u32::from(stamp.is_some())),
            (abi::XFWD_CONFIG_KEY_LO, key as u32),
            (abi::XFWD_CONFIG_KEY_HI, (key >> 32) as u32),
            (abi::XFWD_CONFIG_MAX_FRAME, MAX_FRAME),
            (abi::XFWD_CONFIG_PATH, abi::XFWD_PATH_AF_XDP),
            (abi::XFWD_CONFIG_FLOOD, 0),
            (abi::XFWD_CONFIG_DIR4, abi::XFWD_DIR4_NONE),
        ];
        for (slot, value) in slots {
            config
                .update(&slot.to_ne_bytes(), &value.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| XdpError::Map { map: "xfwd_config", cause: format!("{e:#}") })?;
        }
        if let ProgramMode::Router { local: addrs, .. } = mode {
            if addrs.len() > MAX_LOCAL {
                return Err(XdpError::Limit(format!(
                    "at most {MAX_LOCAL} local addresses, {} configured",
                    addrs.len()
                )));
            }
            for (a, kind) in addrs {
                let value: u32 = match kind {
                    LocalKind::Address => abi::XFWD_LOCAL_ADDRESS,
                    LocalKind::Broadcast => abi::XFWD_LOCAL_BROADCAST,
                };
                // The key is the address as it stands in the packet: network byte order.
                let (m, name, key) = match a {
                    std::net::IpAddr::V4(a) => (&local, "xfwd_local", a.octets().to_vec()),
                    std::net::IpAddr::V6(a) => (&local6, "xfwd_local6", a.octets().to_vec()),
                };
                m.update(&key, &value.to_ne_bytes(), MapFlags::ANY)
                    .map_err(|e| XdpError::Map { map: name, cause: format!("{e:#}") })?;
            }
        }
        for (i, p) in ports.iter().enumerate() {
            port_map
                .update(&p.ifindex.to_ne_bytes(), &(i as u32).to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| XdpError::Map { map: "xfwd_ports", cause: format!("{e:#}") })?;
        }
        Ok(XdpProgram { object, xsks, counters, missed_queue, links: Vec::new(), built })
    }

    /// Runs the program once on `frame` as if it had arrived on `ifindex`, queue `queue`
    /// (`BPF_PROG_TEST_RUN`; nothing is attached or sent, but the counters count it): the
    /// verdict (`XDP_*`) and the frame as the program left it. For tests and per-frame timing.
    pub fn test_run(&mut self, frame: &[u8], ifindex: u32, queue: u32) -> Result<(u32, Vec<u8>), XdpError> {
        self.run(frame, ifindex, queue, 1).map(|(verdict, out, _)| (verdict, out))
    }

    /// Runs the program `repeat` times on `frame` in the kernel (`BPF_PROG_TEST_RUN` with a
    /// repeat count), as [`XdpProgram::test_run`] does once: the last verdict and the mean time
    /// of one run, as the kernel measured it. The runs share one buffer, so a program that
    /// changes the frame sees its own changes from the second run on.
    pub fn time_run(
        &mut self,
        frame: &[u8],
        ifindex: u32,
        queue: u32,
        repeat: u32,
    ) -> Result<(u32, std::time::Duration), XdpError> {
        self.run(frame, ifindex, queue, repeat).map(|(verdict, _, took)| (verdict, took))
    }

    fn run(
        &mut self,
        frame: &[u8],
        ifindex: u32,
        queue: u32,
        repeat: u32,
    ) -> Result<(u32, Vec<u8>, std::time::Duration), XdpError> {
        let prog =
            self.object.progs_mut().find(|p| p.name() == "xfwd_xdp").ok_or(XdpError::Missing("program xfwd_xdp"))?;
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex; the kernel wants data 0 and data_end the frame's length.
        let md = [0, frame.len() as u32, 0, ifindex, queue, 0];
        let mut ctx: Vec<u8> = md.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mut out = vec![0u8; frame.len() + 256];
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx),
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat,
            ..Default::default()
        };
        let output = prog.test_run(input).map_err(|e| XdpError::TestRun(format!("{e:#}")))?;
        let (verdict, took) = (output.return_value, output.duration);
        let len = output.data.map_or(0, |d| d.len());
        out.truncate(len);
        Ok((verdict, out, took))
    }

    /// Handles on the maps of the box's addresses, for a thread that keeps them in step with
    /// the kernel's (`[fib] source = "kernel"`).
    pub fn local_maps(&self) -> Result<LocalMaps, XdpError> {
        let map = |name: &'static str| -> Result<MapHandle, XdpError> {
            let m = self.object.maps().find(|m| m.name() == name).ok_or(XdpError::Missing(name))?;
            MapHandle::try_from(&m).map_err(|e| XdpError::Map { map: name, cause: format!("{e:#}") })
        };
        Ok(LocalMaps { v4: map("xfwd_local")?, v6: map("xfwd_local6")? })
    }

    /// Handles on the XDP path's maps (router mode), for whoever keeps them in step with the
    /// workers' tables.
    pub fn fast_maps(&self) -> Result<FastMaps, XdpError> {
        let map = |name: &'static str| -> Result<MapHandle, XdpError> {
            let m = self.object.maps().find(|m| m.name() == name).ok_or(XdpError::Missing(name))?;
            MapHandle::try_from(&m).map_err(|e| XdpError::Map { map: name, cause: format!("{e:#}") })
        };
        Ok(FastMaps {
            built: self.built,
            config: map("xfwd_config")?,
            dir4: super::dir4::Dir4::new(map("xfwd_dir4")?, map("xfwd_config")?),
            fib6: RouteTable {
                outer: map("xfwd_fib6")?,
                trie: None,
                spare: None,
                name: "xfwd_fib6_trie",
                max: MAX_ROUTES6,
            },
            neigh4: map("xfwd_neigh4")?,
            neigh6: map("xfwd_neigh6")?,
            port_macs: map("xfwd_port_macs")?,
            egress: map("xfwd_egress")?,
            fdb: map("xfwd_fdb")?,
        })
    }

    /// Makes frames of `port` in `slot` (their queue, or their CPU's slot: [`Steer`]) go to
    /// the AF_XDP socket `fd`.
    pub fn register_socket(&self, port: usize, slot: u32, fd: RawFd) -> Result<(), XdpError> {
        if slot as usize >= MAX_QUEUES {
            return Err(XdpError::Limit(format!("queue {slot} is beyond the {MAX_QUEUES} queues the program maps")));
        }
        let key = (port * MAX_QUEUES) as u32 + slot;
        self.xsks
            .update(&key.to_ne_bytes(), &(fd as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| XdpError::Map { map: "xfwd_xsks", cause: format!("{e:#}") })
    }

    /// How many instructions of the program the kernel kept after verifying it
    /// (`bpf_prog_info.xlated_prog_len`, 8 bytes an instruction): what the verifier removed as
    /// never reached is not counted.
    pub fn instructions(&self) -> Result<u32, XdpError> {
        let prog = self.object.progs().find(|p| p.name() == "xfwd_xdp").ok_or(XdpError::Missing("program xfwd_xdp"))?;
        let mut info = libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: `info` is a zeroed `bpf_prog_info` of `len` bytes that outlives the call, and
        // every pointer in it is null (no arrays are asked for); the fd is the loaded program's,
        // open while `self.object` lives.
        let ret = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len) };
        if ret != 0 {
            return Err(XdpError::Load(format!(
                "reading the program's info: {}",
                std::io::Error::from_raw_os_error(-ret)
            )));
        }
        Ok(info.xlated_prog_len / 8)
    }

    /// Attaches the program to `ifindex` in `mode` (for `Auto`: native, else generic) and keeps
    /// the link. Returns the mode the kernel accepted.
    pub fn attach(&mut self, ifindex: u32, mode: XdpMode) -> Result<XdpMode, String> {
        let prog =
            self.object.progs().find(|p| p.name() == "xfwd_xdp").ok_or("the XDP object has no program xfwd_xdp")?;
        let prog_fd = prog.as_fd().as_raw_fd();
        let tries: &[XdpMode] = match mode {
            XdpMode::Auto => &[XdpMode::Native, XdpMode::Generic],
            XdpMode::Native => &[XdpMode::Native],
            XdpMode::Generic => &[XdpMode::Generic],
        };
        let mut last = String::new();
        for &m in tries {
            match link_create(prog_fd, ifindex, m) {
                Ok(fd) => {
                    self.links.push(XdpLink { fd, ifindex, mode: m });
                    return Ok(m);
                }
                Err(e) if m == XdpMode::Native && e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    last = format!("native mode: {e}; the driver has no native XDP: use --xdp-mode generic (or auto)")
                }
                // Another program is there: no other mode can help.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EEXIST | libc::EBUSY)) => {
                    return Err(format!("{m} mode: {e}; {}", attached_program(prog.as_fd(), ifindex)));
                }
                Err(e) => last = format!("{m} mode: {e}"),
            }
        }
        Err(last)
    }

    /// The attachments made so far.
    pub fn links(&self) -> &[XdpLink] {
        &self.links
    }

    /// Detaches from every interface (also done on drop).
    pub fn detach_all(&mut self) {
        self.links.clear();
    }

    /// A reader of the program's counters that other threads can own.
    pub fn counter_reader(&self) -> Result<XdpCounters, XdpError> {
        let map = MapHandle::try_from(&self.counters)
            .map_err(|e| XdpError::Map { map: "xfwd_counters", cause: format!("{e:#}") })?;
        let missed_queue = MapHandle::try_from(&self.missed_queue)
            .map_err(|e| XdpError::Map { map: "xfwd_missed_queue", cause: format!("{e:#}") })?;
        Ok(XdpCounters { map, missed_queue })
    }
}

/// `struct xfwd_mac_key`: the MAC, padded to 8 bytes.
fn mac_key(mac: MacAddr) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..6].copy_from_slice(&mac.0);
    k
}

/// `struct xfwd_station`: the port, padding, the last-seen time.
fn station_value(port: PortId, seen_ns: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(&u32::from(port.0).to_ne_bytes());
    v[8..].copy_from_slice(&seen_ns.to_ne_bytes());
    v
}

/// The program's clock for stations (`bpf_ktime_get_coarse_ns`: `CLOCK_MONOTONIC_COARSE`, a
/// tick's resolution) in nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The section holding `xfwd_fast_built`, as libbpf names its map, and its name in errors.
const RODATA: &str = ".rodata.xfwd";
const RODATA_NAME: &str = "xfwd_fast_built";

/// Most stations the bridge's XDP path holds (`XFWD_MAX_STATIONS`): the workers forward frames
/// of those beyond.
pub const MAX_STATIONS: usize = abi::XFWD_MAX_STATIONS as usize;
/// Most IPv6 routes the XDP path holds (`XFWD_MAX_ROUTES6`): a full IPv6 table with a million
/// host routes beside it. The tries take memory per route, not per slot.
pub const MAX_ROUTES6: u32 = abi::XFWD_MAX_ROUTES6;

/// The IPv6 routes in the program: the one-slot map of maps it reads, the LPM trie in
/// that slot now (`None`: none yet, every IPv6 frame is the workers'), and an empty
/// trie beside it that the next whole load fills. Both are made at the first load, while xfwd
/// still holds its privileges: creating a map takes `CAP_BPF`, which xfwd drops once started,
/// whereas writing one through an fd it holds does not. A reload fills the spare, swaps it in,
/// and empties the trie it replaced, which becomes the spare.
struct RouteTable {
    outer: MapHandle,
    trie: Option<MapHandle>,
    spare: Option<MapHandle>,
    /// The inner map's name (`xfwd_fib6_trie`) and most entries.
    name: &'static str,
    max: u32,
}

/// Whether `routes` fit a trie `name` of `max` entries, else why not and what to do.
fn route_room(name: &str, max: u32, routes: usize) -> Result<(), XdpError> {
    if routes <= max as usize {
        return Ok(());
    }
    Err(XdpError::Limit(format!(
        "the XDP path's IPv6 table holds at most {max} routes, {routes} given ({name}): forward with the AF_XDP path (`--path af-xdp`) or with fewer routes"
    )))
}

impl RouteTable {
    /// Whether a table of `routes` fits (the kernel would refuse the first route beyond with
    /// ENOSPC, which names nothing).
    fn room(&self, routes: usize) -> Result<(), XdpError> {
        route_room(self.name, self.max, routes)
    }

    /// Writes one route ([`lpm_key`], [`route_value`]).
    fn write<A: PrefixAddr + WireAddr>(
        trie: &MapHandle,
        name: &'static str,
        p: IpPrefix<A>,
        hop: Option<FastHop<A>>,
    ) -> Result<(), XdpError> {
        trie.update(&lpm_key(p), &route_value(hop), MapFlags::ANY).map_err(map_err(name))
    }

    /// A new, empty trie for addresses of type `A` (takes `CAP_BPF`).
    fn create<A: PrefixAddr + WireAddr>(&self) -> Result<MapHandle, XdpError> {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_sys::BPF_F_NO_PREALLOC,
            ..Default::default()
        };
        let width = std::mem::size_of::<A::Wire>() as u32;
        MapHandle::create(libbpf_rs::MapType::LpmTrie, Some(self.name), 4 + width, 12 + width, self.max, &opts)
            .map_err(map_err(self.name))
    }

    /// Removes every route of `trie` (one the program no longer reads); whether it is empty.
    fn clear(trie: &MapHandle) -> bool {
        let keys: Vec<Vec<u8>> = trie.keys().collect();
        for key in keys {
            let _ = trie.delete(&key);
        }
        trie.keys().next().is_none()
    }

    /// Writes `routes` into `next`, then puts it in the program's slot in one write.
    fn fill<A: PrefixAddr + WireAddr>(&self, next: &MapHandle, routes: &export::FastRoutes<A>) -> Result<(), XdpError> {
        for (prefix, hop) in routes {
            Self::write(next, self.name, *prefix, *hop)?;
        }
        let fd = next.as_fd().as_raw_fd() as u32;
        self.outer.update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY).map_err(map_err(self.name))
    }

    /// The spare trie filled with `routes`, then put in the program's slot in one write; the
    /// trie it replaced, emptied, is the next spare. A spare is checked empty first: a route
    /// left in it (a delete that failed) would otherwise come back with the new table.
    fn load<A: PrefixAddr + WireAddr>(&mut self, routes: &export::FastRoutes<A>) -> Result<(), XdpError> {
        self.room(routes.len())?;
        let next = match self.spare.take() {
            Some(t) => t,
            None => self.create::<A>()?,
        };
        let filled = if Self::clear(&next) {
            self.fill(&next, routes)
        } else {
            Err(XdpError::Map { map: self.name, cause: "the spare table could not be emptied".into() })
        };
        if let Err(e) = filled {
            Self::clear(&next);
            self.spare = Some(next);
            return Err(e);
        }
        // The kernel returns from an update of a map of maps only once no program still runs
        // with the inner map it replaced (synchronize_rcu): the old trie can be emptied now.
        match self.trie.replace(next) {
            Some(old) => {
                Self::clear(&old);
                self.spare = Some(old);
            }
            None => self.spare = Some(self.create::<A>()?),
        }
        Ok(())
    }

    fn update<A: PrefixAddr + WireAddr>(
        &mut self,
        old: &export::FastRoutes<A>,
        new: &export::FastRoutes<A>,
    ) -> Result<usize, XdpError> {
        let Some(trie) = &self.trie else {
            self.load(new)?;
            return Ok(new.len());
        };
        self.room(new.len())?;
        let (set, gone) = export::diff(old, new);
        for (prefix, hop) in &set {
            Self::write(trie, self.name, *prefix, *hop)?;
        }
        for prefix in &gone {
            let _ = trie.delete(&lpm_key(*prefix));
        }
        Ok(set.len() + gone.len())
    }

    /// What the kernel charges for the trie in the slot and the spare beside it.
    fn memory(&self) -> Option<u64> {
        let charged = |t: &MapHandle| -> Option<u64> {
            let fd = t.as_fd().as_raw_fd();
            let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
            info.lines().find_map(|l| l.strip_prefix("memlock:")).and_then(|v| v.trim().parse().ok())
        };
        let live = charged(self.trie.as_ref()?)?;
        Some(live + self.spare.as_ref().and_then(charged).unwrap_or(0))
    }
}

/// The XDP path's maps: the routes of each family (an LPM trie in a one-slot map of maps), the
/// neighbours, and the ports' MACs and devmap entries, as [`crate::l3::export`] takes them from
/// the workers' tables (router); the stations (bridge). The program reads whatever entry is
/// there when a frame comes: each write below replaces one entry whole, and
/// [`FastMaps::load_routes`] replaces a family's whole route table in one write.
pub struct FastMaps {
    /// The program carries the XDP path ([`XdpProgram::load`]).
    built: bool,
    config: MapHandle,
    dir4: super::dir4::Dir4,
    fib6: RouteTable,
    neigh4: MapHandle,
    neigh6: MapHandle,
    port_macs: MapHandle,
    egress: MapHandle,
    fdb: MapHandle,
}

impl FastMaps {
    /// How many IPv4 and IPv6 neighbours the program's maps hold at most (`XFWD_MAX_NEIGH`),
    /// as the loaded maps say.
    pub fn neighbor_room(&self) -> (usize, usize) {
        (self.neigh4.max_entries() as usize, self.neigh6.max_entries() as usize)
    }

    /// The kernel's id of the program's devmap (`xfwd_egress`), which names it in the
    /// redirect tracepoints ([`crate::io::probe::refused`]).
    pub fn egress_id(&self) -> Result<u32, XdpError> {
        Ok(self.egress.info().map_err(map_err("xfwd_egress"))?.info.id)
    }
}

impl std::fmt::Debug for FastMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastMaps").finish_non_exhaustive()
    }
}

impl FastMaps {
    /// Turns the XDP path on (`true`: the program forwards the common case itself) or off.
    /// Refused ([`XdpError::NotBuilt`]) to turn on in a program loaded for the AF_XDP path.
    pub fn set_path(&self, xdp: bool) -> Result<(), XdpError> {
        if xdp && !self.built {
            return Err(XdpError::NotBuilt);
        }
        let value = if xdp { abi::XFWD_PATH_XDP } else { abi::XFWD_PATH_AF_XDP };
        self.config
            .update(&abi::XFWD_CONFIG_PATH.to_ne_bytes(), &value.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("xfwd_config"))
    }

    /// Makes `port` (interface `ifindex`, MAC `mac`) an egress the program redirects to: its
    /// devmap entry first, then its MAC marked ready; not `ready`, the program hands the frames
    /// sent out of it to the workers (a driver that does not take redirected frames), as it
    /// does (bridge) a frame longer than `max_frame` ([`crate::io::frame_max`] of its MTU: the
    /// kernel would drop it in the redirect, uncounted; the workers count it), (router) a
    /// packet longer than `ifindex`'s MTU as the program reads it per frame, and known unicast
    /// between two `isolated` bridge ports (the workers drop it as isolated).
    pub fn set_port(
        &self,
        port: PortId,
        ifindex: u32,
        mac: MacAddr,
        (ready, isolated): (bool, bool),
        max_frame: u32,
    ) -> Result<(), XdpError> {
        let key = u32::from(port.0).to_ne_bytes();
        self.egress.update(&key, &ifindex.to_ne_bytes(), MapFlags::ANY).map_err(map_err("xfwd_egress"))?;
        let mut value = [0u8; 16];
        value[..6].copy_from_slice(&mac.0);
        (value[6], value[7]) = (u8::from(ready), u8::from(isolated));
        value[8..12].copy_from_slice(&max_frame.to_ne_bytes());
        value[12..].copy_from_slice(&ifindex.to_ne_bytes());
        self.port_macs.update(&key, &value, MapFlags::ANY).map_err(map_err("xfwd_port_macs"))
    }

    /// Makes the program's IPv4 table `t`'s ([`super::dir4::Dir4::follow`]): the workers' FIB,
    /// copied whole or, where `t` says which prefixes changed since the tables the program
    /// holds, repainted under them, aside, then put in the program's slot in one write.
    pub fn follow4(&mut self, t: &RouterTables) -> Result<super::dir4::Followed, XdpError> {
        self.dir4.follow(t)
    }

    /// Waits until no program runs with the IPv4 set switched from ([`super::dir4::Dir4::settle`]):
    /// the next [`FastMaps::follow4`] then writes it at once.
    pub fn settle4(&mut self) -> Result<(), XdpError> {
        self.dir4.settle()
    }

    /// Replaces the whole IPv6 route table with `routes`: a new table is made and filled
    /// aside, then put in the program's slot in one write; the old one goes once no frame
    /// holds it.
    pub fn load_routes(&mut self, routes: &export::FastRoutes6) -> Result<(), XdpError> {
        self.fib6.load(routes)
    }

    /// Turns IPv6 route table `old` (the one in the program) into `new`, entry by entry in
    /// the order [`export::diff`] gives. Every frame meanwhile finds each route either as it
    /// was or as it will be. Returns the routes changed.
    pub fn update_routes(&mut self, old: &export::FastRoutes6, new: &export::FastRoutes6) -> Result<usize, XdpError> {
        self.fib6.update(old, new)
    }

    /// Sets IPv4 neighbour `addr` on `port`: at `mac`.
    pub fn set_neighbor(&self, addr: Ipv4Addr, port: PortId, mac: MacAddr) -> Result<(), XdpError> {
        self.neigh4
            .update(&neighbor_key(&addr.octets(), port), &neighbor_value(port, mac), MapFlags::ANY)
            .map_err(map_err("xfwd_neigh4"))
    }

    /// Forgets IPv4 neighbour `addr` on `port` (absent: nothing to do).
    pub fn remove_neighbor(&self, addr: Ipv4Addr, port: PortId) {
        let _ = self.neigh4.delete(&neighbor_key(&addr.octets(), port));
    }

    /// Sets IPv6 neighbour `key` on `port`: at `mac`.
    pub fn set_neighbor6(&self, key: Key6, port: PortId, mac: MacAddr) -> Result<(), XdpError> {
        self.neigh6
            .update(&neighbor_key(&key.addr.octets(), port), &neighbor_value(port, mac), MapFlags::ANY)
            .map_err(map_err("xfwd_neigh6"))
    }

    /// Forgets IPv6 neighbour `key` on `port` (absent: nothing to do).
    pub fn remove_neighbor6(&self, key: Key6, port: PortId) {
        let _ = self.neigh6.delete(&neighbor_key(&key.addr.octets(), port));
    }

    /// Bridge: lets the program flood frames of up to `max_frame` bytes (the longest every
    /// port takes, while every port takes redirected frames), or, with 0, leaves flooding to
    /// the workers.
    pub fn set_flood(&self, max_frame: u32) -> Result<(), XdpError> {
        self.config
            .update(&abi::XFWD_CONFIG_FLOOD.to_ne_bytes(), &max_frame.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("xfwd_config"))
    }

    /// Bridge: station `mac` is behind `port`, seen now (the kernel's monotonic clock).
    pub fn set_station(&self, mac: MacAddr, port: PortId) -> Result<(), XdpError> {
        self.fdb.update(&mac_key(mac), &station_value(port, monotonic_ns()), MapFlags::ANY).map_err(map_err("xfwd_fdb"))
    }

    /// Bridge: station `mac` forgotten (aged out, or beyond what the map holds).
    pub fn remove_station(&self, mac: MacAddr) {
        let _ = self.fdb.delete(&mac_key(mac));
    }

    /// Bridge: the stations the program knows, each with its port and how long ago the
    /// program last forwarded a frame from it (or it was written).
    pub fn stations(&self) -> Vec<(MacAddr, PortId, std::time::Duration)> {
        let now = monotonic_ns();
        self.fdb
            .keys()
            .filter_map(|k| {
                let v = self.fdb.lookup(&k, MapFlags::ANY).ok()??;
                let mac = MacAddr(k.get(..6)?.try_into().ok()?);
                let port = u32::from_ne_bytes(v.get(..4)?.try_into().ok()?);
                let seen = u64::from_ne_bytes(v.get(8..16)?.try_into().ok()?);
                Some((mac, PortId(port as u8), std::time::Duration::from_nanos(now.saturating_sub(seen))))
            })
            .collect()
    }

    /// Bytes the kernel charges for the route tables in the program, both families (their
    /// `memlock` in fdinfo), if it says.
    pub fn routes_memory(&self) -> Option<u64> {
        match (self.dir4.memory(), self.fib6.memory()) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        }
    }

    /// Writes `neighbors` and `neighbors6`, then all of `t`'s routes, IPv4
    /// ([`FastMaps::follow4`]) and IPv6 ([`FastMaps::load_routes`]).
    pub fn load(
        &mut self,
        t: &RouterTables,
        neighbors: &NeighborTable,
        neighbors6: &NeighborTable6,
    ) -> Result<(), XdpError> {
        for (a, port, mac) in export::neighbors4(neighbors) {
            self.set_neighbor(a, port, mac)?;
        }
        for (k, port, mac) in export::neighbors6(neighbors6) {
            self.set_neighbor6(k, port, mac)?;
        }
        self.follow4(t)?;
        self.load_routes(&export::fib6(t))
    }
}

/// `struct xfwd_neigh`: the port, the MAC, padding.
fn neighbor_value(port: PortId, mac: MacAddr) -> [u8; 12] {
    let mut value = [0u8; 12];
    value[..4].copy_from_slice(&u32::from(port.0).to_ne_bytes());
    value[4..10].copy_from_slice(&mac.0);
    value
}

/// `struct xfwd_neigh4_key` or `xfwd_neigh6_key`: the address as on the wire, then the port
/// (host order): a neighbour is an address on a port, as in the workers' table.
fn neighbor_key(addr: &[u8], port: PortId) -> Vec<u8> {
    let mut key = addr.to_vec();
    key.extend_from_slice(&u32::from(port.0).to_ne_bytes());
    key
}

/// `struct xfwd_lpm4` or `xfwd_lpm6` for `p`: its length (host order), then its address as on
/// the wire.
fn lpm_key<A: PrefixAddr + WireAddr>(p: IpPrefix<A>) -> Vec<u8> {
    let mut key = u32::from(p.prefix_len()).to_ne_bytes().to_vec();
    key.extend_from_slice(p.addr().wire().as_ref());
    key
}

/// Reads the XDP program's per-CPU counters (owned handles on the maps).
#[derive(Debug)]
pub struct XdpCounters {
    map: MapHandle,
    missed_queue: MapHandle,
}

impl XdpCounters {
    /// The program's counters for `port`, summed over CPUs, in [`XdpCounter::ALL`] order.
    pub fn port(&self, port: usize) -> [u64; XdpCounter::COUNT] {
        self.row(port)
    }

    /// The highest queue index a frame arrived on at `port` with no socket bound there, over
    /// all CPUs; `None` while every frame found its socket.
    pub fn missed_queue(&self, port: usize) -> Option<u32> {
        let key = port as u32;
        let per_cpu = self.missed_queue.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY).ok()??;
        let highest =
            per_cpu.iter().filter_map(|v| v.get(..4).and_then(|b| b.try_into().ok())).map(u32::from_ne_bytes).max()?;
        highest.checked_sub(1)
    }

    /// Frames seen on interfaces that are not registered ports (should stay 0).
    pub fn foreign_frames(&self) -> u64 {
        self.row(MAX_PORTS)[XdpCounter::PassNoSocket as usize]
    }

    fn row(&self, row: usize) -> [u64; XdpCounter::COUNT] {
        let mut out = [0u64; XdpCounter::COUNT];
        for (i, slot) in out.iter_mut().enumerate() {
            let key = (row * XdpCounter::COUNT + i) as u32;
            if let Ok(Some(per_cpu)) = self.map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY) {
                *slot = per_cpu
                    .iter()
                    .filter_map(|v| v.get(..8).and_then(|b| b.try_into().ok()))
                    .map(u64::from_ne_bytes)
                    .sum();
            }
        }
        out
    }
}

impl AsRawFd for XdpLink {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// `bpf_link_create(prog, ifindex, BPF_XDP, flags)`: an XDP attachment owned by an fd.
/// What holds the XDP hook of `ifindex`: the attached program's id, name and mode, whose it
/// likely is, and how to free the port (asked with our own program's fd, `prog`).
fn attached_program(prog: std::os::fd::BorrowedFd<'_>, ifindex: u32) -> String {
    let name = crate::io::setup::port::name_of(ifindex).unwrap_or_else(|| format!("ifindex {ifindex}"));
    let fix = format!(
        "see it with `bpftool net show dev {name}` (or `xfwd doctor {name}`), and detach it with `ip link set dev {name} xdp off` if nothing needs it"
    );
    let Ok(q) = libbpf_rs::Xdp::new(prog).query(ifindex as i32, libbpf_rs::XdpFlags::NONE) else {
        return format!("another XDP program holds the port; {fix}");
    };
    let (id, mode) =
        [(q.drv_prog_id, "native"), (q.skb_prog_id, "generic"), (q.hw_prog_id, "offloaded"), (q.prog_id, "")]
            .into_iter()
            .find(|(id, _)| *id != 0)
            .unwrap_or((0, ""));
    if id == 0 {
        return format!("another XDP program holds the port (it may have just gone); {fix}");
    }
    let prog_name = libbpf_rs::query::ProgInfoIter::default()
        .find(|p| p.id == id)
        .map(|p| p.name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let whose = if prog_name == "xfwd_xdp" {
        let others = other_xfwds();
        if others.is_empty() {
            ": another xfwd's (stop it first)".to_owned()
        } else {
            format!(": another xfwd's (running: pid {}; stop it first)", others.join(", "))
        }
    } else {
        String::new()
    };
    let mode = if mode.is_empty() { String::new() } else { format!(", {mode} mode") };
    format!("an XDP program is already attached (id {id}, name \"{prog_name}\"{mode}){whose}; {fix}")
}

/// Pids of the other processes named `xfwd`.
pub fn other_xfwds() -> Vec<String> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<String> = dir
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()) && *pid != me)
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "xfwd"))
        .collect();
    pids.sort_by_key(|p| p.parse::<u32>().unwrap_or(0));
    pids
}

fn link_create(prog_fd: RawFd, ifindex: u32, mode: XdpMode) -> Result<OwnedFd, std::io::Error> {
    let flags = match mode {
        XdpMode::Native => libbpf_sys::XDP_FLAGS_DRV_MODE,
        XdpMode::Generic => libbpf_sys::XDP_FLAGS_SKB_MODE,
        XdpMode::Auto => 0,
    };
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        flags,
        ..Default::default()
    };
    // SAFETY: `prog_fd` is the loaded program's fd, kept open by `self.object` for the call;
    // `opts` is a fully initialised options struct whose `sz` names its own size, as libbpf's
    // OPTS convention requires; libbpf reads it and returns a new fd or a negative errno.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog_fd, ifindex as i32, libbpf_sys::BPF_XDP, &opts) };
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: libbpf returned a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `BPF_F_NO_PREALLOC` (include/uapi/linux/bpf.h).
    const NO_PREALLOC: u32 = 1;

    #[test]
    fn a_table_beyond_the_xdp_paths_room_is_refused_by_name_with_the_way_out() {
        assert!(route_room("xfwd_fib6_trie", MAX_ROUTES6, MAX_ROUTES6 as usize).is_ok());
        let e = route_room("xfwd_fib6_trie", MAX_ROUTES6, MAX_ROUTES6 as usize + 1).unwrap_err().to_string();
        assert!(e.contains("IPv6 table holds at most 2097152 routes, 2097153 given"), "{e}");
        assert!(e.contains("--path af-xdp"), "{e}");
        // A full IPv6 table (~200,000) with a million destinations' routes beside it fits.
        assert!(MAX_ROUTES6 as usize >= 1_200_004);
    }

    #[test]
    fn the_neighbour_maps_free_a_replaced_entry_only_after_the_programs_reading_it() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert_ne!(std::env::var("XFWD_REQUIRE_ROOT_TESTS").as_deref(), Ok("1"), "needs root to load a program");
            eprintln!("SKIP: needs root to load a BPF program");
            return;
        }
        // A preallocated hash map reuses a replaced element at once: a frame reading a
        // neighbour while it is replaced could take another's MAC. Not preallocated, the
        // element outlives every program that may hold it.
        let lo = crate::io::PortInfo::read("lo").unwrap();
        let p = XdpProgram::load(
            &[lo],
            (ProgramMode::Router { local: &[], neighbors: 64 }, DataPath::Xdp),
            Steer::ByQueue,
            None,
        )
        .unwrap();
        for name in ["xfwd_neigh4", "xfwd_neigh6"] {
            let map = p.object.maps().find(|m| m.name() == name).unwrap_or_else(|| panic!("no {name}"));
            let flags = map.info().unwrap().info.map_flags;
            assert_eq!(flags & NO_PREALLOC, NO_PREALLOC, "{name}: flags {flags:#x}");
        }
    }
}
