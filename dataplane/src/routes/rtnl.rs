//! rtnetlink: the kernel's routes, nexthop objects, addresses, links, neighbours and policy
//! rules, dumped and followed, as [`crate::routes::mirror`] events; and the requests xfwd makes of
//! the kernel's neighbour table (resolve this address: `NTF_USE`).
//!
//! Messages are parsed by `netlink-packet-route`, except nexthop objects (`RTM_NEWNEXTHOP`,
//! `RTM_DELNEXTHOP`), which it does not know: their header and attributes are read here with
//! `netlink-packet-core`'s attribute iterator.
//!
//! Two sockets: one subscribed to the groups before anything is dumped (so that no change is
//! missed between a dump and the first notification), one for dumps and requests. A
//! notification read after a dump is newer than what the dump said, so applying the dump
//! first and the notifications after it gives the kernel's state.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NlaBuffer, NlasIterator, NLM_F_APPEND, NLM_F_CREATE,
    NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_EXCL, NLM_F_MULTIPART, NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteNextHop, RouteNextHopFlags,
    RouteType, RouteVia,
};
use netlink_packet_route::rule::{RuleAttribute, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::l3::{Prefix, Prefix6};
use crate::routes::mirror::{Event, KernelPath, KernelRoute, KernelType, Nexthop, Place};
use crate::wire::MacAddr;

const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const RTM_GETNEXTHOP: u16 = 106;
const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// The groups the following socket joins: links, neighbours, IPv4 and IPv6 addresses,
/// routes and policy rules, nexthop objects.
const GROUPS: [u32; 9] = [
    libc::RTNLGRP_IPV4_RULE,
    libc::RTNLGRP_IPV6_RULE,
    libc::RTNLGRP_LINK,
    libc::RTNLGRP_NEIGH,
    libc::RTNLGRP_IPV4_IFADDR,
    libc::RTNLGRP_IPV4_ROUTE,
    libc::RTNLGRP_IPV6_IFADDR,
    libc::RTNLGRP_IPV6_ROUTE,
    libc::RTNLGRP_NEXTHOP,
];

/// A neighbour entry of the kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelNeighbor {
    /// Interface.
    pub ifindex: u32,
    /// Address.
    pub ip: IpAddr,
    /// Its MAC where the entry is usable (reachable, stale, delay, probe, permanent, noarp);
    /// `None` when it failed or was deleted.
    pub mac: Option<MacAddr>,
    /// The kernel gave up resolving it (`NUD_FAILED`).
    pub failed: bool,
    /// Its state as `ip neigh` names it (`REACHABLE`, `STALE`, `FAILED`, …), for display.
    pub state: &'static str,
    /// Its link-layer address whatever the state, for display.
    pub lladdr: Option<MacAddr>,
    /// The neighbour is a router (`NTF_ROUTER`, IPv6), for display.
    pub router: bool,
}

/// A neighbour state's name as `ip neigh` prints it.
fn state_name(s: NeighbourState) -> &'static str {
    match s {
        NeighbourState::Incomplete => "INCOMPLETE",
        NeighbourState::Reachable => "REACHABLE",
        NeighbourState::Stale => "STALE",
        NeighbourState::Delay => "DELAY",
        NeighbourState::Probe => "PROBE",
        NeighbourState::Failed => "FAILED",
        NeighbourState::Noarp => "NOARP",
        NeighbourState::Permanent => "PERMANENT",
        NeighbourState::None => "NONE",
        _ => "UNKNOWN",
    }
}

/// A policy rule (`ip rule`): priority, table, and whether it selects by anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Priority.
    pub priority: u32,
    /// Table looked up (0: not a lookup).
    pub table: u32,
    /// Selects by something (addresses, marks, interfaces, ...), or is not a plain lookup.
    pub selective: bool,
    /// An `l3mdev` rule: it applies only to packets of a device enslaved to a VRF.
    pub l3mdev: bool,
}

/// What one rtnetlink message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// For the mirror.
    Event(Event),
    /// A neighbour entry changed.
    Neighbor(KernelNeighbor),
    /// A policy rule.
    Rule(Rule),
}

/// What a dump asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dump {
    /// Links.
    Links,
    /// Addresses, both families.
    Addresses,
    /// Nexthop objects.
    Nexthops,
    /// IPv4 routes.
    Routes4,
    /// IPv6 routes.
    Routes6,
    /// Neighbours, both families.
    Neighbors,
    /// IPv4 rules.
    Rules4,
    /// IPv6 rules.
    Rules6,
}

/// Why reading from the kernel failed.
#[derive(Debug, thiserror::Error)]
pub enum RtnlError {
    /// A dump changed while it was read (`NLM_F_DUMP_INTR`): read it again.
    #[error("the kernel's tables changed during the dump")]
    Interrupted,
    /// Notifications were lost (`ENOBUFS`): resynchronise.
    #[error("netlink socket overrun: notifications were lost")]
    Overrun,
    /// A notification of a kind the mirror follows could not be decoded: resynchronise.
    #[error("a netlink notification could not be decoded")]
    Undecoded,
    /// The kernel answered a request with an error.
    #[error("the kernel refused {what}: {err}")]
    Refused {
        /// The request.
        what: &'static str,
        /// Its error.
        err: io::Error,
    },
    /// The socket failed.
    #[error("netlink: {0}")]
    Io(#[from] io::Error),
}

/// An rtnetlink socket.
pub struct Rtnl {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Rtnl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rtnl").field("fd", &self.sock.as_raw_fd()).finish()
    }
}

impl Rtnl {
    /// A socket for dumps (a full table comes in as fast as the kernel writes it).
    pub fn open() -> io::Result<Rtnl> {
        Rtnl::open_with(8 << 20)
    }

    /// A socket for requests only (their error answers, never read, are few and dropped
    /// when the small buffer is full).
    pub fn requests() -> io::Result<Rtnl> {
        Rtnl::open_with(64 << 10)
    }

    fn open_with(rcvbuf: usize) -> io::Result<Rtnl> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        force_rcvbuf(sock.as_raw_fd(), rcvbuf);
        Ok(Rtnl { sock, seq: 1, buf: vec![0; 1 << 20] })
    }

    /// A socket subscribed to every group the mirror follows, non-blocking, with a receive
    /// buffer of `rcvbuf` bytes (what a burst of changes must fit in before it is read).
    pub fn subscribe(rcvbuf: usize) -> io::Result<Rtnl> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        for g in GROUPS {
            sock.add_membership(g)?;
        }
        sock.set_non_blocking(true)?;
        force_rcvbuf(sock.as_raw_fd(), rcvbuf);
        Ok(Rtnl { sock, seq: 1, buf: vec![0; 1 << 20] })
    }

    /// A socket subscribed to link changes only (MTU, MAC, state: what `ip link set` does),
    /// non-blocking: what the ports' watch waits on ([`Rtnl::wait`]).
    pub fn links() -> io::Result<Rtnl> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.add_membership(libc::RTNLGRP_LINK)?;
        sock.set_non_blocking(true)?;
        Ok(Rtnl { sock, seq: 1, buf: vec![0; 64 << 10] })
    }

    /// Waits up to `timeout` for a notification and reads every one waiting, unparsed:
    /// whether any came (or some were lost to an overrun, or reading failed: the caller reads
    /// the state anew either way).
    pub fn wait(&mut self, timeout: std::time::Duration) -> bool {
        let mut p = libc::pollfd { fd: self.fd(), events: libc::POLLIN, revents: 0 };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd, ours, for the call's duration.
        if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
            return false;
        }
        let mut any = false;
        loop {
            match self.sock.recv(&mut &mut self.buf[..], libc::MSG_DONTWAIT) {
                Ok(_) => any = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return any,
                Err(_) => return true,
            }
        }
    }

    /// The socket's descriptor (to poll it).
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn send(
        &mut self,
        message_type: u16,
        flags: u16,
        payload: Option<RouteNetlinkMessage>,
        raw: &[u8],
    ) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut bytes = match payload {
            Some(p) => {
                let mut header = NetlinkHeader::default();
                header.flags = flags;
                header.sequence_number = self.seq;
                let mut m = NetlinkMessage::new(header, NetlinkPayload::from(p));
                m.finalize();
                let mut b = vec![0u8; m.buffer_len()];
                m.serialize(&mut b);
                b
            }
            None => {
                let mut b = vec![0u8; 16 + raw.len()];
                b[16..].copy_from_slice(raw);
                let mut nb = NetlinkBuffer::new(&mut b[..]);
                nb.set_length((16 + raw.len()) as u32);
                nb.set_message_type(message_type);
                nb.set_flags(flags);
                nb.set_sequence_number(self.seq);
                b
            }
        };
        if bytes.is_empty() {
            bytes.resize(16, 0);
        }
        self.sock.send(&bytes, 0)?;
        Ok(self.seq)
    }

    /// Dumps `what`, handing each message's meaning to `out` as it is read (a full table is a
    /// million messages: they are not collected first).
    pub fn dump(&mut self, what: Dump, mut out: impl FnMut(Message)) -> Result<(), RtnlError> {
        let flags = NLM_F_REQUEST | NLM_F_DUMP;
        let seq = match what {
            Dump::Links => self.send(0, flags, Some(RouteNetlinkMessage::GetLink(LinkMessage::default())), &[])?,
            Dump::Addresses => {
                self.send(0, flags, Some(RouteNetlinkMessage::GetAddress(AddressMessage::default())), &[])?
            }
            Dump::Neighbors => {
                self.send(0, flags, Some(RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default())), &[])?
            }
            Dump::Routes4 | Dump::Routes6 => {
                let mut m = RouteMessage::default();
                m.header.address_family =
                    if what == Dump::Routes4 { AddressFamily::Inet } else { AddressFamily::Inet6 };
                self.send(0, flags, Some(RouteNetlinkMessage::GetRoute(m)), &[])?
            }
            Dump::Rules4 | Dump::Rules6 => {
                let mut m = RuleMessage::default();
                m.header.family = if what == Dump::Rules4 { AddressFamily::Inet } else { AddressFamily::Inet6 };
                self.send(0, flags, Some(RouteNetlinkMessage::GetRule(m)), &[])?
            }
            // struct nhmsg, all zero: every family.
            Dump::Nexthops => self.send(RTM_GETNEXTHOP, flags, None, &[0u8; 8])?,
        };
        let mut interrupted = false;
        loop {
            let n = self.sock.recv(&mut &mut self.buf[..], 0)?;
            let mut at = 0;
            while at + 16 <= n {
                let Ok(nb) = NetlinkBuffer::new_checked(&self.buf[at..n]) else { break };
                let len = nb.length() as usize;
                let (ty, fl, sq) = (nb.message_type(), nb.flags(), nb.sequence_number());
                let bytes = &self.buf[at..at + len];
                at += (len + 3) & !3;
                if sq != seq {
                    continue;
                }
                if fl & NLM_F_DUMP_INTR != 0 {
                    interrupted = true;
                }
                match ty {
                    NLMSG_DONE => {
                        return if interrupted { Err(RtnlError::Interrupted) } else { Ok(()) };
                    }
                    NLMSG_ERROR => {
                        let code =
                            bytes.get(16..20).map_or(-libc::EIO, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        if code == 0 {
                            continue;
                        }
                        let err = io::Error::from_raw_os_error(-code);
                        // A kernel without nexthop objects has none to dump.
                        if what == Dump::Nexthops && matches!(-code, libc::EOPNOTSUPP | libc::EINVAL) {
                            return Ok(());
                        }
                        return Err(RtnlError::Refused { what: "a dump", err });
                    }
                    _ => {
                        if let Some(m) = parse(bytes) {
                            out(m);
                        }
                    }
                }
            }
        }
    }

    /// Reads every notification waiting, appending what they say to `out`; returns how many
    /// were read, or [`RtnlError::Undecoded`] (once all are read) when one of a followed kind
    /// could not be decoded.
    pub fn recv(&mut self, out: &mut Vec<Message>) -> Result<usize, RtnlError> {
        let mut count = 0;
        let mut undecoded = false;
        loop {
            let n = match self.sock.recv(&mut &mut self.buf[..], libc::MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && undecoded => return Err(RtnlError::Undecoded),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(count),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Err(RtnlError::Overrun),
                Err(e) => return Err(e.into()),
            };
            let mut at = 0;
            while at + 16 <= n {
                let Ok(nb) = NetlinkBuffer::new_checked(&self.buf[at..n]) else {
                    undecoded = true;
                    break;
                };
                let len = nb.length() as usize;
                match decode(&self.buf[at..at + len]) {
                    Decoded::Message(m) => out.push(m),
                    Decoded::Ignored => {}
                    Decoded::Undecoded => undecoded = true,
                }
                count += 1;
                at += (len + 3) & !3;
            }
        }
    }

    /// Asks the kernel to resolve `ip` on `ifindex`, or to confirm an entry it holds
    /// (`RTM_NEWNEIGH` with `NTF_USE`, creating the entry if it is new): the kernel sends its
    /// ARP request or neighbour solicitation, or probes a stale entry, as for its own traffic.
    /// No answer is awaited; the result comes as a neighbour notification.
    pub fn ask_neighbor(&mut self, ifindex: u32, ip: IpAddr) -> io::Result<()> {
        let mut m = NeighbourMessage::default();
        m.header.family = if ip.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
        m.header.ifindex = ifindex;
        m.header.flags = NeighbourFlags::Use;
        m.header.state = NeighbourState::None;
        m.attributes.push(NeighbourAttribute::Destination(match ip {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
        self.send(0, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE, Some(RouteNetlinkMessage::NewNeighbour(m)), &[])?;
        Ok(())
    }
}

/// Sets the socket's receive buffer, past `rmem_max` where the process may (root).
fn force_rcvbuf(fd: RawFd, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if crate::sys::set_opt(fd, libc::SOL_SOCKET, opt, v).is_ok() {
            return;
        }
    }
}

/// What one message says, if the mirror or the neighbour tables care.
pub fn parse(bytes: &[u8]) -> Option<Message> {
    match decode(bytes) {
        Decoded::Message(m) => Some(m),
        Decoded::Ignored | Decoded::Undecoded => None,
    }
}

/// One message read: what it says, or that it says nothing xfwd follows, or that it is of a
/// kind xfwd follows (links, addresses, routes, neighbours, rules, nexthop objects) and could
/// not be decoded, which leaves the mirror unsure of the kernel's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// What it says.
    Message(Message),
    /// Nothing the mirror or the neighbour tables care about.
    Ignored,
    /// Of a kind followed, and not understood (a resynchronisation reads the state anew).
    Undecoded,
}

/// The message types the mirror follows (`RTM_NEW*` and `RTM_DEL*` of links, addresses,
/// routes, neighbours, rules, nexthop objects).
fn followed(ty: u16) -> bool {
    matches!(ty, 16 | 17 | 20 | 21 | 24 | 25 | 28 | 29 | 32 | 33) || ty == RTM_NEWNEXTHOP || ty == RTM_DELNEXTHOP
}

/// [`parse`], telling a message of a followed kind that could not be decoded from one of no
/// interest.
pub fn decode(bytes: &[u8]) -> Decoded {
    let Ok(nb) = NetlinkBuffer::new_checked(bytes) else { return Decoded::Undecoded };
    let ty = nb.message_type();
    let flags = nb.flags();
    if !followed(ty) {
        return Decoded::Ignored;
    }
    if ty == RTM_NEWNEXTHOP || ty == RTM_DELNEXTHOP {
        return parse_nexthop(nb.payload(), ty == RTM_NEWNEXTHOP)
            .map_or(Decoded::Undecoded, |e| Decoded::Message(Message::Event(e)));
    }
    let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) else { return Decoded::Undecoded };
    let NetlinkPayload::InnerMessage(inner) = m.payload else { return Decoded::Undecoded };
    decode_inner(inner, flags).map_or(Decoded::Ignored, Decoded::Message)
}

fn decode_inner(inner: RouteNetlinkMessage, flags: u16) -> Option<Message> {
    match inner {
        RouteNetlinkMessage::NewRoute(r) => route(r, true, flags),
        RouteNetlinkMessage::DelRoute(r) => route(r, false, flags),
        RouteNetlinkMessage::NewAddress(a) => address(a, true),
        RouteNetlinkMessage::DelAddress(a) => address(a, false),
        RouteNetlinkMessage::NewLink(l) => Some(link(l, true)),
        RouteNetlinkMessage::DelLink(l) => Some(link(l, false)),
        RouteNetlinkMessage::NewNeighbour(n) => neighbor(n, true),
        RouteNetlinkMessage::DelNeighbour(n) => neighbor(n, false),
        RouteNetlinkMessage::NewRule(r) => Some(Message::Rule(rule(r))),
        _ => None,
    }
}

fn parse_nexthop(payload: &[u8], add: bool) -> Option<Event> {
    // struct nhmsg { family, scope, protocol, resvd: u8; flags: u32 }, then attributes.
    let attrs = payload.get(8..)?;
    let (mut id, mut oif, mut gw, mut blackhole, mut group) = (None, 0u32, None, false, None);
    let family = *payload.first()?;
    for nla in NlasIterator::new(attrs) {
        let nla: NlaBuffer<&[u8]> = nla.ok()?;
        let v = nla.value();
        match nla.kind() {
            NHA_ID => id = Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?)),
            NHA_OIF => oif = u32::from_ne_bytes(v.get(..4)?.try_into().ok()?),
            NHA_BLACKHOLE => blackhole = true,
            NHA_GATEWAY => {
                gw = match (family as i32, v.len()) {
                    (libc::AF_INET, 4) => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))),
                    (libc::AF_INET6, 16) => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?))),
                    _ => return None,
                }
            }
            NHA_GROUP => {
                // struct nexthop_grp { id: u32, weight: u8, weight_high: u8, resvd2: u16 }.
                group = Some(
                    v.chunks_exact(8)
                        .map(|c| {
                            let id = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                            // Up to 65,536 since Linux 6.12; xfwd's groups scale weights down.
                            let w = u32::from(c[4]) + (u32::from(c[5]) << 8) + 1;
                            (id, w.min(u32::from(u16::MAX)) as u16)
                        })
                        .collect::<Vec<_>>(),
                )
            }
            _ => {}
        }
    }
    let id = id?;
    if !add {
        return Some(Event::Nexthop { id, nh: None });
    }
    let nh = match (group, blackhole) {
        (Some(g), _) => Nexthop::Group(g),
        (None, true) => Nexthop::Blackhole,
        (None, false) => Nexthop::Single { gw, ifindex: oif },
    };
    Some(Event::Nexthop { id, nh: Some(nh) })
}

/// An `RTA_VIA` gateway as an address: an IPv6 one (what `via inet6` gives an IPv4 route) or
/// an IPv4 one; `None` for other families (MPLS, packet), which xfwd cannot forward to.
fn via(v: RouteVia) -> Option<RouteAddress> {
    match v {
        RouteVia::Inet6(a) => Some(RouteAddress::Inet6(a)),
        RouteVia::Inet(a) => Some(RouteAddress::Inet(a)),
        _ => None,
    }
}

fn kernel_type(t: RouteType) -> KernelType {
    match t {
        RouteType::Unicast => KernelType::Unicast,
        RouteType::Local => KernelType::Local,
        RouteType::Broadcast => KernelType::Broadcast,
        RouteType::Anycast => KernelType::Anycast,
        RouteType::BlackHole => KernelType::Blackhole,
        RouteType::Unreachable => KernelType::Unreachable,
        RouteType::Prohibit => KernelType::Prohibit,
        other => KernelType::Other(u8::from(other)),
    }
}

fn route(r: RouteMessage, add: bool, flags: u16) -> Option<Message> {
    let RouteMessage { header, attributes, .. } = r;
    let RouteHeader {
        address_family,
        destination_prefix_length: len,
        source_prefix_length,
        tos,
        table,
        protocol,
        kind,
        scope,
        flags: rflags,
        ..
    } = header;
    // Cached exceptions (PMTU, redirects) are not routes.
    if rflags.contains(RouteFlags::Cloned) {
        return None;
    }
    let mut table = u32::from(table);
    let (mut dst, mut gw, mut oif, mut metric, mut mtu, mut nh_id) = (None, None, 0u32, 0u32, 0u32, None);
    let mut multipath = None;
    let (mut prefsrc, mut pref) = (None, None);
    // An encapsulation, or a gateway that is no IP address (RTA_VIA of another family): not
    // forwardable by xfwd as the kernel would. An IPv6 gateway of an IPv4 route (RTA_VIA,
    // RFC 5549) is a gateway like another.
    let mut unsupported = false;
    for a in attributes {
        match a {
            RouteAttribute::Encap(_) | RouteAttribute::EncapType(_) => unsupported = true,
            RouteAttribute::Via(v) => match via(v) {
                Some(g) => gw = Some(g),
                None => unsupported = true,
            },
            RouteAttribute::Table(t) => table = t,
            RouteAttribute::Destination(d) => dst = Some(d),
            RouteAttribute::Gateway(g) => gw = Some(g),
            RouteAttribute::Oif(i) => oif = i,
            RouteAttribute::Priority(p) => metric = p,
            RouteAttribute::NhId(i) => nh_id = Some(i),
            RouteAttribute::MultiPath(m) => multipath = Some(m),
            RouteAttribute::PrefSource(a) => prefsrc = gateway_ip(Some(a)),
            RouteAttribute::Preference(p) => pref = Some(u8::from(p)),
            RouteAttribute::Metrics(ms) => {
                for m in ms {
                    if let RouteMetric::Mtu(v) = m {
                        mtu = v;
                    }
                }
            }
            _ => {}
        }
    }
    let mut raw = Vec::new();
    if let Some(m) = multipath {
        unsupported |= multipath_paths(m, &mut raw);
    } else if (oif != 0 || gw.is_some()) && !rflags.contains(RouteFlags::Dead) {
        raw.push((gateway_ip(gw), oif, 1));
    }
    let replace = flags & NLM_F_REPLACE != 0;
    // What both families' routes carry; the paths whose gateways the route's family can use
    // (an IPv4 route: both families; an IPv6 route: IPv6).
    let common = Common {
        table,
        metric,
        tos,
        has_source: source_prefix_length != 0,
        kind: kernel_type(kind),
        protocol: u8::from(protocol),
        nh_id,
        mtu,
        unsupported,
        scope: u8::from(scope),
        prefsrc,
        pref,
    };
    match (address_family, dst) {
        (AddressFamily::Inet, d @ (Some(RouteAddress::Inet(_)) | None)) => {
            let addr = match d {
                Some(RouteAddress::Inet(a)) => a,
                _ => Ipv4Addr::UNSPECIFIED,
            };
            let paths = of_family(&raw, Some);
            Some(Message::Event(Event::Route4 {
                add,
                place: place4(flags),
                route: common.route(Prefix::truncate(addr, len), paths),
            }))
        }
        (AddressFamily::Inet6, d @ (Some(RouteAddress::Inet6(_)) | None)) => {
            let addr = match d {
                Some(RouteAddress::Inet6(a)) => a,
                _ => Ipv6Addr::UNSPECIFIED,
            };
            let paths = of_family(&raw, |a| match a {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            });
            let route = KernelRoute { tos: 0, ..common.route(Prefix6::truncate(addr, len), paths) };
            Some(Message::Event(Event::Route6 { add, replace, route }))
        }
        _ => None,
    }
}

/// Where a new IPv4 route goes among those of its key, as the message's flags say: a dump
/// lists them in order (`NLM_F_MULTI`), the kernel tells an append (`NLM_F_APPEND`), a new key
/// (`NLM_F_EXCL`), a replacement (`NLM_F_REPLACE`), and a prepend with none of them.
fn place4(flags: u16) -> Place {
    if flags & NLM_F_REPLACE != 0 {
        Place::Replace
    } else if flags & (NLM_F_MULTIPART | NLM_F_APPEND | NLM_F_EXCL) != 0 {
        Place::Last
    } else {
        Place::First
    }
}

/// A path as a route message gives it: gateway, interface, weight.
type RawPath = (Option<IpAddr>, u32, u16);

/// A gateway as an IP address (`None`: on link, or not an IP address).
fn gateway_ip(gw: Option<RouteAddress>) -> Option<IpAddr> {
    match gw {
        Some(RouteAddress::Inet(a)) => Some(IpAddr::V4(a)),
        Some(RouteAddress::Inet6(a)) => Some(IpAddr::V6(a)),
        _ => None,
    }
}

/// The live paths of a multipath route (`RTA_MULTIPATH`), appended to `raw`; whether any path
/// is one xfwd cannot forward (an encapsulation, a gateway that is no IP address).
fn multipath_paths(hops: Vec<RouteNextHop>, raw: &mut Vec<RawPath>) -> bool {
    let mut unsupported = false;
    for hop in hops {
        unsupported |= hop.attributes.iter().any(|a| match a {
            RouteAttribute::Encap(_) | RouteAttribute::EncapType(_) => true,
            RouteAttribute::Via(v) => via(v.clone()).is_none(),
            _ => false,
        });
        // A dead path (its interface down) is not used; the route lives on by the others.
        if hop.flags.contains(RouteNextHopFlags::Dead) {
            continue;
        }
        let g = hop.attributes.iter().find_map(|a| match a {
            RouteAttribute::Gateway(g) => Some(g.clone()),
            RouteAttribute::Via(v) => via(v.clone()),
            _ => None,
        });
        raw.push((gateway_ip(g), hop.interface_index, u16::from(hop.hops) + 1));
    }
    unsupported
}

/// The paths of `raw` whose gateways the family can use (`pick`), and the paths on link.
fn of_family<A>(raw: &[RawPath], pick: impl Fn(IpAddr) -> Option<A>) -> Vec<KernelPath<A>> {
    raw.iter()
        .filter_map(|&(g, ifindex, weight)| match g {
            None => Some(KernelPath { gw: None, ifindex, weight }),
            Some(g) => pick(g).map(|a| KernelPath { gw: Some(a), ifindex, weight }),
        })
        .collect()
}

/// What a route message says besides its destination and paths.
struct Common {
    table: u32,
    metric: u32,
    tos: u8,
    has_source: bool,
    kind: KernelType,
    protocol: u8,
    nh_id: Option<u32>,
    mtu: u32,
    unsupported: bool,
    scope: u8,
    prefsrc: Option<IpAddr>,
    pref: Option<u8>,
}

impl Common {
    fn route<P, A>(&self, prefix: P, paths: Vec<KernelPath<A>>) -> KernelRoute<P, A> {
        KernelRoute {
            table: self.table,
            prefix,
            metric: self.metric,
            tos: self.tos,
            has_source: self.has_source,
            kind: self.kind,
            protocol: self.protocol,
            paths,
            nh_id: self.nh_id,
            mtu: self.mtu,
            unsupported: self.unsupported,
            scope: self.scope,
            prefsrc: self.prefsrc,
            pref: self.pref,
        }
    }
}

fn address(a: AddressMessage, add: bool) -> Option<Message> {
    let (mut local, mut address) = (None, None);
    for attr in a.attributes {
        match attr {
            AddressAttribute::Local(x) => local = Some(x),
            AddressAttribute::Address(x) => address = Some(x),
            _ => {}
        }
    }
    // IPv4 point-to-point addresses carry the peer in IFA_ADDRESS; the box's is IFA_LOCAL.
    let addr = local.or(address)?;
    Some(Message::Event(Event::Address { add, ifindex: a.header.index, addr, len: a.header.prefix_len }))
}

fn link(l: LinkMessage, add: bool) -> Message {
    let mtu = l
        .attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Mtu(m) => Some(*m),
            _ => None,
        })
        .unwrap_or(0);
    let mac = l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(b) => <[u8; 6]>::try_from(b.as_slice()).ok().map(crate::wire::MacAddr),
        _ => None,
    });
    let up = add && l.header.flags.contains(LinkFlags::Up);
    Message::Event(Event::Link { ifindex: l.header.index, up, mtu, mac })
}

fn neighbor(n: NeighbourMessage, add: bool) -> Option<Message> {
    // Bridge FDB entries (AF_BRIDGE, in an unspecified-family dump) and proxy entries are not
    // neighbours.
    if !matches!(n.header.family, AddressFamily::Inet | AddressFamily::Inet6)
        || n.header.flags.contains(NeighbourFlags::Proxy)
    {
        return None;
    }
    let (mut ip, mut lladdr) = (None, None);
    for a in n.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(x)) => ip = Some(IpAddr::V4(x)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(x)) => ip = Some(IpAddr::V6(x)),
            NeighbourAttribute::LinkLayerAddress(b) if b.len() == 6 => {
                lladdr = Some(MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]))
            }
            _ => {}
        }
    }
    let usable = add
        && matches!(
            n.header.state,
            NeighbourState::Reachable
                | NeighbourState::Stale
                | NeighbourState::Delay
                | NeighbourState::Probe
                | NeighbourState::Permanent
                | NeighbourState::Noarp
        );
    Some(Message::Neighbor(KernelNeighbor {
        ifindex: n.header.ifindex,
        ip: ip?,
        mac: if usable { lladdr } else { None },
        failed: add && n.header.state == NeighbourState::Failed,
        state: state_name(n.header.state),
        lladdr,
        router: n.header.flags.contains(NeighbourFlags::Router),
    }))
}

fn rule(r: RuleMessage) -> Rule {
    let mut priority = 0;
    let mut table = u32::from(r.header.table);
    let mut selective = r.header.src_len != 0 || r.header.dst_len != 0 || r.header.tos != 0;
    let mut l3mdev = false;
    for a in r.attributes {
        match a {
            RuleAttribute::L3MDev(on) => l3mdev |= on,
            RuleAttribute::Priority(p) => priority = p,
            RuleAttribute::Table(t) => table = t,
            RuleAttribute::Protocol(_) | RuleAttribute::Other(_) => {}
            // -1 (u32::MAX) is "not set".
            RuleAttribute::SuppressPrefixLen(u32::MAX) | RuleAttribute::SuppressIfGroup(u32::MAX) => {}
            _ => selective = true,
        }
    }
    if r.header.action != netlink_packet_route::rule::RuleAction::ToTable {
        selective = true;
    }
    Rule { v6: r.header.family == AddressFamily::Inet6, priority, table, selective, l3mdev }
}

/// The main table's number, and the local and default tables'.
const MAIN: u32 = 254;
const LOCAL: u32 = 255;
const DEFAULT: u32 = 253;

/// What is wrong with the policy rules for mirroring the local table and `table`, if
/// anything. xfwd looks up the local table, then `table` (where it is not main), then main;
/// the rules must make the kernel do the same for a packet of xfwd's ports, in whatever
/// priorities: taken in priority order, the plain lookups must read local, `table`, main, and
/// after main only the default table. `l3mdev` rules are passed over: they apply only to
/// devices enslaved to a VRF, and xfwd mirrors no VRF table (a port in a VRF is not a case this
/// handles; the rig's kernel has no VRF to test it with). Any other rule that selects packets,
/// or looks up another table before main is reached, is named.
pub fn rules_problem(rules: &[Rule], table: u32) -> Option<String> {
    let family = |v6: bool| if v6 { "IPv6" } else { "IPv4" };
    let name =
        |r: &Rule, why: &str| format!("{} policy rule {}: lookup of table {}{why}", family(r.v6), r.priority, r.table);
    for v6 in [false, true] {
        let mut these: Vec<&Rule> = rules.iter().filter(|r| r.v6 == v6 && !r.l3mdev).collect();
        if these.is_empty() {
            continue; // none of this family dumped (a test, or a kernel without it)
        }
        these.sort_by_key(|r| r.priority);
        let want: &[u32] = if table == MAIN { &[LOCAL, MAIN] } else { &[LOCAL, table, MAIN] };
        let mut next = 0; // index into `want` of the next table to be looked up
        for r in these {
            if r.selective {
                return Some(name(r, " with selectors"));
            }
            let done = next == want.len();
            if done && r.table == DEFAULT {
                continue;
            }
            if next > 0 && r.table == want[next - 1] {
                continue; // the same table again: no change
            }
            if !done && r.table == want[next] {
                next += 1;
                continue;
            }
            if !done && r.table == MAIN && want[next] == table {
                return Some(format!(
                    "no {} policy rule looks table {table} up before main (e.g. ip{} rule add priority 1000 lookup {table}): the kernel would never use it",
                    family(v6),
                    if v6 { " -6" } else { "" }
                ));
            }
            let why = if done {
                " after main (only the default table may follow it)"
            } else if next == 0 {
                " before the local table, which must be looked up first"
            } else {
                ", which xfwd does not mirror, where the kernel would look it up"
            };
            return Some(name(r, why));
        }
        if next < want.len() {
            let missing = want[next];
            return Some(if missing == table && table != MAIN {
                format!(
                    "no {} policy rule looks table {table} up before main (e.g. ip{} rule add priority 1000 lookup {table}): the kernel would never use it",
                    family(v6),
                    if v6 { " -6" } else { "" }
                )
            } else {
                format!("no {} policy rule looks up table {missing} where xfwd does", family(v6))
            });
        }
    }
    None
}

/// Whether a rule added while running changes which table answers a packet of xfwd's ports
/// (counted as `rules_not_followed`): a rule that selects, or looks up a table that is neither
/// local, main, default nor `table`.
pub fn rule_not_followed(r: &Rule, table: u32) -> bool {
    !r.l3mdev && (r.selective || ![LOCAL, MAIN, DEFAULT, table].contains(&r.table))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_new_ipv4_routes_place_comes_from_the_messages_flags() {
        let create = netlink_packet_core::NLM_F_CREATE;
        assert_eq!(place4(NLM_F_MULTIPART), Place::Last, "a dump, in the kernel's order");
        assert_eq!(place4(create | NLM_F_EXCL), Place::Last, "ip route add");
        assert_eq!(place4(NLM_F_APPEND), Place::Last, "ip route append");
        assert_eq!(place4(NLM_F_REPLACE), Place::Replace, "ip route replace");
        assert_eq!(place4(0), Place::First, "ip route prepend");
    }

    use super::*;
    use netlink_packet_route::route::{RouteNextHop, RouteProtocol};

    /// `m` as the kernel sends it: an RTM_NEWROUTE message's bytes.
    fn new_route_bytes(m: RouteMessage) -> Vec<u8> {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        let mut nm = NetlinkMessage::new(header, NetlinkPayload::from(RouteNetlinkMessage::NewRoute(m)));
        nm.finalize();
        let mut b = vec![0u8; nm.buffer_len()];
        nm.serialize(&mut b);
        b
    }

    fn rule(priority: u32, table: u32, selective: bool) -> Rule {
        Rule { v6: false, priority, table, selective, l3mdev: false }
    }

    #[test]
    fn only_the_default_rules_and_plain_lookups_of_the_mirrored_table_pass() {
        let defaults = [rule(0, 255, false), rule(32766, 254, false), rule(32767, 253, false)];
        assert_eq!(rules_problem(&defaults, 254), None);
        let mut more = defaults.to_vec();
        more.push(rule(100, 100, false));
        let v6 = |priority, table| Rule { v6: true, priority, table, selective: false, l3mdev: false };
        more.extend([v6(0, 255), v6(100, 100), v6(32766, 254)]);
        assert_eq!(rules_problem(&more, 100), None, "a plain lookup of the table mirrored, before main");
        assert!(rules_problem(&more, 254).unwrap().contains("policy rule 100: lookup of table 100"));
        assert!(rules_problem(&defaults, 100).unwrap().contains("no IPv4 policy rule looks table 100 up before main"));
        let mut late = defaults.to_vec();
        late.push(rule(40000, 100, false));
        assert!(
            rules_problem(&late, 100).unwrap().contains("no IPv4 policy rule looks table 100 up before main"),
            "after main: main answers first"
        );
        more[3].selective = true;
        assert!(rules_problem(&more, 100).unwrap().contains("with selectors"));
    }

    #[test]
    fn any_layout_that_looks_tables_up_in_the_default_order_passes() {
        // As VRF set-ups leave them: an l3mdev rule first, the local rule moved after it.
        let l3mdev = Rule { v6: false, priority: 1000, table: 0, selective: false, l3mdev: true };
        let vrf = [l3mdev.clone(), rule(2000, 255, false), rule(32766, 254, false), rule(32767, 253, false)];
        assert_eq!(rules_problem(&vrf, 254), None);
        // The local rule just before main, no default rule, a second plain lookup of main.
        let moved = [rule(32765, 255, false), rule(32766, 254, false), rule(40000, 254, false)];
        assert_eq!(rules_problem(&moved, 254), None);
        // The mirrored table between a moved local rule and main.
        let t100 = [l3mdev, rule(1500, 255, false), rule(1600, 100, false), rule(32766, 254, false)];
        assert_eq!(rules_problem(&t100, 100), None);
        assert!(rules_problem(&t100, 254)
            .unwrap()
            .contains("rule 1600: lookup of table 100, which xfwd does not mirror"));
        // Main before local: main would answer for the box's own addresses first.
        let swapped = [rule(100, 254, false), rule(200, 255, false)];
        assert!(rules_problem(&swapped, 254)
            .unwrap()
            .contains("IPv4 policy rule 100: lookup of table 254 before the local"));
        // Another table after main (not the default one): named.
        let after = [rule(0, 255, false), rule(32766, 254, false), rule(32767, 300, false)];
        assert!(rules_problem(&after, 254).unwrap().contains("rule 32767: lookup of table 300 after main"));
        // Without any local rule.
        assert!(rules_problem(&[rule(32766, 254, false)], 254).unwrap().contains("before the local table"));
        // Added at run time: counted only when it changes which table answers.
        assert!(!rule_not_followed(&rule(5, 255, false), 254));
        assert!(rule_not_followed(&rule(5, 300, false), 254) && rule_not_followed(&rule(5, 254, true), 254));
        assert!(!rule_not_followed(&Rule { v6: true, priority: 1000, table: 0, selective: false, l3mdev: true }, 254));
    }

    fn message(ty: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 16 + payload.len()];
        b[16..].copy_from_slice(payload);
        let mut nb = NetlinkBuffer::new(&mut b[..]);
        nb.set_length((16 + payload.len()) as u32);
        nb.set_message_type(ty);
        nb.set_flags(flags);
        b
    }

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(len as u16).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(value);
        v.resize((len + 3) & !3, 0);
        v
    }

    #[test]
    fn nexthop_objects_and_groups_are_read_from_their_attributes() {
        let mut p = vec![libc::AF_INET as u8, 0, 0, 0, 0, 0, 0, 0];
        p.extend(nla(NHA_ID, &7u32.to_ne_bytes()));
        p.extend(nla(NHA_GATEWAY, &[198, 18, 30, 2]));
        p.extend(nla(NHA_OIF, &4u32.to_ne_bytes()));
        let got = parse(&message(RTM_NEWNEXTHOP, 0, &p));
        let want = Nexthop::Single { gw: Some("198.18.30.2".parse().unwrap()), ifindex: 4 };
        assert_eq!(got, Some(Message::Event(Event::Nexthop { id: 7, nh: Some(want) })));
        // A group: members with their weights (the kernel's weight - 1 on the wire).
        let mut p = vec![0u8; 8];
        p.extend(nla(NHA_ID, &9u32.to_ne_bytes()));
        let mut g = Vec::new();
        for (id, w) in [(7u32, 0u8), (8, 2)] {
            g.extend_from_slice(&id.to_ne_bytes());
            g.extend_from_slice(&[w, 0, 0, 0]);
        }
        p.extend(nla(NHA_GROUP, &g));
        let got = parse(&message(RTM_NEWNEXTHOP, 0, &p));
        assert_eq!(got, Some(Message::Event(Event::Nexthop { id: 9, nh: Some(Nexthop::Group(vec![(7, 1), (8, 3)])) })));
        let got = parse(&message(RTM_DELNEXTHOP, 0, &p));
        assert_eq!(got, Some(Message::Event(Event::Nexthop { id: 9, nh: None })));
        // Cut short: nothing, no panic.
        assert_eq!(parse(&message(RTM_NEWNEXTHOP, 0, &p[..3])), None);
    }

    #[test]
    fn a_followed_message_that_cannot_be_decoded_is_told_from_one_of_no_interest() {
        // A route, an address and a nexthop object cut short: the mirror cannot know what
        // changed, so the thread resynchronises; a queueing discipline is of no interest.
        for ty in [24u16, 21, RTM_NEWNEXTHOP] {
            assert_eq!(decode(&message(ty, 0, &[2, 0, 0])), Decoded::Undecoded, "type {ty}");
        }
        assert_eq!(decode(&message(36, 0, &[0; 20])), Decoded::Ignored, "RTM_NEWQDISC");
        assert_eq!(decode(&[0; 8]), Decoded::Undecoded, "shorter than a header");
        // Whole, the same route decodes.
        let mut r = vec![2u8, 24, 0, 0, 254, 4, 0, 1, 0, 0, 0, 0];
        r.extend(nla(1, &[198, 19, 0, 0]));
        assert!(matches!(decode(&message(24, 0, &r)), Decoded::Message(Message::Event(Event::Route4 { .. }))));
    }

    #[test]
    fn routes_carry_their_table_metric_paths_weights_and_mtu() {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.destination_prefix_length = 16;
        m.header.table = 254;
        m.header.protocol = RouteProtocol::Bird;
        m.header.kind = RouteType::Unicast;
        m.attributes.push(RouteAttribute::Destination(RouteAddress::Inet("198.19.0.0".parse().unwrap())));
        m.attributes.push(RouteAttribute::Priority(20));
        m.attributes.push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(1400)]));
        let hop = |gw: &str, ifindex, hops| {
            let mut h = RouteNextHop::default();
            h.interface_index = ifindex;
            h.hops = hops;
            h.attributes.push(RouteAttribute::Gateway(RouteAddress::Inet(gw.parse().unwrap())));
            h
        };
        m.attributes.push(RouteAttribute::MultiPath(vec![hop("198.18.30.2", 4, 0), hop("198.18.30.3", 4, 1)]));
        let b = new_route_bytes(m);
        let Some(Message::Event(Event::Route4 { add: true, route, .. })) = parse(&b) else { panic!("{:?}", parse(&b)) };
        assert_eq!((route.table, route.metric, route.mtu, route.protocol), (254, 20, 1400, 12));
        assert_eq!(route.prefix.to_string(), "198.19.0.0/16");
        let paths: Vec<_> = route.paths.iter().map(|p| (p.gw.unwrap().to_string(), p.ifindex, p.weight)).collect();
        assert_eq!(paths, vec![("198.18.30.2".into(), 4, 1), ("198.18.30.3".into(), 4, 2)]);
    }

    #[test]
    fn an_ipv4_route_through_an_ipv6_gateway_is_a_route_like_another() {
        // `ip route add 198.51.100.0/24 via inet6 fe80::1 dev eth4` (RFC 5549), whole and as
        // multipath; a `via` of another family stays unsupported.
        let route = |attrs: Vec<RouteAttribute>| {
            let mut m = RouteMessage::default();
            m.header.address_family = AddressFamily::Inet;
            m.header.destination_prefix_length = 24;
            m.header.table = 254;
            m.header.kind = RouteType::Unicast;
            m.attributes.push(RouteAttribute::Destination(RouteAddress::Inet("198.51.100.0".parse().unwrap())));
            m.attributes.extend(attrs);
            let b = new_route_bytes(m);
            let Some(Message::Event(Event::Route4 { route, .. })) = parse(&b) else { panic!("{:?}", parse(&b)) };
            route
        };
        let ll: Ipv6Addr = "fe80::1".parse().unwrap();
        let r = route(vec![RouteAttribute::Via(RouteVia::Inet6(ll)), RouteAttribute::Oif(4)]);
        assert!(!r.unsupported);
        assert_eq!(r.paths, vec![KernelPath { gw: Some(IpAddr::V6(ll)), ifindex: 4, weight: 1 }]);
        let hop = |ifindex| {
            let mut h = RouteNextHop::default();
            h.interface_index = ifindex;
            h.attributes.push(RouteAttribute::Via(RouteVia::Inet6(ll)));
            h
        };
        let r = route(vec![RouteAttribute::MultiPath(vec![hop(4), hop(5)])]);
        assert!(!r.unsupported);
        let got: Vec<_> = r.paths.iter().map(|p| (p.gw, p.ifindex)).collect();
        assert_eq!(got, vec![(Some(IpAddr::V6(ll)), 4), (Some(IpAddr::V6(ll)), 5)]);
        let r = route(vec![
            RouteAttribute::Via(RouteVia::Other((AddressFamily::Mpls, vec![0, 1, 0x41, 0]))),
            RouteAttribute::Oif(4),
        ]);
        assert!(r.unsupported, "an MPLS via");
    }
}
