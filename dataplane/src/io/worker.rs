//! The per-queue worker: RX rings → decision → TX rings, in batches, with frame accounting.
//!
//! One round: for each port, take up to [`BATCH`] frames off its RX ring, decide each, and
//! queue it for its egress port(s); put each port's queued frames on its TX ring and kick once;
//! reap completion rings into the free list; top the fill rings up from the free list. Nothing is
//! allocated per frame (every buffer is sized at start) and nothing is logged: every outcome is a
//! counter. Batch 64: large enough to amortise a kick and a ring index update over many frames,
//! small enough that a batch's descriptors and headers stay in L1.
//!
//! Polling: `busy` spins on the rings (lowest latency, one core burnt per worker even when
//! idle); `adaptive` spins a short while after the last work, then sleeps in poll(2) on the RX
//! sockets with a bounded timeout, after topping up the fill rings so that the kernel never
//! waits on an empty one while the worker sleeps.

use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use xsk_rs::FrameDesc;

use super::glean::GleanSender;
use super::options::PollMode;
use super::xsk::{PortRings, QueueSockets, RING_SIZE};
use crate::action::{Action, SCRATCH_LEN};
use crate::l2::{self, Fdb, Learn};
use crate::l3::{self, NeighborTable, RouterState, RouterTables, TokenBucket};
use crate::stats::{PortCounters, QueueCounters};
use crate::time::{Clock, Seconds};
use crate::PortId;

/// Frames taken off one RX ring per round.
pub const BATCH: usize = 64;
/// Idle rounds an adaptive worker spins before it sleeps.
const SPIN_ROUNDS: u32 = 128;
/// Longest sleep in poll(2): bounds how late a stop request or a retried kick is seen.
const POLL_TIMEOUT_MS: i32 = 10;
/// How often the kernel's socket statistics are copied into the counters.
const XSK_STATS_EVERY: Duration = Duration::from_millis(250);
/// Most kicks per TX flush: 2048 descriptors at the kernel's 32 per kick, and some slack.
const MAX_KICKS: u32 = RING_SIZE / 32 + 8;

/// The decision a worker applies to each received frame.
pub trait Decide: Send {
    /// What to do with `frame`, received on `ingress` at `now_ms` (milliseconds of the
    /// worker's [`Clock`]). May rewrite the frame in place, or build an answer in `scratch`
    /// ([`Action::Reply`]). `counters` are the ingress port's, for outcomes that are not drops.
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action;

    /// Takes a copy of a frame, received on `ingress`, whose next hop `next_hop` on `port` is
    /// unresolved ([`Action::Glean`]). Returns false when it could not be queued (the frame is
    /// then dropped as [`crate::Reason::GleanQueueFull`]).
    fn glean(&mut self, _frame: &[u8], _ingress: PortId, _port: PortId, _next_hop: Ipv4Addr) -> bool {
        false
    }

    /// Called once per round with the queue's counters, for state the decision keeps itself.
    fn publish(&mut self, _counters: &QueueCounters) {}

    /// How many frames ahead of the decision [`Decide::prefetch`] runs (0: never). Far enough
    /// for a table line to arrive from memory while the frames before it are decided, near
    /// enough not to overrun the CPU's outstanding-miss slots (64 at once measured worst).
    const PREFETCH_DISTANCE: usize = 0;

    /// Starts the table reads `decide` will make for `frame`, [`Decide::PREFETCH_DISTANCE`]
    /// frames before its decision (a hint: no effect on results).
    fn prefetch(&mut self, _frame: &[u8]) {}
}

/// The learning bridge ([`crate::l2::bridge`]) as a worker decision.
#[derive(Debug, Clone)]
pub struct BridgeDecide {
    /// The FDB shared by all workers.
    pub fdb: Arc<Fdb>,
}

impl Decide for BridgeDecide {
    // Measured (benches/bridge.rs): 4 ahead gains a tenth over 64k stations and costs a
    // sixth over 4k, where the table is in cache and the prefetch's hashing is pure overhead.
    const PREFETCH_DISTANCE: usize = 4;

    #[inline]
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        counters: &PortCounters,
        _scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let v = l2::decide(frame, ingress, &self.fdb, Seconds::from_ms(now_ms));
        if v.learn == Some(Learn::Full) {
            counters.fdb_full.inc();
        }
        v.action
    }

    #[inline]
    fn prefetch(&mut self, frame: &[u8]) {
        l2::prefetch(frame, &self.fdb);
    }
}

/// The IPv4 router ([`crate::l3::router`]) as a worker decision.
pub struct RouterDecide {
    /// The current tables; a reload swaps them, and the next frame sees the new ones.
    pub tables: arc_swap::Cache<Arc<arc_swap::ArcSwap<RouterTables>>, Arc<RouterTables>>,
    /// The neighbour table (read only: the ARP thread writes it).
    pub neighbors: Arc<NeighborTable>,
    /// This worker's ICMP rate limit and IP identification.
    pub state: RouterState,
    /// Where frames with unresolved next hops go.
    pub glean: GleanSender,
    /// Number of parts (workers and the ARP thread) the router's ICMP rate and burst are
    /// divided among ([`l3::icmp_share`]).
    pub icmp_parts: u32,
}

impl std::fmt::Debug for RouterDecide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterDecide").finish_non_exhaustive()
    }
}

impl Decide for RouterDecide {
    // Measured (benches/router.rs, 1M prefixes): 16 ahead, 42 Mpps over 1M random
    // destinations against 24 with the whole batch prefetched first and 11 without.
    const PREFETCH_DISTANCE: usize = 16;

    #[inline]
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        now_ms: u64,
        _counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let t = self.tables.load();
        l3::decide(frame, ingress, t, &self.neighbors, &mut self.state, now_ms, scratch)
    }

    #[inline]
    fn prefetch(&mut self, frame: &[u8]) {
        l3::prefetch(frame, self.tables.load());
    }

    fn glean(&mut self, frame: &[u8], ingress: PortId, port: PortId, next_hop: Ipv4Addr) -> bool {
        self.glean.send(frame, ingress, port, next_hop)
    }

    fn publish(&mut self, counters: &QueueCounters) {
        counters.icmp_rate_limited.set(self.state.icmp_rate_limited);
        // A reload may carry new ICMP limits and more next hops: they travel with the tables,
        // and are taken in here, between batches, where the decision's state may allocate.
        let t = self.tables.load();
        let share = l3::icmp_share(t.icmp_rate, t.icmp_burst, self.icmp_parts);
        if share != self.state.icmp_limit.config() {
            self.state.icmp_limit = TokenBucket::new(share.0, share.1);
        }
        self.state.fit(t);
    }
}

/// One queue's worker. Built on the control thread, run on its pinned thread.
pub struct Worker<D: Decide> {
    sockets: QueueSockets,
    decide: D,
    counters: Arc<QueueCounters>,
    stop: Arc<AtomicBool>,
    poll: PollMode,
    clock: Clock,
    /// Free frames (the only place the worker takes frames from).
    free: Vec<FrameDesc>,
    /// Frames handed to each port's fill ring and not yet received.
    in_fill: Vec<u32>,
    /// Frames handed to each port's TX ring and not yet completed.
    in_tx: Vec<u32>,
    /// Frames queued for each egress port during a round.
    tx_batch: Vec<Vec<FrameDesc>>,
    /// Scratch for RX and completion descriptors.
    scratch: Vec<FrameDesc>,
    /// Where decisions build answers (ICMP errors).
    answer: [u8; SCRATCH_LEN],
    fill_target: u32,
    total: u64,
    /// Busy mode with preferred busy polling: drive the driver from idle rounds.
    busy_poll: bool,
}

impl<D: Decide> std::fmt::Debug for Worker<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("queue", &self.counters.queue).finish()
    }
}

impl<D: Decide> Worker<D> {
    /// A worker over `sockets` applying `decide`, counting into `counters`, until `stop`. The
    /// fill rings are filled here, so the sockets can receive as soon as the XDP program is
    /// attached, before the worker thread runs.
    pub fn new(
        sockets: QueueSockets,
        decide: D,
        counters: Arc<QueueCounters>,
        stop: Arc<AtomicBool>,
        poll: PollMode,
        clock: Clock,
    ) -> Self {
        let nports = sockets.ports.len();
        let mut sockets = sockets;
        let free = std::mem::take(&mut sockets.frames);
        let total = free.len() as u64;
        // Keep half the frames for the fill rings, the rest for frames in flight to TX.
        let fill_target = ((free.len() / nports / 2) as u32).min(RING_SIZE);
        let mut w = Worker {
            sockets,
            decide,
            counters,
            stop,
            poll,
            clock,
            free,
            in_fill: vec![0; nports],
            in_tx: vec![0; nports],
            tx_batch: (0..nports).map(|_| Vec::with_capacity(BATCH)).collect(),
            scratch: vec![FrameDesc::default(); BATCH.max(RING_SIZE as usize)],
            answer: [0; SCRATCH_LEN],
            fill_target,
            total,
            busy_poll: false,
        };
        w.counters.frames.total.set(w.total);
        for p in 0..nports {
            w.refill(p);
        }
        w.publish_frames();
        w
    }

    /// Busy mode on sockets set for preferred busy polling: whenever a port's RX ring gave
    /// less than a full batch, the worker asks its driver to poll (a zero-length `recvfrom`),
    /// since with preferred busy polling the driver waits for the application rather than for
    /// an interrupt.
    pub fn drive_busy_poll(mut self, on: bool) -> Self {
        self.busy_poll = on && self.poll == PollMode::Busy;
        self
    }

    /// Runs until the stop flag is set, then publishes the final counters.
    pub fn run(mut self) {
        let nports = self.sockets.ports.len();
        let mut idle_rounds = 0u32;
        let mut last_xsk_ms = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let now_ms = self.clock.now_ms();
            let mut work = 0usize;
            for p in 0..nports {
                let got = self.receive(p, now_ms);
                if self.busy_poll && got < BATCH {
                    busy_poll(self.sockets.ports[p].fd);
                }
                work += got;
            }
            for p in 0..nports {
                work += self.reap(p);
                // Frames still in a TX ring after reaping were not sent by the last kick
                // (busy device, budget): kick again, every round, busy or idle.
                if self.in_tx[p] > 0 {
                    work += self.kick(p);
                }
                self.refill(p);
            }
            self.publish_frames();
            self.decide.publish(&self.counters);
            // The round's one clock read serves the statistics timer too.
            if now_ms.saturating_sub(last_xsk_ms) >= XSK_STATS_EVERY.as_millis() as u64 {
                self.read_xsk_stats();
                last_xsk_ms = now_ms;
            }
            if work > 0 {
                idle_rounds = 0;
                continue;
            }
            match self.poll {
                PollMode::Busy => std::hint::spin_loop(),
                PollMode::Adaptive => {
                    idle_rounds += 1;
                    if idle_rounds >= SPIN_ROUNDS {
                        // Every fill ring was topped up this round, after the last reap.
                        self.sleep();
                    }
                }
            }
        }
        self.settle();
        self.read_xsk_stats();
        self.publish_frames();
    }

    /// On the way out (the program is already detached, so nothing new arrives): lets the
    /// kernel finish what it holds — TX frames sent and completed, RX frames it took from a
    /// fill ring posted — for up to 100 ms, so that the final accounting finds every frame in
    /// a ring or the free list.
    fn settle(&mut self) {
        let nports = self.sockets.ports.len();
        let deadline = std::time::Instant::now() + Duration::from_millis(100);
        while std::time::Instant::now() < deadline {
            for p in 0..nports {
                self.reap(p);
                if self.in_tx[p] > 0 {
                    self.kick(p);
                }
            }
            // Completions were just reaped: what is not in a ring is still the kernel's.
            let c = self.ring_census();
            if c.rx_kernel + c.tx_kernel == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Takes a batch off port `p`'s RX ring, decides and transmits it. Returns frames received.
    fn receive(&mut self, p: usize, now_ms: u64) -> usize {
        let nports = self.sockets.ports.len();
        let ring = &mut self.sockets.ports[p];
        // SAFETY: descriptors come back from the RX ring of a socket on this UMEM; the frames
        // they name are now the worker's (see the ownership rule in `io`).
        let n = unsafe { ring.rx.consume(&mut self.scratch[..BATCH]) };
        if n == 0 {
            return 0;
        }
        self.in_fill[p] -= n as u32;
        self.counters.ports[p].rx_frames.add(n as u64);
        let ingress = PortId(p as u8);
        // A pipeline over the batch: each frame's table lines are asked for D frames before
        // its decision, and its header 2D before, so that cache misses overlap the work.
        let d = D::PREFETCH_DISTANCE;
        if d > 0 {
            for j in 0..2 * d {
                self.prefetch_frame(j, n, Stage::Header);
            }
            for j in 0..d {
                self.prefetch_frame(j, n, Stage::Tables);
            }
        }
        for i in 0..n {
            if d > 0 {
                self.prefetch_frame(i + 2 * d, n, Stage::Header);
                self.prefetch_frame(i + d, n, Stage::Tables);
            }
            let mut desc = self.scratch[i];
            let action = {
                // SAFETY: the worker holds this frame (just received) and nothing aliases it.
                let mut data = unsafe { self.sockets.umem.data_mut(&mut desc) };
                let frame = data.contents_mut();
                let pc = &self.counters.ports[p];
                pc.rx_bytes.add(frame.len() as u64);
                self.decide.decide(frame, ingress, now_ms, pc, &mut self.answer)
            };
            match action {
                Action::Forward(q) if q.index() < nports => self.tx_batch[q.index()].push(desc),
                Action::ForwardTrimmed { port, len } if port.index() < nports => {
                    // SAFETY: the worker still holds this frame; nothing aliases it.
                    let mut data = unsafe { self.sockets.umem.data_mut(&mut desc) };
                    let mut cur = data.cursor();
                    if usize::from(len) < cur.pos() {
                        cur.set_pos(usize::from(len));
                    }
                    self.tx_batch[port.index()].push(desc);
                }
                Action::Flood => {
                    self.counters.ports[p].flooded.inc();
                    self.flood(desc, p);
                }
                Action::Drop(reason) => {
                    self.counters.ports[p].drop(reason);
                    self.free.push(desc);
                }
                Action::Reply { port, len, cause } if port.index() < nports => {
                    // The original is not forwarded (counted under its cause); its frame
                    // carries the answer instead.
                    let pc = &self.counters.ports[p];
                    pc.drop(cause);
                    pc.icmp_sent.inc();
                    // SAFETY: the worker still holds this frame; nothing aliases it.
                    let mut data = unsafe { self.sockets.umem.data_mut(&mut desc) };
                    let mut cur = data.cursor();
                    cur.set_pos(0);
                    // An answer (at most SCRATCH_LEN bytes) always fits a UMEM frame.
                    let _ = io::Write::write_all(&mut cur, &self.answer[..usize::from(len)]);
                    self.tx_batch[port.index()].push(desc);
                }
                Action::Glean { port, next_hop } => {
                    let queued = {
                        // SAFETY: the worker still holds this frame; it is only read.
                        let data = unsafe { self.sockets.umem.data(&desc) };
                        self.decide.glean(data.contents(), ingress, port, next_hop)
                    };
                    if queued {
                        self.counters.ports[p].gleaned.inc();
                    } else {
                        self.counters.ports[p].drop(crate::Reason::GleanQueueFull);
                    }
                    self.free.push(desc);
                }
                Action::Forward(_) | Action::ForwardTrimmed { .. } | Action::Reply { .. } => {
                    // A port index beyond the ports is a decision bug; never seen, but never a panic.
                    self.counters.ports[p].drop(crate::Reason::NoEgress);
                    self.free.push(desc);
                }
            }
        }
        for q in 0..nports {
            if !self.tx_batch[q].is_empty() {
                self.transmit(q);
            }
        }
        n
    }

    /// One prefetch of the receive pipeline for frame `j` of the `n` in `scratch` (none past
    /// the end): its header, or the table lines its decision will read.
    #[inline(always)]
    fn prefetch_frame(&mut self, j: usize, n: usize, stage: Stage) {
        let Some(desc) = self.scratch[..n].get(j) else {
            return;
        };
        // SAFETY: the worker holds this frame (just received); it is only read.
        let data = unsafe { self.sockets.umem.data(desc) };
        match stage {
            Stage::Header => crate::prefetch::read(data.contents().as_ptr()),
            Stage::Tables => self.decide.prefetch(data.contents()),
        }
    }

    /// Queues `desc` (received on `ingress`) for every other port: copies for all but the last,
    /// the original for the last.
    fn flood(&mut self, desc: FrameDesc, ingress: usize) {
        let nports = self.sockets.ports.len();
        let Some(last) = (0..nports).rev().find(|&q| q != ingress) else {
            self.counters.ports[ingress].drop(crate::Reason::NoEgress);
            self.free.push(desc);
            return;
        };
        for q in (0..nports).filter(|&q| q != ingress && q != last) {
            let Some(mut copy) = self.free.pop() else {
                self.counters.ports[q].drop(crate::Reason::NoFreeFrame);
                continue;
            };
            let umem = &self.sockets.umem;
            // SAFETY: `desc` and `copy` are distinct frames of this UMEM, both held by the
            // worker; the source is only read and the copy only written.
            unsafe {
                let src = umem.data(&desc);
                let mut dst = umem.data_mut(&mut copy);
                let mut cur = dst.cursor();
                cur.set_pos(0);
                // A frame of the same UMEM always fits another frame of it.
                let _ = io::Write::write_all(&mut cur, src.contents());
            }
            self.tx_batch[q].push(copy);
        }
        self.tx_batch[last].push(desc);
    }

    /// Puts port `q`'s queued frames on its TX ring and kicks. When the ring lacks room, it
    /// first reaps and kicks to make some; what still does not fit is dropped and counted.
    fn transmit(&mut self, q: usize) {
        let want = self.tx_batch[q].len() as u32;
        if self.sockets.ports[q].tx.nb_free(want) < want {
            self.reap(q);
            self.kick(q);
        }
        let ring = &mut self.sockets.ports[q];
        let batch = &mut self.tx_batch[q];
        let k = (ring.tx.nb_free(want) as usize).min(batch.len());
        // SAFETY: the worker holds every frame in `batch`; after this call the first `sent`
        // belong to the TX ring until they come back on the completion ring.
        let sent = unsafe { ring.tx.produce(&batch[..k]) };
        let pc = &self.counters.ports[q];
        pc.tx_frames.add(sent as u64);
        let bytes: usize = batch[..sent].iter().map(|d| d.lengths().data()).sum();
        pc.tx_bytes.add(bytes as u64);
        self.in_tx[q] += sent as u32;
        for d in batch.drain(..).skip(sent) {
            pc.drop(crate::Reason::TxRingFull);
            self.free.push(d);
        }
        self.kick(q);
    }

    /// Asks the kernel to send what is on port `q`'s TX ring, if it wants asking, reaping the
    /// completions as it goes. In copy mode one kick sends a budget of frames (32) and answers
    /// EAGAIN while more remain or the completion ring is full, EBUSY when the device dropped
    /// one (no carrier): kick again while each kick makes progress; without progress, stop and
    /// let the next round retry. Returns the frames completed.
    fn kick(&mut self, q: usize) -> usize {
        let mut completed = 0;
        for _ in 0..MAX_KICKS {
            if self.in_tx[q] == 0 || !self.sockets.ports[q].tx.needs_wakeup() {
                break;
            }
            self.counters.ports[q].kicks.inc();
            let r = sendto_kick(self.sockets.ports[q].fd);
            let reaped = self.reap(q);
            completed += reaped;
            let pc = &self.counters.ports[q];
            match r {
                Ok(()) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => pc.kick_again.inc(),
                    Some(libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => pc.kick_busy.inc(),
                    _ => {
                        pc.kick_error.inc();
                        break;
                    }
                },
            }
            if reaped == 0 {
                break;
            }
        }
        completed
    }

    /// Moves port `q`'s completed frames to the free list. Returns how many.
    fn reap(&mut self, q: usize) -> usize {
        if self.in_tx[q] == 0 {
            return 0;
        }
        let mut total = 0;
        loop {
            let ring = &mut self.sockets.ports[q];
            // SAFETY: completed descriptors name frames the kernel has finished with; they
            // become the worker's.
            let n = unsafe { ring.comp.consume(&mut self.scratch[..]) };
            if n == 0 {
                break;
            }
            self.in_tx[q] -= n as u32;
            self.free.extend_from_slice(&self.scratch[..n]);
            total += n;
        }
        total
    }

    /// Tops port `p`'s fill ring up to its target from the free list.
    fn refill(&mut self, p: usize) {
        let want = self.fill_target.saturating_sub(self.in_fill[p]) as usize;
        if want == 0 || self.free.is_empty() {
            return;
        }
        let ring: &mut PortRings = &mut self.sockets.ports[p];
        let k = want.min(self.free.len());
        let k = (ring.fill.nb_free(k as u32) as usize).min(k);
        let from = self.free.len() - k;
        // SAFETY: the worker holds these free frames; once produced they are the kernel's
        // until received on this port's RX ring.
        let n = unsafe { ring.fill.produce(&self.free[from..]) };
        self.free.truncate(self.free.len() - n);
        self.in_fill[p] += n as u32;
        if n > 0 && ring.fill.needs_wakeup() {
            // SAFETY: the fd is this port's open socket; poll(2) with a zero timeout only wakes it.
            let _ = unsafe { poll_in(&[ring.fd], 0) };
        }
    }

    /// Sleeps until an RX socket is readable or the timeout passes.
    fn sleep(&mut self) {
        let fds: [i32; crate::MAX_PORTS] = std::array::from_fn(|i| self.sockets.ports.get(i).map_or(-1, |r| r.fd));
        self.counters.sleeps.inc();
        // SAFETY: every non-negative fd is an open socket of this worker; -1 entries are ignored.
        let _ = unsafe { poll_in(&fds[..self.sockets.ports.len()], POLL_TIMEOUT_MS) };
    }

    fn publish_frames(&self) {
        let g = &self.counters.frames;
        g.free.set(self.free.len() as u64);
        g.fill.set(self.in_fill.iter().map(|&n| u64::from(n)).sum());
        g.tx.set(self.in_tx.iter().map(|&n| u64::from(n)).sum());
    }

    /// Where the frames handed to the kernel are, counted off the rings themselves (the worker
    /// owns the producer side of fill and TX and the consumer side of RX and completion, so
    /// these reads are its own), summed over the ports; what no ring holds, the kernel does.
    fn ring_census(&mut self) -> RingCensus {
        let mut c = RingCensus::default();
        for (p, r) in self.sockets.ports.iter_mut().enumerate() {
            let (fill, rx) = (RING_SIZE - r.fill.nb_free_exact(), r.rx.nb_avail_exact());
            let (tx, comp) = (RING_SIZE - r.tx.nb_free_exact(), r.comp.nb_avail_exact());
            c.fill_ring += u64::from(fill);
            c.rx_ring += u64::from(rx);
            c.rx_kernel += u64::from(self.in_fill[p].saturating_sub(fill + rx));
            c.tx_ring += u64::from(tx);
            c.completion += u64::from(comp);
            c.tx_kernel += u64::from(self.in_tx[p].saturating_sub(tx + comp));
        }
        c
    }

    /// Reads the socket statistics and the ring census into the counters.
    fn read_xsk_stats(&mut self) {
        let c = self.ring_census();
        let g = &self.counters.frames;
        g.fill_ring.set(c.fill_ring);
        g.rx_ring.set(c.rx_ring);
        g.rx_kernel.set(c.rx_kernel);
        g.tx_ring.set(c.tx_ring);
        g.completion.set(c.completion);
        g.tx_kernel.set(c.tx_kernel);
        for (p, ring) in self.sockets.ports.iter().enumerate() {
            if let Ok(s) = ring.rx.fd().xdp_statistics() {
                let x = &self.counters.ports[p].xsk;
                x.rx_dropped.set(s.rx_dropped());
                x.rx_ring_full.set(s.rx_ring_full());
                x.fill_ring_empty.set(s.rx_fill_ring_empty_descs());
                x.tx_ring_empty.set(s.tx_ring_empty_descs());
                x.rx_invalid.set(s.rx_invalid_descs());
                x.tx_invalid.set(s.tx_invalid_descs());
            }
        }
    }
}

/// What a pipeline prefetch brings in for a frame.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// The frame's first line.
    Header,
    /// The table lines its decision reads.
    Tables,
}

/// Frames handed to the kernel, by where they are (see [`crate::stats::FrameGauges`]).
#[derive(Debug, Default, Clone, Copy)]
struct RingCensus {
    fill_ring: u64,
    rx_ring: u64,
    rx_kernel: u64,
    tx_ring: u64,
    completion: u64,
    tx_kernel: u64,
}

/// A zero-length non-blocking recvfrom: on a socket set for preferred busy polling, the kernel
/// runs the device's NAPI poll in this call.
fn busy_poll(fd: i32) {
    // SAFETY: `fd` is an open AF_XDP socket of the caller; a null buffer of length zero is
    // never written.
    let _ = unsafe {
        libc::recvfrom(fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut())
    };
}

/// A zero-length non-blocking sendto: the AF_XDP TX kick.
fn sendto_kick(fd: i32) -> io::Result<()> {
    // SAFETY: `fd` is an open AF_XDP socket owned by the caller's rings; a null buffer of length
    // zero and no address is the documented wakeup call.
    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
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
