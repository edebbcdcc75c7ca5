//! RX rings → decision → the egress ports' batches: a batch at a time, with the prefetch
//! pipeline, floods and copies between UMEMs.

use std::sync::atomic::Ordering::Relaxed;

use super::frames::Lock;
use super::queues::{judge, read_stamp, take_stamp, Stamp};
use super::{monotonic_ns, Decide, Worker, BATCH, RX_BATCHES_PER_ROUND};
use crate::action::Action;
use crate::aqm::{flow_key, is_ect, Verdict};
use crate::io::frames::ring::{Consumer, Descriptor, Frames, Xsk};
use crate::io::program::xdp::STAMP_LEN;
use crate::PortId;

/// What a pipeline prefetch brings in for a frame.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// The frame's first line.
    Header,
    /// The table lines its decision reads.
    Tables,
}

impl<D: Decide, X: Xsk> Worker<D, X> {
    /// Takes what port `p`'s RX ring holds, a batch at a time: one batch without flow queues,
    /// up to [`RX_BATCHES_PER_ROUND`] with them, topping the fill ring up after. Returns frames
    /// received.
    pub(super) fn pull(&mut self, p: usize, now_ms: u64) -> usize {
        let mut last = self.receive(p, now_ms);
        let mut got = last;
        if !self.fq.is_empty() {
            let mut batches = 1;
            while last == BATCH && batches < RX_BATCHES_PER_ROUND {
                last = self.receive(p, now_ms);
                got += last;
                batches += 1;
            }
            // A round with flow queues pulls a ring up to three times (up to 768 frames, more
            // than a default fill ring holds) before the round's own refill: top the fill ring
            // up after each pull, or the kernel runs out of frames to receive into mid-round
            // and drops at the socket (`fill-ring-empty`; seen under 450 TCP flows).
            if got > 0 {
                self.refill(p, Lock::Try);
            }
        }
        // The ring gave less than a full batch (nothing at all included): drive the driver.
        if self.busy_poll && last < BATCH {
            X::busy_poll(&mut self.sockets.ports[p]);
        }
        got
    }

    /// Takes a batch off port `p`'s RX ring, decides and transmits it. Returns frames received.
    fn receive(&mut self, p: usize, now_ms: u64) -> usize {
        let nports = self.sockets.ports.len();
        let ring = &mut self.sockets.ports[p];
        // SAFETY: descriptors come back from the RX ring of a socket on this UMEM; the frames
        // they name are now the worker's (see the ownership rule in `io`).
        let n = unsafe { ring.rx.consume(&mut self.scratch[..BATCH]) };
        if n == 0 {
            if let Some(c) = self.codel.get_mut(p) {
                c.on_empty();
            }
            return 0;
        }
        // The dequeue time of this batch for CoDel on the RX ring, and the frames still queued
        // behind it; with flow queues, the arrival time of frames that carry no stamp.
        let now_ns = if self.stamped { monotonic_ns() } else { 0 };
        let behind = if self.codel.is_empty() { 0 } else { ring.rx.available() as usize };
        let u = ring.pool;
        self.sockets.pools[u].pool.in_flight[ring.ring].fill.fetch_sub(n as i64, Relaxed);
        self.moved[u].fill -= n as i64;
        self.counters.ports[p].rx_frames.add(n as u64);
        self.round_frames += n as u64;
        let ingress = PortId(p as u8);
        // A pipeline over the batch: each frame's table lines are asked for D frames before
        // its decision, and its header 2D before, so that cache misses overlap the work.
        let d = D::PREFETCH_DISTANCE;
        if d > 0 {
            for j in 0..2 * d {
                self.prefetch_frame(u, j, n, Stage::Header);
            }
            for j in 0..d {
                self.prefetch_frame(u, j, n, Stage::Tables);
            }
        }
        for i in 0..n {
            if d > 0 {
                self.prefetch_frame(u, i + 2 * d, n, Stage::Header);
                self.prefetch_frame(u, i + d, n, Stage::Tables);
            }
            let mut desc = self.scratch[i];
            // When the frame arrived (flow queues only).
            let mut at = now_ns;
            let (action, cut) = {
                // SAFETY: the worker holds this frame (just received) and nothing aliases it.
                let frame = unsafe { self.sockets.pools[u].umem.bytes_mut(&mut desc) };
                let full = frame.len();
                let (verdict, len) = match self.codel.get_mut(p) {
                    Some(codel) => judge(codel, &self.counters, frame, self.stamp_key, p, now_ns, n - i - 1 + behind),
                    None if self.stamped => match take_stamp(frame, self.stamp_key) {
                        Some((t, len)) => {
                            at = t;
                            (Verdict::Pass, len)
                        }
                        None => {
                            self.counters.unstamped.inc();
                            (Verdict::Pass, full)
                        }
                    },
                    None => (Verdict::Pass, full),
                };
                let frame = &mut frame[..len];
                let pc = &self.counters.ports[p];
                pc.rx_bytes.add(len as u64);
                let action = match verdict {
                    Verdict::Drop => Action::Drop(crate::Reason::AqmDrop),
                    Verdict::Mark | Verdict::Pass => self.decide.decide(frame, ingress, now_ms, pc, &mut self.answer),
                };
                (action, (len < full).then_some(len))
            };
            if let Some(len) = cut {
                // SAFETY: the worker still holds this frame; nothing aliases it.
                unsafe { self.sockets.pools[u].umem.set_len(&mut desc, len) };
            }
            self.dispatch(desc, action, p, at);
        }
        for out in 0..nports {
            if !self.tx_batch[out].is_empty() {
                self.transmit(out);
            }
        }
        n
    }

    /// Carries out `action` on `desc`, a frame received on port `p` (arrived at `at`): queued
    /// for its egress port(s), answered in place, handed to the glean queue or dropped, and
    /// counted on every path.
    #[inline]
    fn dispatch(&mut self, mut desc: X::Desc, action: Action, p: usize, at: u64) {
        let nports = self.sockets.ports.len();
        let u = self.sockets.ports[p].pool;
        match action {
            Action::Forward(out) if out.index() < nports => self.queue_tx(desc, p, out.index(), at),
            Action::ForwardTrimmed { port, len } if port.index() < nports => {
                if usize::from(len) < desc.len() {
                    // SAFETY: the worker still holds this frame; nothing aliases it.
                    unsafe { self.sockets.pools[u].umem.set_len(&mut desc, usize::from(len)) };
                }
                self.queue_tx(desc, p, port.index(), at);
            }
            Action::Flood(set) => {
                self.counters.ports[p].flooded.inc();
                self.flood(desc, p, set, at);
            }
            Action::Drop(reason) => {
                self.counters.ports[p].drop(reason);
                self.free[u].push(desc);
            }
            Action::Reply { port, len, cause } if port.index() < nports => {
                // The original is not forwarded (counted under its cause); its frame
                // carries the answer instead.
                let pc = &self.counters.ports[p];
                pc.drop(cause);
                pc.icmp_sent.inc();
                // SAFETY: the worker still holds this frame; nothing aliases it. An answer (at
                // most SCRATCH_LEN bytes) always fits a UMEM frame.
                unsafe { self.sockets.pools[u].umem.write(&mut desc, &self.answer[..usize::from(len)]) };
                self.queue_tx(desc, p, port.index(), at);
            }
            Action::Glean { port, next_hop } => {
                // SAFETY: the worker still holds this frame; it is only read.
                let frame = unsafe { self.sockets.pools[u].umem.bytes(&desc) };
                if self.decide.glean(frame, PortId(p as u8), port, next_hop) {
                    self.counters.ports[p].gleaned.inc();
                } else {
                    self.counters.ports[p].drop(crate::Reason::GleanQueueFull);
                }
                self.free[u].push(desc);
            }
            Action::Forward(_) | Action::ForwardTrimmed { .. } | Action::Reply { .. } => {
                // A port index beyond the ports is a decision bug; never seen, but never a panic.
                self.counters.ports[p].drop(crate::Reason::NoEgress);
                self.free[u].push(desc);
            }
        }
    }

    /// One prefetch of the receive pipeline for frame `j` of the `n` in `scratch` (none past
    /// the end; frames of UMEM `u`): its header, or the table lines its decision will read.
    #[inline(always)]
    fn prefetch_frame(&mut self, u: usize, j: usize, n: usize, stage: Stage) {
        let Some(desc) = self.scratch[..n].get(j) else {
            return;
        };
        // SAFETY: the worker holds this frame (just received); it is only read.
        let frame = unsafe { self.sockets.pools[u].umem.bytes(desc) };
        match stage {
            Stage::Header => crate::prefetch::read(frame.as_ptr()),
            // A stamp in front is still there (the frame moves down when it is judged).
            // (Only with queue management on: without it nothing is stamped, and nothing read.)
            Stage::Tables if self.stamped => match read_stamp(frame, self.stamp_key) {
                Some((_, Stamp::Front)) => self.decide.prefetch(&frame[STAMP_LEN..]),
                _ => self.decide.prefetch(frame),
            },
            Stage::Tables => self.decide.prefetch(frame),
        }
    }

    /// Queues `desc` (received on `ingress`, arrived at `at`) for every port of `set` but the
    /// ingress: copies for all but the last, the original for the last.
    fn flood(&mut self, desc: X::Desc, ingress: usize, set: crate::l2::PortSet, at: u64) {
        let nports = self.sockets.ports.len();
        let u = self.sockets.ports[ingress].pool;
        let len = desc.len();
        let outs = set.without(ingress).0 & crate::l2::PortSet::first(nports).0;
        let outs = crate::l2::PortSet(outs);
        // Ports the frame is too long for are left out, each counted.
        for _ in outs.iter().filter(|&out| !self.decide.fits(len, out)) {
            self.counters.ports[ingress].drop(crate::Reason::TooBigToForward);
        }
        let fit = crate::l2::PortSet(outs.iter().filter(|&out| self.decide.fits(len, out)).fold(0, |m, o| m | 1 << o));
        let Some(last) = fit.highest() else {
            if outs.is_empty() {
                self.counters.ports[ingress].drop(crate::Reason::NoEgress);
            }
            self.free[u].push(desc);
            return;
        };
        for out in fit.without(last).iter() {
            match self.copy_frame(&desc, u, self.sockets.ports[out].pool) {
                Some(copy) => self.push_tx(out, copy, at),
                None => self.counters.ports[out].drop(crate::Reason::NoFreeFrame),
            }
        }
        self.queue_tx(desc, ingress, last, at);
    }

    /// Queues `desc`, a frame received on port `from` (arrived at `at`), for port `to`: the
    /// frame itself where both ports' sockets share a UMEM; else (per-CPU layout, a UMEM per
    /// port) a copy in a free frame of `to`'s UMEM, the original going back to the free list,
    /// or a drop counted on `to` when that UMEM has no free frame.
    #[inline]
    fn queue_tx(&mut self, desc: X::Desc, from: usize, to: usize, at: u64) {
        let (a, b) = (self.sockets.ports[from].pool, self.sockets.ports[to].pool);
        if a == b {
            self.push_tx(to, desc, at);
            return;
        }
        let copy = self.copy_frame(&desc, a, b);
        self.free[a].push(desc);
        match copy {
            Some(c) => self.push_tx(to, c, at),
            None => self.counters.ports[to].drop(crate::Reason::NoFreeFrame),
        }
    }

    /// Puts `desc`, a frame of port `out`'s UMEM that arrived at `at`, in line for `out`'s TX
    /// ring: in its flow's queue, or straight in the round's batch without flow queues. A full
    /// set of queues hands back the head of its fattest flow, dropped here.
    #[inline]
    fn push_tx(&mut self, out: usize, desc: X::Desc, at: u64) {
        let Some(fq) = self.fq.get_mut(out) else {
            self.tx_batch[out].push(desc);
            return;
        };
        let u = self.sockets.ports[out].pool;
        let (key, ect) = {
            // SAFETY: the worker holds this frame; it is only read.
            let frame = unsafe { self.sockets.pools[u].umem.bytes(&desc) };
            (flow_key(frame), is_ect(frame))
        };
        let len = desc.len() as u32;
        if let Some(head) = fq.enqueue(&key, desc, len, at, ect) {
            self.counters.ports[out].drop(crate::Reason::FqOverflow);
            self.free[u].push(head);
        }
    }

    /// A copy of `desc`, a frame of UMEM `a`, in a free frame of UMEM `b` (`None`: none free).
    fn copy_frame(&mut self, desc: &X::Desc, a: usize, b: usize) -> Option<X::Desc> {
        if self.free[b].is_empty() && !self.restock(b) {
            return None;
        }
        let mut copy = self.free[b].pop()?;
        let (src, dst) = (&self.sockets.pools[a].umem, &self.sockets.pools[b].umem);
        // SAFETY: `desc` and `copy` are distinct frames, both held by the worker (the same
        // UMEM or two); the source is only read and the copy only written. Every UMEM has
        // frames of one size: a frame always fits another.
        unsafe { dst.write(&mut copy, src.bytes(desc)) };
        Some(copy)
    }
}
