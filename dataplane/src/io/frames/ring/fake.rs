//! An in-memory kernel behind the ring boundary, for tests without root: rings of fixed size,
//! frames in a plain buffer, and a kernel whose every move a test makes (a frame arrives, the
//! device sends). It checks the frame ownership rule on every call: a descriptor is produced
//! only while the worker holds it (the fake knows where every frame is), and a frame sent is
//! recorded with its port and bytes for the test to compare with what the decision said.
//!
//! Copy mode as on veth and `dpaa_eth`: a TX kick sends up to [`Kernel::budget`] frames into
//! the completion ring (as far as it has room) and answers EAGAIN while frames remain; the
//! test may make kicks fail ([`Kernel::kick_error`]) or let the device send without a kick
//! ([`Kernel::send`]).

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::PortRings;
use super::{Consumer, Descriptor, Frames, Producer, Xsk};
use crate::io::frames::xsk::{FrameRings, Pool, QueueSockets, RingSizes};
use crate::stats::XskSnapshot;

/// Bytes per fake frame.
pub const FRAME: usize = 256;

/// A fake frame descriptor: the frame's offset in its UMEM and its length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FakeDesc {
    /// Offset of the frame in its UMEM.
    pub addr: u32,
    /// Data length.
    pub len: u32,
}

impl Descriptor for FakeDesc {
    fn len(&self) -> usize {
        self.len as usize
    }
}

impl FakeDesc {
    fn frame(&self) -> usize {
        self.addr as usize / FRAME
    }
}

/// Where a frame is, as the fake kernel sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The worker's (free list, spare list, flow queues, or being handled).
    User,
    /// In ring `n` (a fill, RX, TX or completion ring).
    Ring(usize),
}

/// The frames of one fake UMEM, and its number.
#[derive(Debug)]
pub struct Memory(UnsafeCell<Box<[u8]>>, usize);

// SAFETY: frames are reached only through the ring boundary's unsafe methods, whose contract
// (one holder per frame) keeps any two threads off the same bytes.
unsafe impl Sync for Memory {}

/// A handle on a fake UMEM.
#[derive(Debug, Clone)]
pub struct FakeUmem(Arc<Memory>);

impl FakeUmem {
    /// The UMEM's number in the fake kernel.
    pub fn index(&self) -> usize {
        self.0 .1
    }

    /// The bytes of frame `frame` (the whole frame, not only its data).
    ///
    /// # Safety
    /// Nothing else reads or writes the frame meanwhile.
    #[allow(clippy::mut_from_ref, reason = "the frame ownership rule stands in for the borrow")]
    unsafe fn frame_mut(&self, frame: usize) -> &mut [u8] {
        // SAFETY: the buffer lives as long as `self`; the caller holds the frame alone.
        let all = unsafe { &mut *self.0 .0.get() };
        &mut all[frame * FRAME..(frame + 1) * FRAME]
    }
}

impl Frames<FakeDesc> for FakeUmem {
    unsafe fn bytes<'a>(&'a self, d: &'a FakeDesc) -> &'a [u8] {
        // SAFETY: the caller's contract.
        let f = unsafe { self.frame_mut(d.frame()) };
        &f[d.addr as usize % FRAME..][..d.len()]
    }

    unsafe fn bytes_mut<'a>(&'a self, d: &'a mut FakeDesc) -> &'a mut [u8] {
        // SAFETY: the caller's contract.
        let f = unsafe { self.frame_mut(d.frame()) };
        &mut f[d.addr as usize % FRAME..][..d.len as usize]
    }

    unsafe fn set_len(&self, d: &mut FakeDesc, len: usize) {
        d.len = len.min(FRAME - d.addr as usize % FRAME) as u32;
    }
}

/// One fake ring.
#[derive(Debug)]
struct Ring {
    items: VecDeque<FakeDesc>,
    size: usize,
    /// The UMEM its frames belong to.
    umem: usize,
}

/// One fake socket: its rings (by index into [`Kernel`]'s) and what the kernel counted.
#[derive(Debug, Clone, Copy)]
struct Socket {
    worker: usize,
    port: usize,
    rx: usize,
    tx: usize,
    fill: usize,
    comp: usize,
    stats: XskSnapshot,
}

/// The fake kernel: every ring, where every frame is, and what was sent.
#[derive(Debug)]
pub struct Kernel {
    rings: Vec<Ring>,
    /// By UMEM, by frame.
    places: Vec<Vec<Place>>,
    umems: Vec<FakeUmem>,
    sockets: Vec<Socket>,
    /// Frames one kick sends at most (the kernel's TX budget, 32).
    pub budget: usize,
    /// What kicks answer with, sending nothing (`None`: they send).
    pub kick_error: Option<i32>,
    /// Whether the fill rings ask to be woken.
    pub fill_wakeup: bool,
    /// Frames sent: the port and the bytes.
    pub sent: Vec<(usize, Vec<u8>)>,
    /// Frames the device sent in all.
    pub sent_total: u64,
}

/// A shared handle on the fake kernel.
pub type Shared = Arc<Mutex<Kernel>>;

fn lock(k: &Shared) -> MutexGuard<'_, Kernel> {
    k.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Kernel {
    fn new_ring(&mut self, size: u32, umem: usize) -> usize {
        self.rings.push(Ring { items: VecDeque::with_capacity(size as usize), size: size as usize, umem });
        self.rings.len() - 1
    }

    /// Takes `descs` onto ring `r` from the worker, as far as there is room.
    fn produce(&mut self, r: usize, descs: &[FakeDesc]) -> usize {
        let room = self.rings[r].size - self.rings[r].items.len();
        let n = room.min(descs.len());
        let umem = self.rings[r].umem;
        for d in &descs[..n] {
            let place = &mut self.places[umem][d.frame()];
            assert_eq!(*place, Place::User, "frame {d:?} produced onto ring {r} while at {place:?}");
            assert!(d.addr as usize % FRAME + d.len() <= FRAME, "descriptor {d:?} runs past its frame");
            *place = Place::Ring(r);
            self.rings[r].items.push_back(*d);
        }
        n
    }

    /// Gives the worker up to `out.len()` descriptors off ring `r`.
    fn consume(&mut self, r: usize, out: &mut [FakeDesc]) -> usize {
        let n = out.len().min(self.rings[r].items.len());
        let umem = self.rings[r].umem;
        for slot in &mut out[..n] {
            let d = self.rings[r].items.pop_front().expect("counted");
            self.places[umem][d.frame()] = Place::User;
            *slot = d;
        }
        n
    }

    /// A frame with `bytes` arrives on socket `s`: into a frame off its fill ring, onto its RX
    /// ring. Returns false where the kernel drops it (fill ring empty, RX ring full), counted as
    /// the kernel counts it.
    pub fn arrive(&mut self, s: usize, bytes: &[u8]) -> bool {
        let Socket { rx, fill, .. } = self.sockets[s];
        if self.rings[rx].items.len() == self.rings[rx].size {
            self.sockets[s].stats.rx_ring_full += 1;
            return false;
        }
        let Some(mut d) = self.rings[fill].items.pop_front() else {
            self.sockets[s].stats.fill_ring_empty += 1;
            return false;
        };
        let umem = self.rings[fill].umem;
        assert!(bytes.len() <= FRAME);
        // SAFETY: the frame is in no ring the worker reads and the worker does not hold it:
        // the kernel's.
        unsafe { self.umems[umem].frame_mut(d.frame())[..bytes.len()].copy_from_slice(bytes) };
        d = FakeDesc { addr: (d.frame() * FRAME) as u32, len: bytes.len() as u32 };
        self.places[umem][d.frame()] = Place::Ring(rx);
        self.rings[rx].items.push_back(d);
        true
    }

    /// The device sends up to `n` frames off socket `s`'s TX ring into its completion ring (as
    /// far as that has room). Returns how many.
    pub fn send(&mut self, s: usize, n: usize) -> usize {
        let Socket { tx, comp, port, .. } = self.sockets[s];
        let room = self.rings[comp].size - self.rings[comp].items.len();
        let k = n.min(room).min(self.rings[tx].items.len());
        let umem = self.rings[tx].umem;
        for _ in 0..k {
            let d = self.rings[tx].items.pop_front().expect("counted");
            // SAFETY: the frame is on the TX ring: the kernel's to read.
            let bytes = unsafe { &self.umems[umem].frame_mut(d.frame())[d.addr as usize % FRAME..][..d.len()] };
            self.sent.push((port, bytes.to_vec()));
            self.places[umem][d.frame()] = Place::Ring(comp);
            self.rings[comp].items.push_back(d);
        }
        self.sent_total += k as u64;
        k
    }

    /// Worker `w`'s socket on `port`.
    pub fn socket(&self, w: usize, port: usize) -> usize {
        self.sockets.iter().position(|s| s.worker == w && s.port == port).expect("a socket of the world")
    }

    /// Frames on socket `s`'s TX ring.
    pub fn tx_len(&self, s: usize) -> usize {
        self.rings[self.sockets[s].tx].items.len()
    }

    /// Frames of UMEM `umem` the worker holds, and where the others are: (user, in fill rings,
    /// in RX rings, in TX rings, in completion rings).
    pub fn census(&self, umem: usize) -> [u64; 5] {
        let kind = |r: usize| {
            let s = self.sockets.iter().find(|s| [s.fill, s.rx, s.tx, s.comp].contains(&r)).expect("a socket's ring");
            1 + [s.fill, s.rx, s.tx, s.comp].iter().position(|&x| x == r).expect("found")
        };
        let mut out = [0u64; 5];
        for p in &self.places[umem] {
            match *p {
                Place::User => out[0] += 1,
                Place::Ring(r) => out[kind(r)] += 1,
            }
        }
        out
    }

    /// Where frame `d` of UMEM `umem` is.
    pub fn place(&self, umem: usize, d: &FakeDesc) -> Place {
        self.places[umem][d.frame()]
    }
}

/// The fake's rings: a handle on the kernel and the ring's index.
#[derive(Debug)]
pub struct FakeRing {
    kernel: Shared,
    ring: usize,
    /// The socket whose RX or TX ring it is (`usize::MAX`: a fill or completion ring).
    socket: usize,
}

impl Consumer<FakeDesc> for FakeRing {
    unsafe fn consume(&mut self, out: &mut [FakeDesc]) -> usize {
        lock(&self.kernel).consume(self.ring, out)
    }

    fn available(&mut self) -> u32 {
        lock(&self.kernel).rings[self.ring].items.len() as u32
    }
}

impl Producer<FakeDesc> for FakeRing {
    unsafe fn produce(&mut self, descs: &[FakeDesc]) -> usize {
        lock(&self.kernel).produce(self.ring, descs)
    }

    fn free(&mut self, want: u32) -> u32 {
        self.free_exact().min(want)
    }

    fn free_exact(&mut self) -> u32 {
        let k = lock(&self.kernel);
        (k.rings[self.ring].size - k.rings[self.ring].items.len()) as u32
    }

    fn needs_wakeup(&self) -> bool {
        // TX rings always do in copy mode; fill rings as the test says.
        self.socket != usize::MAX || lock(&self.kernel).fill_wakeup
    }
}

/// The fake kernel as the ring boundary.
#[derive(Debug)]
pub enum Fake {}

impl Xsk for Fake {
    type Desc = FakeDesc;
    type Umem = FakeUmem;
    type Rx = FakeRing;
    type Tx = FakeRing;
    type Fill = FakeRing;
    type Comp = FakeRing;

    fn kick(port: &mut PortRings<Self>) -> io::Result<()> {
        let mut k = lock(&port.tx.kernel);
        if let Some(e) = k.kick_error {
            return Err(io::Error::from_raw_os_error(e));
        }
        let s = port.tx.socket;
        let budget = k.budget;
        k.send(s, budget);
        if k.tx_len(s) > 0 {
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        Ok(())
    }

    fn busy_poll(_port: &mut PortRings<Self>) {}

    fn wake_fill(_port: &mut PortRings<Self>) {}

    fn sleep(_ports: &mut [PortRings<Self>], _timeout_ms: i32) {}

    fn statistics(port: &PortRings<Self>) -> Option<XskSnapshot> {
        Some(lock(&port.tx.kernel).sockets[port.tx.socket].stats)
    }
}

/// How the fake world's UMEMs are laid out (as `start::plan::Layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A UMEM per worker, over every port.
    PerQueue,
    /// A UMEM per port, shared by every worker.
    PerCpu,
}

/// A fake kernel with `workers` workers' sockets on `ports` ports, `frames_per_port` frames
/// per port in each UMEM, rings of `sizes`: the kernel, and each worker's sockets (found again
/// with [`Kernel::socket`]).
pub fn world(
    workers: usize,
    ports: usize,
    layout: Layout,
    frames_per_port: usize,
    sizes: RingSizes,
) -> (Shared, Vec<QueueSockets<Fake>>) {
    let kernel: Shared = Arc::new(Mutex::new(Kernel {
        rings: Vec::new(),
        places: Vec::new(),
        umems: Vec::new(),
        sockets: Vec::new(),
        budget: 32,
        kick_error: None,
        fill_wakeup: false,
        sent: Vec::new(),
        sent_total: 0,
    }));
    let names: Vec<String> = (0..ports).map(|p| format!("port{p}")).collect();
    let worker_ids: Vec<u32> = (0..workers as u32).collect();
    // Each UMEM: its members and its ports.
    let umems: Vec<(Vec<usize>, Vec<usize>)> = match layout {
        Layout::PerQueue => (0..workers).map(|w| (vec![w], (0..ports).collect())).collect(),
        Layout::PerCpu => (0..ports).map(|p| ((0..workers).collect(), vec![p])).collect(),
    };
    let mut parts: Vec<Vec<QueueSockets<Fake>>> = (0..workers).map(|_| Vec::new()).collect();
    let mut k = lock(&kernel);
    for (members, uports) in umems {
        let u = k.umems.len();
        let count = frames_per_port * uports.len() * members.len();
        let mem = FakeUmem(Arc::new(Memory(UnsafeCell::new(vec![0u8; count * FRAME].into_boxed_slice()), u)));
        k.umems.push(mem.clone());
        k.places.push(vec![Place::User; count]);
        let frames: Vec<FakeDesc> = (0..count).map(|f| FakeDesc { addr: (f * FRAME) as u32, len: 0 }).collect();
        let mut shared = Vec::new();
        let mut fill_comp = Vec::new();
        for _ in &uports {
            let (fill, comp) = (k.new_ring(sizes.fill, u), k.new_ring(sizes.completion, u));
            fill_comp.push((fill, comp));
            shared.push(FrameRings::<Fake> {
                fill: FakeRing { kernel: Arc::clone(&kernel), ring: fill, socket: usize::MAX },
                comp: FakeRing { kernel: Arc::clone(&kernel), ring: comp, socket: usize::MAX },
            });
        }
        let member_ids: Vec<u32> = members.iter().map(|&w| worker_ids[w]).collect();
        let port_names: Vec<String> = uports.iter().map(|&p| names[p].clone()).collect();
        let (pool, shares) = Pool::share_out(shared, frames, &member_ids, &port_names, sizes);
        for (member, (&w, mine)) in members.iter().zip(shares).enumerate() {
            let mut rings = Vec::new();
            for (i, &p) in uports.iter().enumerate() {
                let (rx, tx) = (k.new_ring(sizes.rx, u), k.new_ring(sizes.tx, u));
                let (fill, comp) = fill_comp[i];
                k.sockets.push(Socket { worker: w, port: p, rx, tx, fill, comp, stats: XskSnapshot::default() });
                let socket = k.sockets.len() - 1;
                rings.push(PortRings::<Fake> {
                    rx: FakeRing { kernel: Arc::clone(&kernel), ring: rx, socket },
                    tx: FakeRing { kernel: Arc::clone(&kernel), ring: tx, socket },
                    fd: -1,
                    pool: 0,
                    ring: i,
                });
            }
            parts[w].push(QueueSockets {
                pools: vec![crate::io::frames::xsk::PoolShare {
                    umem: mem.clone(),
                    frames: mine,
                    pool: Arc::clone(&pool),
                    member,
                }],
                ports: rings,
                busy_poll: false,
            });
        }
    }
    drop(k);
    let sockets = parts.into_iter().map(QueueSockets::join).collect();
    (kernel, sockets)
}
