//! The worker's frames: its free lists, the pool's spare list, the fill rings it tops up, and
//! the frame accounting it publishes ([`crate::stats::PoolGauges`]).
//!
//! Fill and completion rings belong to a (port, queue), shared by the pool's members under a
//! lock ([`Lock`]); completions are the reaper's whoever sent them, so a member's free list is
//! bounded ([`crate::io::frames::xsk::Pool::spill`]) and the rest kept in the pool's spare list.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use super::{Decide, Worker, BATCH};
use crate::io::frames::ring::{Consumer, Producer, Xsk};

/// Frames one worker moved for one UMEM: handed to the kernel less taken back, put in the spare
/// list less taken from it (signed: it may take back what another member handed over).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Moved {
    pub(super) fill: i64,
    pub(super) tx: i64,
    pub(super) spare: i64,
}

/// Whether a worker waits for a pool lock another member holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lock {
    /// No: the holder is doing the same work; skip it this round.
    Try,
    /// Yes: at start, before sleeping and on the way out, where the work must be done.
    Wait,
}

impl Lock {
    /// The guard of `m`, unless it is held and this is [`Lock::Try`]. A lock poisoned by a
    /// member that panicked still guards rings in a sound state (each ring call is whole).
    #[inline]
    pub(super) fn take<T>(self, m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
        match self {
            Lock::Try => match m.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            },
            Lock::Wait => Some(m.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }
}

impl<D: Decide, X: Xsk> Worker<D, X> {
    /// Puts this worker's free frames of UMEM `u` past half its spill mark in the pool's spare
    /// list (a member whose lock is taken tries again next round). Frames come to a member
    /// from completions and receives that other members started, so without this one member's
    /// free list would fill while another's ran dry.
    #[cold]
    pub(super) fn spill(&mut self, u: usize) {
        let pool = &self.sockets.pools[u].pool;
        let Ok(mut spare) = pool.spare.try_lock() else {
            return;
        };
        let free = &mut self.free[u];
        let keep = pool.spill / 2;
        let moved = free.len().saturating_sub(keep);
        spare.extend(free.drain(keep..));
        pool.spare_len.store(spare.len(), Relaxed);
        self.moved[u].spare += moved as i64;
    }

    /// Moves up to `n` frames of UMEM `u` from the pool's spare list to this worker's free
    /// list. Returns how many.
    fn take_spare(&mut self, u: usize, n: usize, lock: Lock) -> usize {
        let pool = &self.sockets.pools[u].pool;
        if n == 0 || pool.spare_len.load(Relaxed) == 0 {
            return 0;
        }
        let Some(mut spare) = lock.take(&pool.spare) else {
            return 0;
        };
        let k = n.min(spare.len());
        let from = spare.len() - k;
        self.free[u].extend(spare.drain(from..));
        pool.spare_len.store(spare.len(), Relaxed);
        self.moved[u].spare -= k as i64;
        k
    }

    /// Frames for a copy into UMEM `u` when this worker has none: some from the spare list.
    /// Returns whether it got any.
    #[cold]
    pub(super) fn restock(&mut self, u: usize) -> bool {
        let n = (self.sockets.pools[u].pool.spill / 2).clamp(BATCH, 4 * BATCH);
        self.take_spare(u, n, Lock::Wait) > 0
    }

    /// Tops port `p`'s fill ring up to its target from the free list, taking from the pool's
    /// spare list what the free list lacks. Under [`Lock::Try`], a member already filling it
    /// is left to it.
    pub(super) fn refill(&mut self, p: usize, lock: Lock) {
        let (u, r) = (self.sockets.ports[p].pool, self.sockets.ports[p].ring);
        let target = i64::from(self.sockets.pools[u].pool.fill_target);
        let want = (target - self.sockets.pools[u].pool.in_flight[r].fill.load(Relaxed)).max(0) as usize;
        if want == 0 {
            return;
        }
        if self.free[u].len() < want {
            self.take_spare(u, want - self.free[u].len(), lock);
        }
        let pool = &self.sockets.pools[u].pool;
        let free = &mut self.free[u];
        if free.is_empty() {
            return;
        }
        let Some(mut rings) = lock.take(&pool.rings[r]) else {
            return;
        };
        // Again under the lock: another member may have filled it meanwhile.
        let in_fill = &pool.in_flight[r].fill;
        let want = (target - in_fill.load(Relaxed)).max(0) as usize;
        let k = want.min(free.len());
        let k = (rings.fill.free(k as u32) as usize).min(k);
        let from = free.len() - k;
        // Counted before the kernel can take them (see InFlight).
        in_fill.fetch_add(k as i64, Relaxed);
        // SAFETY: the worker holds these free frames; once produced they are the kernel's
        // until received on an RX ring of this port.
        let n = unsafe { rings.fill.produce(&free[from..]) };
        if n < k {
            in_fill.fetch_sub((k - n) as i64, Relaxed);
        }
        free.truncate(free.len() - n);
        self.moved[u].fill += n as i64;
        let wake = n > 0 && rings.fill.needs_wakeup();
        drop(rings);
        if wake {
            X::wake_fill(&mut self.sockets.ports[p]);
        }
    }

    /// Publishes, per UMEM, the frames this worker holds and what it moved, all together.
    pub(super) fn publish_frames(&self) {
        let mut queued = [0u64; crate::MAX_PORTS];
        for (fq, port) in self.fq.iter().zip(&self.sockets.ports) {
            queued[port.pool] += fq.len() as u64;
        }
        for (((share, free), moved), queued) in self.sockets.pools.iter().zip(&self.free).zip(&self.moved).zip(queued) {
            let me = &share.pool.gauges.members[share.member];
            me.free.set(free.len() as u64);
            me.queued.set(queued);
            me.fill.set(moved.fill);
            me.tx.set(moved.tx);
            me.spare.set(moved.spare);
        }
    }

    /// Counts the frames in the rings: this worker's RX and TX rings (it owns the consumer
    /// side of one and the producer side of the other, so these reads are its own), and each
    /// port's shared fill and completion rings, read under their lock ([`Lock::Try`]: a port
    /// whose lock another member holds keeps its last count, which that member refreshes).
    pub(super) fn census(&mut self, lock: Lock) {
        let mut rings = [(0u64, 0u64); crate::MAX_PORTS];
        for p in 0..self.sockets.ports.len() {
            let u = self.sockets.ports[p].pool;
            rings[u].0 += u64::from(self.sockets.ports[p].rx.available());
            rings[u].1 += u64::from(self.tx_outstanding(p));
        }
        for (share, (rx_ring, tx_ring)) in self.sockets.pools.iter().zip(rings) {
            let me = &share.pool.gauges.members[share.member];
            me.rx_ring.set(rx_ring);
            me.tx_ring.set(tx_ring);
            for (m, g) in share.pool.rings.iter().zip(share.pool.gauges.ports.iter()) {
                if let Some(mut r) = lock.take(m) {
                    g.fill_ring.set(u64::from(share.pool.sizes.fill - r.fill.free_exact()));
                    g.completion.set(u64::from(r.comp.available()));
                }
            }
        }
    }

    /// Reads the socket statistics and the ring census into the counters, then counts the
    /// copy (published after them: [`crate::stats::QueueCounters::xsk_reads`]).
    pub(super) fn read_xsk_stats(&mut self, lock: Lock) {
        self.census(lock);
        for (p, ring) in self.sockets.ports.iter().enumerate() {
            if let Some(s) = X::statistics(ring) {
                self.counters.ports[p].xsk.set(&s);
            }
        }
        self.counters.xsk_reads.inc_release();
    }
}
