//! Batches to TX rings: produce, kick, and reap what the kernel sent.

use std::sync::atomic::Ordering::Relaxed;

use super::frames::Lock;
use super::{max_kicks, monotonic_ns, Decide, Worker};
use crate::io::frames::ring::{Consumer, Descriptor, Producer, Xsk};

impl<D: Decide, X: Xsk> Worker<D, X> {
    /// Puts port `out`'s queued frames on its TX ring and kicks. When the ring lacks room, it
    /// first reaps and kicks to make some; what still does not fit is dropped and counted.
    pub(super) fn transmit(&mut self, out: usize) {
        let want = self.tx_batch[out].len() as u32;
        if self.sockets.ports[out].tx.free(want) < want {
            self.reap(out, Lock::Try);
            self.kick(out);
        }
        let ring = &mut self.sockets.ports[out];
        let batch = &mut self.tx_batch[out];
        let k = (ring.tx.free(want) as usize).min(batch.len());
        // Counted before the kernel can complete them (see PoolGauges).
        let u = ring.pool;
        let in_tx = &self.sockets.pools[u].pool.in_flight[ring.ring].tx;
        in_tx.fetch_add(k as i64, Relaxed);
        // SAFETY: the worker holds every frame in `batch`; after this call the first `sent`
        // belong to the TX ring until they come back on the completion ring.
        let sent = unsafe { ring.tx.produce(&batch[..k]) };
        if sent < k {
            in_tx.fetch_sub((k - sent) as i64, Relaxed);
        }
        self.moved[u].tx += sent as i64;
        let pc = &self.counters.ports[out];
        pc.tx_frames.add(sent as u64);
        let bytes: usize = batch[..sent].iter().map(Descriptor::len).sum();
        pc.tx_bytes.add(bytes as u64);
        for d in batch.drain(..).skip(sent) {
            pc.drop(crate::Reason::TxRingFull);
            self.free[u].push(d);
        }
        self.kick(out);
    }

    /// Frames on this worker's TX ring of port `out` that the kernel has not taken yet.
    #[inline]
    pub(super) fn tx_outstanding(&mut self, out: usize) -> u32 {
        self.rings.tx - self.sockets.ports[out].tx.free_exact()
    }

    /// Asks the kernel to send what is on port `out`'s TX ring, if it wants asking, reaping the
    /// completions as it goes. In copy mode one kick sends a budget of frames (32) and answers
    /// EAGAIN while more remain or the completion ring is full, EBUSY when the device dropped
    /// one (no carrier): kick again while each kick makes progress (the ring drains, or frames
    /// complete); without progress, stop and let the next round retry. Returns the frames
    /// completed.
    pub(super) fn kick(&mut self, out: usize) -> usize {
        let mut completed = 0;
        for _ in 0..max_kicks(self.rings.tx) {
            let before = self.tx_outstanding(out);
            if before == 0 || !self.sockets.ports[out].tx.needs_wakeup() {
                break;
            }
            self.counters.ports[out].kicks.inc();
            let t = monotonic_ns();
            let r = X::kick(&mut self.sockets.ports[out]);
            self.kick_ns += monotonic_ns().saturating_sub(t);
            let reaped = self.reap(out, Lock::Try);
            completed += reaped;
            let pc = &self.counters.ports[out];
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
            if reaped == 0 && self.tx_outstanding(out) >= before {
                break;
            }
        }
        completed
    }

    /// Moves port `out`'s completed frames to the free list. Returns how many. Under
    /// [`Lock::Try`], a member already reaping there is left to it.
    pub(super) fn reap(&mut self, out: usize, lock: Lock) -> usize {
        let (u, r) = (self.sockets.ports[out].pool, self.sockets.ports[out].ring);
        let pool = &self.sockets.pools[u].pool;
        let in_tx = &pool.in_flight[r].tx;
        if in_tx.load(Relaxed) <= 0 {
            return 0;
        }
        let Some(mut rings) = lock.take(&pool.rings[r]) else {
            return 0;
        };
        let mut total = 0;
        loop {
            // SAFETY: completed descriptors name frames the kernel has finished with; they
            // become this worker's.
            let n = unsafe { rings.comp.consume(&mut self.scratch[..]) };
            if n == 0 {
                break;
            }
            in_tx.fetch_sub(n as i64, Relaxed);
            self.free[u].extend_from_slice(&self.scratch[..n]);
            total += n;
        }
        self.moved[u].tx -= total as i64;
        total
    }
}
