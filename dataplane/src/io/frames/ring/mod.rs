//! The ring boundary: what a worker needs from AF_XDP, as a trait, so that the worker's code
//! runs the same over the kernel's sockets ([`AfXdp`], xsk-rs) and over an in-memory kernel in
//! tests (`fake`, `cfg(test)`), where its frame accounting is checked after every step without
//! root.
//!
//! The worker needs four rings per (port, UMEM) — RX and TX of its own socket, fill and
//! completion shared by the pool's members — the frames' bytes, and five calls into the
//! kernel: a TX kick, a busy poll, a fill-ring wake-up, a sleep until a socket is readable, and
//! the socket's statistics. Nothing else of xsk-rs reaches the worker.
//!
//! Every method that hands descriptors across is `unsafe` with the contract of the frame
//! ownership rule (see `io`): a descriptor is produced only by the one place that holds it, and
//! consumed descriptors become the caller's.

use std::io;

use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

use std::os::fd::RawFd;

use crate::stats::XskSnapshot;

#[cfg(test)]
pub mod fake;

/// One worker's own rings on one port: its socket's RX and TX rings.
#[derive(Debug)]
pub struct PortRings<X: Xsk = AfXdp> {
    /// Received frames.
    pub rx: X::Rx,
    /// Frames to send.
    pub tx: X::Tx,
    /// The socket's fd (for kicks, poll and statistics).
    pub fd: RawFd,
    /// The UMEM the socket is bound with: an index into [`QueueSockets::pools`](super::xsk::QueueSockets::pools).
    pub pool: usize,
    /// The port's place among that pool's ports ([`Pool::rings`](super::xsk::Pool::rings), [`crate::stats::PoolGauges::ports`]).
    pub ring: usize,
}

/// A frame descriptor: which frame, and how long its data is.
pub trait Descriptor: Copy + Default + Send + 'static {
    /// The frame's data length in bytes.
    fn len(&self) -> usize;

    /// Whether the frame holds no data.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A ring the worker takes descriptors off: an RX ring, a completion ring.
pub trait Consumer<D> {
    /// Takes up to `out.len()` descriptors off the ring into `out`; returns how many.
    ///
    /// # Safety
    /// The ring must belong to a socket or UMEM whose frames `D` names, so that the frames
    /// taken are the caller's from now on.
    unsafe fn consume(&mut self, out: &mut [D]) -> usize;

    /// Descriptors waiting on the ring now.
    fn available(&mut self) -> u32;
}

/// A ring the worker puts descriptors on: a TX ring, a fill ring.
pub trait Producer<D> {
    /// Puts as many of `descs` as there is room for on the ring, in order; returns how many.
    ///
    /// # Safety
    /// The caller holds every frame in `descs` and gives up those put on the ring until they
    /// come back (completion ring, RX ring).
    unsafe fn produce(&mut self, descs: &[D]) -> usize;

    /// Free slots, at most `want` (may read a cached index: cheap).
    fn free(&mut self, want: u32) -> u32;

    /// Free slots, read exactly.
    fn free_exact(&mut self) -> u32;

    /// Whether the kernel asks to be woken to take what is put on the ring.
    fn needs_wakeup(&self) -> bool;
}

/// The frames of a UMEM.
pub trait Frames<D> {
    /// The data of the frame `d` names, up to its length.
    ///
    /// # Safety
    /// `d` names a frame of this UMEM that the caller holds and nothing writes meanwhile.
    unsafe fn bytes<'a>(&'a self, d: &'a D) -> &'a [u8];

    /// The data of the frame `d` names, writable.
    ///
    /// # Safety
    /// `d` names a frame of this UMEM that the caller holds and nothing else reads or writes
    /// meanwhile.
    unsafe fn bytes_mut<'a>(&'a self, d: &'a mut D) -> &'a mut [u8];

    /// Sets the frame's data length, at most the room the frame has.
    ///
    /// # Safety
    /// As [`Frames::bytes_mut`].
    unsafe fn set_len(&self, d: &mut D, len: usize);

    /// Makes `src` the frame's whole data (cut at the room the frame has).
    ///
    /// # Safety
    /// As [`Frames::bytes_mut`].
    unsafe fn write(&self, d: &mut D, src: &[u8]) {
        // SAFETY: the caller's contract is this method's.
        unsafe {
            self.set_len(d, src.len());
            let dst = self.bytes_mut(d);
            let n = dst.len();
            dst.copy_from_slice(&src[..n]);
        }
    }
}

/// One implementation of the ring boundary: its descriptor, frames, rings and kernel calls.
pub trait Xsk: Sized + 'static {
    /// A frame descriptor.
    type Desc: Descriptor + std::fmt::Debug;
    /// A handle on a UMEM's frames.
    type Umem: Frames<Self::Desc> + Send + std::fmt::Debug;
    /// A socket's RX ring.
    type Rx: Consumer<Self::Desc> + Send + std::fmt::Debug;
    /// A socket's TX ring.
    type Tx: Producer<Self::Desc> + Send + std::fmt::Debug;
    /// A (port, UMEM)'s fill ring.
    type Fill: Producer<Self::Desc> + Send + std::fmt::Debug;
    /// A (port, UMEM)'s completion ring.
    type Comp: Consumer<Self::Desc> + Send + std::fmt::Debug;

    /// Asks the kernel to send what is on `port`'s TX ring (a zero-length `sendto`).
    fn kick(port: &mut PortRings<Self>) -> io::Result<()>;

    /// Asks the driver to poll `port` now (a zero-length `recvfrom`, preferred busy polling).
    fn busy_poll(port: &mut PortRings<Self>);

    /// Wakes the kernel to take what was put on `port`'s fill ring.
    fn wake_fill(port: &mut PortRings<Self>);

    /// Sleeps until one of `ports`' RX rings has frames, or `timeout_ms` passes.
    fn sleep(ports: &mut [PortRings<Self>], timeout_ms: i32);

    /// `port`'s socket statistics (`None`: the kernel gave none).
    fn statistics(port: &PortRings<Self>) -> Option<XskSnapshot>;
}

/// The kernel's AF_XDP sockets, through xsk-rs.
#[derive(Debug)]
pub enum AfXdp {}

impl Descriptor for FrameDesc {
    #[inline(always)]
    fn len(&self) -> usize {
        self.lengths().data()
    }
}

/// xsk-rs's consumer rings (RX, completion) as [`Consumer`]s.
macro_rules! consumer {
    ($($ring:ty),*) => {$(
        impl Consumer<FrameDesc> for $ring {
            #[inline(always)]
            unsafe fn consume(&mut self, out: &mut [FrameDesc]) -> usize {
                // SAFETY: the caller's contract is xsk-rs's.
                unsafe { <$ring>::consume(self, out) }
            }

            #[inline(always)]
            fn available(&mut self) -> u32 {
                self.nb_avail_exact()
            }
        }
    )*};
}
consumer!(RxQueue, CompQueue);

/// xsk-rs's producer rings (TX, fill) as [`Producer`]s.
macro_rules! producer {
    ($($ring:ty),*) => {$(
        impl Producer<FrameDesc> for $ring {
            #[inline(always)]
            unsafe fn produce(&mut self, descs: &[FrameDesc]) -> usize {
                // SAFETY: the caller's contract is xsk-rs's.
                unsafe { <$ring>::produce(self, descs) }
            }

            #[inline(always)]
            fn free(&mut self, want: u32) -> u32 {
                self.nb_free(want)
            }

            #[inline(always)]
            fn free_exact(&mut self) -> u32 {
                self.nb_free_exact()
            }

            #[inline(always)]
            fn needs_wakeup(&self) -> bool {
                <$ring>::needs_wakeup(self)
            }
        }
    )*};
}
producer!(TxQueue, FillQueue);

impl Frames<FrameDesc> for Umem {
    #[inline(always)]
    unsafe fn bytes<'a>(&'a self, d: &'a FrameDesc) -> &'a [u8] {
        // SAFETY: the caller's contract is xsk-rs's; the slice lives in the UMEM's mapping,
        // which `self` keeps for 'a.
        unsafe { self.data(d) }.contents()
    }

    #[inline(always)]
    unsafe fn bytes_mut<'a>(&'a self, d: &'a mut FrameDesc) -> &'a mut [u8] {
        // SAFETY: the caller's contract is xsk-rs's.
        let mut data = unsafe { self.data_mut(d) };
        let s = data.contents_mut();
        // SAFETY: the slice is the frame's data segment in the UMEM's mapping, which `self`
        // keeps for 'a; `d` stays borrowed for 'a, so its length cannot change meanwhile and
        // no other view of the frame is made through it.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr(), s.len()) }
    }

    #[inline(always)]
    unsafe fn set_len(&self, d: &mut FrameDesc, len: usize) {
        // SAFETY: the caller's contract is xsk-rs's; the cursor clamps to the frame's room.
        unsafe { self.data_mut(d) }.cursor().set_pos(len);
    }

    #[inline(always)]
    unsafe fn write(&self, d: &mut FrameDesc, src: &[u8]) {
        // SAFETY: the caller's contract is xsk-rs's.
        let mut data = unsafe { self.data_mut(d) };
        let mut cur = data.cursor();
        cur.set_pos(0);
        // What does not fit the frame is cut (an answer, a copy: never longer than a frame).
        let _ = io::Write::write_all(&mut cur, src);
    }
}

impl Xsk for AfXdp {
    type Desc = FrameDesc;
    type Umem = Umem;
    type Rx = RxQueue;
    type Tx = TxQueue;
    type Fill = FillQueue;
    type Comp = CompQueue;

    #[inline]
    fn kick(port: &mut PortRings<Self>) -> io::Result<()> {
        // SAFETY: `fd` is the port's open AF_XDP socket; a null buffer of length zero and no
        // address is the documented wake-up call.
        let r = unsafe { libc::sendto(port.fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    #[inline]
    fn busy_poll(port: &mut PortRings<Self>) {
        // SAFETY: `fd` is the port's open AF_XDP socket; a null buffer of length zero is never
        // written.
        let _ = unsafe {
            libc::recvfrom(
                port.fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    fn wake_fill(port: &mut PortRings<Self>) {
        // SAFETY: the fd is the port's open socket; poll(2) with a zero timeout only wakes it.
        let _ = unsafe { poll_in(&[port.fd], 0) };
    }

    fn sleep(ports: &mut [PortRings<Self>], timeout_ms: i32) {
        let fds: [i32; crate::MAX_PORTS] = std::array::from_fn(|i| ports.get(i).map_or(-1, |r| r.fd));
        // SAFETY: every non-negative fd is an open socket of these ports; -1 entries are ignored.
        let _ = unsafe { poll_in(&fds[..ports.len().min(crate::MAX_PORTS)], timeout_ms) };
    }

    fn statistics(port: &PortRings<Self>) -> Option<XskSnapshot> {
        let s = port.rx.fd().xdp_statistics().ok()?;
        Some(XskSnapshot {
            rx_dropped: s.rx_dropped(),
            rx_ring_full: s.rx_ring_full(),
            fill_ring_empty: s.rx_fill_ring_empty_descs(),
            tx_ring_empty: s.tx_ring_empty_descs(),
            rx_invalid: s.rx_invalid_descs(),
            tx_invalid: s.tx_invalid_descs(),
        })
    }
}

/// poll(2) for POLLIN on `fds`.
///
/// # Safety
/// Every non-negative entry must be an open file descriptor for the duration of the call.
unsafe fn poll_in(fds: &[i32], timeout_ms: i32) -> io::Result<usize> {
    let mut pfds: [libc::pollfd; crate::MAX_PORTS] = std::array::from_fn(|i| libc::pollfd {
        fd: fds.get(i).copied().unwrap_or(-1),
        events: libc::POLLIN,
        revents: 0,
    });
    let n = fds.len().min(crate::MAX_PORTS);
    // SAFETY: `pfds[..n]` is a valid, initialised array of pollfd; the caller vouches for the fds.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}
