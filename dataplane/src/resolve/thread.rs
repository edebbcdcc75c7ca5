//! The ARP thread: the socket side of [`crate::resolve::arp`] and [`crate::resolve::ndp`].
//!
//! ARP must keep working for the kernel too (its own management sessions need replies), so the
//! XDP program hands every ARP frame to the kernel, and this thread reads them from a packet
//! socket per port (`AF_PACKET`, `ETH_P_ARP`): packet sockets see what XDP passed. Neighbour
//! discovery likewise: the XDP program passes IPv6 to link-local and multicast addresses (and
//! anything but echo requests to the box's own) to the kernel, and a second packet socket per
//! port (`ETH_P_IPV6`, with a socket filter that keeps only solicitations and advertisements)
//! sees it. Each socket is read at most 256 frames per turn.
//! That socket joins the solicited-node group of each of the port's addresses
//! (`PACKET_ADD_MEMBERSHIP`), so that a NIC that filters multicast lets them in. It sends
//! through the same sockets. One thread, because resolution is a few frames per second per
//! neighbour and a single writer per table keeps the neighbour tables lock-free for the
//! workers.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use crossbeam_channel::Receiver;

use super::glean::GleanReceiver;

use crate::l3::tables::{scope6, unscope6};
use crate::l3::{Key6, NeighborTable, NeighborTable6, RouterTables};
use crate::resolve::arp::ArpEngine;
pub use crate::resolve::arp::{ArpConfig, ArpCounters};
use crate::resolve::ndp::NdpEngine;
use crate::routes::rtnl::Rtnl;
use crate::time::Clock;
use crate::wire::ethernet::{ETHERTYPE_ARP, ETHERTYPE_IPV6};
use crate::wire::{icmpv6, MacAddr};
use crate::PortId;

const POLL_MS: i32 = 10;
/// Frames read from one socket per turn of the thread's loop.
const READ_BURST: usize = 256;

/// Requests to the ARP thread from the control thread.
#[derive(Debug)]
pub enum Control {
    /// Replace the static neighbours (on reload).
    StaticNeighbors(Vec<(Ipv4Addr, MacAddr)>),
    /// Replace the static IPv6 neighbours (on reload).
    StaticNeighbors6(Vec<(Ipv6Addr, MacAddr)>),
    /// Change the number of packets held per unresolved neighbour (on reload).
    GleanQueue(usize),
    /// An entry of the kernel's neighbour table changed (`[fib] source = "kernel"`).
    KernelNeighbor {
        /// The port it is on.
        port: PortId,
        /// Its address.
        ip: IpAddr,
        /// Its MAC where usable; `None`: gone or failed.
        mac: Option<MacAddr>,
        /// The kernel gave up resolving it.
        failed: bool,
    },
    /// The kernel's usable entries after a full dump: any other entry learnt from it goes.
    KernelNeighborsPresent(Vec<(PortId, IpAddr)>),
    /// Announce the box's addresses on a port with its MAC as the tables now have it (after
    /// a MAC change at run time): gratuitous ARP, unsolicited neighbour advertisements.
    Announce(PortId),
}

/// A port as the ARP thread needs it.
#[derive(Debug, Clone)]
pub struct ArpPort {
    /// Interface index. (Its MAC is the router tables': it follows a change at run time.)
    pub ifindex: u32,
}

/// The neighbour tables the thread writes, with their static entries.
#[derive(Debug)]
pub struct Neighbors {
    /// IPv4's.
    pub v4: Arc<NeighborTable>,
    /// IPv6's.
    pub v6: Arc<NeighborTable6>,
    /// Static IPv4 neighbours.
    pub statics: Vec<(Ipv4Addr, MacAddr)>,
    /// Static IPv6 neighbours.
    pub statics6: Vec<(Ipv6Addr, MacAddr)>,
}

/// A packet socket bound to one interface for one EtherType (ARP, or IPv6 for neighbour
/// discovery).
#[derive(Debug)]
struct PacketSocket {
    fd: std::os::fd::OwnedFd,
}

/// What a [`PacketSocket`] keeps of the frames of its EtherType.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Every one (ARP, where xfwd resolves).
    All,
    /// Neighbour solicitations and advertisements only.
    NeighbourDiscovery,
    /// None: the socket only sends (the kernel resolves).
    Nothing,
}

impl PacketSocket {
    /// A socket on interface `ifindex` for `ethertype`, keeping what `keep` says. The socket is
    /// made with protocol 0, which receives nothing, and bound to its protocol only once its
    /// filter is attached: bound first, it would queue whatever arrived in between, which a
    /// socket that keeps nothing is never read to drain (and, polled, would wake its thread
    /// without end).
    fn open(ifindex: u32, ethertype: u16, keep: Keep) -> io::Result<PacketSocket> {
        use std::os::fd::FromRawFd;
        let proto = ethertype.to_be();
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh socket that nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let socket = PacketSocket { fd };
        match keep {
            Keep::All => {}
            Keep::NeighbourDiscovery => socket.only_neighbour_discovery()?,
            Keep::Nothing => socket.receive_nothing()?,
        }
        let fd = &socket.fd;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid starting value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        use std::os::fd::AsRawFd;
        // SAFETY: `addr` is a valid sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(socket)
    }

    /// Keeps only neighbour solicitations and advertisements on the socket (a classic BPF
    /// filter in the kernel): the IPv6 the XDP program passes to the kernel (its own traffic,
    /// MLD, whatever is sent to the box) never reaches the ARP thread, which a flood of it
    /// could otherwise keep busy.
    fn only_neighbour_discovery(&self) -> io::Result<()> {
        // ldh [12]; jeq 0x86dd; ldb [20] (next header); jeq 58; ldb [54] (ICMPv6 type);
        // jeq 135 or 136: accept the whole frame, else drop it.
        let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        const LDH_ABS: u16 = 0x28;
        const LDB_ABS: u16 = 0x30;
        const JEQ_K: u16 = 0x15;
        const RET_K: u16 = 0x06;
        let prog = [
            ins(LDH_ABS, 0, 0, 12),
            ins(JEQ_K, 0, 6, u32::from(ETHERTYPE_IPV6)),
            ins(LDB_ABS, 0, 0, 14 + 6),
            ins(JEQ_K, 0, 4, 58),
            ins(LDB_ABS, 0, 0, 14 + 40),
            ins(JEQ_K, 1, 0, u32::from(icmpv6::NEIGHBOR_SOLICITATION)),
            ins(JEQ_K, 0, 1, u32::from(icmpv6::NEIGHBOR_ADVERTISEMENT)),
            ins(RET_K, 0, 0, 0xffff),
            ins(RET_K, 0, 0, 0),
        ];
        self.attach_filter(&prog)
    }

    /// Attaches the classic BPF program `prog` to the socket.
    fn attach_filter(&self, prog: &[libc::sock_filter]) -> io::Result<()> {
        let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr().cast_mut() };
        // `fprog` points at `prog`, alive for the call, in which the kernel copies the program.
        crate::sys::set_opt(self.raw(), libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, fprog)
    }

    /// Keeps nothing on the socket, which then only sends (the kernel answers and resolves
    /// when it keeps the neighbour tables).
    fn receive_nothing(&self) -> io::Result<()> {
        // ret #0: drop every frame.
        self.attach_filter(&[libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0 }])
    }

    /// Lets the frames to the Ethernet group `mac` in on the socket's interface.
    fn join(&self, ifindex: u32, mac: MacAddr) -> io::Result<()> {
        // SAFETY: packet_mreq is plain data; all-zero is a valid starting value.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_MULTICAST as u16;
        mreq.mr_alen = 6;
        mreq.mr_address[..6].copy_from_slice(&mac.0);
        crate::sys::set_opt(self.raw(), libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, mreq)
    }

    fn raw(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Receives one frame that arrived on the interface (not one it sent). None: nothing left.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            // SAFETY: sockaddr_ll is plain data; all-zero is valid.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` and `from` are writable for the lengths passed.
            let n = unsafe {
                libc::recvfrom(
                    self.raw(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(n as usize);
        }
    }

    fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is readable for its length; the socket is bound to its interface.
        let n = unsafe { libc::send(self.raw(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// Opens the packet sockets: everything the ARP thread needs from the kernel, so that the
/// process can drop its privileges before [`ArpReady::spawn`] starts the thread. `counters`
/// are ARP's and neighbour discovery's. With `kernel` (a netlink socket), the kernel resolves:
/// the sockets only send, and the engines ask the kernel through it
/// ([`crate::resolve::engine::Resolver::resolve_by_kernel`]).
#[allow(clippy::too_many_arguments, reason = "the thread's whole world, handed over once")]
pub fn open(
    ports: Vec<ArpPort>,
    tables: Arc<ArcSwap<RouterTables>>,
    neighbors: Neighbors,
    cfg: ArpConfig,
    counters: (Arc<ArpCounters>, Arc<ArpCounters>),
    glean: GleanReceiver,
    control: Receiver<Control>,
    stop: Arc<AtomicBool>,
    clock: Clock,
    kernel: Option<Rtnl>,
) -> io::Result<ArpReady> {
    let (keep, keep6) = match kernel {
        Some(_) => (Keep::Nothing, Keep::Nothing),
        None => (Keep::All, Keep::NeighbourDiscovery),
    };
    let open = |ethertype, keep| -> io::Result<Vec<PacketSocket>> {
        ports.iter().map(|p| PacketSocket::open(p.ifindex, ethertype, keep)).collect()
    };
    let (sockets, sockets6) = (open(ETHERTYPE_ARP, keep)?, open(ETHERTYPE_IPV6, keep6)?);
    let (v4, v6) = (neighbors.v4, neighbors.v6);
    let mut engine =
        ArpEngine::new(Arc::clone(&tables), (Arc::clone(&v4), Arc::clone(&v6)), cfg, Arc::clone(&counters.0));
    let mut engine6 = NdpEngine::new(Arc::clone(&tables), (v6, v4), cfg, Arc::clone(&counters.1));
    if kernel.is_some() {
        engine.resolve_by_kernel();
        engine6.resolve_by_kernel();
    } else {
        let t = tables.load();
        for ((p, s), spec) in ports.iter().zip(&sockets6).zip(&t.ports) {
            for (a, _) in &spec.addrs6 {
                s.join(p.ifindex, icmpv6::multicast_mac(&icmpv6::solicited_node(a)))?;
            }
        }
    }
    engine.set_statics(neighbors.statics);
    engine6.set_statics(unscoped(neighbors.statics6));
    let ifindex = ports.iter().map(|p| p.ifindex).collect();
    Ok(ArpReady {
        thread: ArpThread { sockets, sockets6, engine, engine6, counters: counters.0, clock, kernel, ifindex },
        glean,
        control,
        stop,
    })
}

/// The ARP thread with its sockets open, not yet running.
pub struct ArpReady {
    thread: ArpThread,
    glean: GleanReceiver,
    control: Receiver<Control>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for ArpReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArpReady").field("ports", &self.thread.sockets.len()).finish_non_exhaustive()
    }
}

impl ArpReady {
    /// Sends anything the engine already queued and starts the thread, which runs `first`
    /// before anything else (the caller's: its scheduling, say).
    pub fn spawn(self, first: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
        let ArpReady { mut thread, glean, control, stop } = self;
        thread.flush();
        std::thread::Builder::new().name("xfwd-arp".into()).spawn(move || {
            first();
            thread.run(&glean, &control, &stop)
        })
    }
}

struct ArpThread {
    sockets: Vec<PacketSocket>,
    sockets6: Vec<PacketSocket>,
    engine: ArpEngine,
    engine6: NdpEngine,
    counters: Arc<ArpCounters>,
    clock: Clock,
    /// The kernel resolves: asks go through this socket, nothing is read.
    kernel: Option<Rtnl>,
    /// Each port's interface index.
    ifindex: Vec<u32>,
}

impl ArpThread {
    fn run(&mut self, glean: &GleanReceiver, control: &Receiver<Control>, stop: &AtomicBool) {
        let mut buf = vec![0u8; 2048];
        let mut last_timers = 0u64;
        while !stop.load(Ordering::Relaxed) {
            self.wait();
            self.counters.beat.beat();
            let now = self.clock.now_ms();
            // At most READ_BURST frames per socket per turn: a flood on one cannot keep the
            // others, the gleans and the timers waiting.
            for p in 0..self.sockets.len() {
                if self.kernel.is_some() {
                    break;
                }
                for _ in 0..READ_BURST {
                    let Some(n) = self.sockets[p].recv(&mut buf) else { break };
                    self.engine.on_arp(PortId(p as u8), &buf[..n], now);
                }
                for _ in 0..READ_BURST {
                    let Some(n) = self.sockets6[p].recv(&mut buf) else { break };
                    self.engine6.on_ndp(PortId(p as u8), &buf[..n], now);
                }
            }
            glean.drain(|g| match g.next_hop {
                IpAddr::V4(_) => self.engine.on_glean(g, now),
                IpAddr::V6(_) => self.engine6.on_glean(g, now),
            });
            while let Ok(c) = control.try_recv() {
                match c {
                    Control::StaticNeighbors(list) => self.engine.set_statics(list),
                    Control::StaticNeighbors6(list) => self.engine6.set_statics(unscoped(list)),
                    Control::GleanQueue(n) => {
                        self.engine.set_glean_queue(n);
                        self.engine6.set_glean_queue(n);
                    }
                    Control::KernelNeighbor { port, ip: IpAddr::V4(a), mac, failed } => {
                        self.engine.kernel_entry(a, port, mac, failed, now)
                    }
                    Control::KernelNeighbor { port, ip: IpAddr::V6(a), mac, failed } => {
                        self.engine6.kernel_entry(scope6(a, port), port, mac, failed, now)
                    }
                    Control::Announce(port) => {
                        self.engine.announce(port);
                        self.engine6.announce(port);
                    }
                    Control::KernelNeighborsPresent(list) => {
                        let v4 = list.iter().filter_map(|(p, ip)| match ip {
                            IpAddr::V4(a) => Some((*a, *p)),
                            IpAddr::V6(_) => None,
                        });
                        self.engine.kernel_prune(&v4.collect());
                        let v6 = list.iter().filter_map(|(p, ip)| match ip {
                            IpAddr::V6(a) => Some((scope6(*a, *p), *p)),
                            IpAddr::V4(_) => None,
                        });
                        self.engine6.kernel_prune(&v6.collect());
                    }
                }
            }
            if now >= last_timers + 50 || self.engine.resolving() || self.engine6.resolving() {
                self.engine.timers(now);
                self.engine6.timers(now);
                last_timers = now;
            }
            self.flush();
        }
    }

    fn flush(&mut self) {
        if let Some(rtnl) = &mut self.kernel {
            let asks = self.engine.take_asks().into_iter().map(|(p, a)| (p, IpAddr::V4(a)));
            let asks = asks.chain(self.engine6.take_asks().into_iter().map(|(p, a)| (p, IpAddr::V6(unscope6(a)))));
            for (port, ip) in asks {
                let Some(&ifindex) = self.ifindex.get(port.index()) else { continue };
                if rtnl.ask_neighbor(ifindex, ip).is_err() {
                    self.counters.send_errors.inc();
                }
            }
        }
        // Each family's frames leave by its own socket (whose protocol the kernel gives them).
        let out = self.engine.take_output().into_iter().map(|o| (o, false));
        let out = out.chain(self.engine6.take_output().into_iter().map(|o| (o, true)));
        for ((port, frame), v6) in out {
            let sockets = if v6 { &self.sockets6 } else { &self.sockets };
            let sent = sockets.get(port.index()).map(|s| s.send(&frame));
            if !matches!(sent, Some(Ok(()))) {
                self.counters.send_errors.inc();
            }
        }
    }

    /// Waits for a frame on a socket it reads, or [`POLL_MS`]. Where the kernel resolves,
    /// nothing is read, and nothing is polled: the wait is the timer's alone.
    fn wait(&self) {
        let read = self.kernel.is_none();
        let mut pfds: Vec<libc::pollfd> = self
            .sockets
            .iter()
            .chain(&self.sockets6)
            .filter(|_| read)
            .map(|s| libc::pollfd { fd: s.raw(), events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: `pfds` is a valid array of initialised pollfd over our open sockets.
        let _ = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, POLL_MS) };
    }
}

/// Static IPv6 neighbours as the resolver takes them: keys it binds to their port.
fn unscoped(list: Vec<(std::net::Ipv6Addr, MacAddr)>) -> Vec<(Key6, MacAddr)> {
    list.into_iter().map(|(addr, mac)| (Key6 { addr, port: None }, mac)).collect()
}
