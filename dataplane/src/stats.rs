//! Counters: what each worker did with every frame, readable live by the stats thread.
//!
//! Each counter has exactly one writer, the worker that owns it, which updates it with a relaxed
//! load and a relaxed store: no locked read-modify-write, no contention. Readers (the stats
//! printer, the control socket) load it relaxed and may see a value a few frames old. Each
//! worker's block is cache-line aligned and allocated on its own, so no two workers write the
//! same line. Plain `u64`s shared between threads would be a data race; atomics with relaxed
//! ordering compile to the same plain moves on x86-64 and aarch64. The one exception is the
//! count of frames in rings that several workers share ([`PoolGauges`]).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

use crate::reason::Reason;

/// A single-writer counter (see the module documentation).
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker may call this.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Adds one. Only the owning worker may call this.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Sets a gauge. Only the owning worker may call this.
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// What one worker counts for one port.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PortCounters {
    /// Frames taken off this port's RX ring.
    pub rx_frames: Counter,
    /// Bytes of those frames.
    pub rx_bytes: Counter,
    /// Frames placed on this port's TX ring.
    pub tx_frames: Counter,
    /// Bytes of those frames.
    pub tx_bytes: Counter,
    /// Received frames that were flooded (sent to every other port).
    pub flooded: Counter,
    /// Received frames whose source could not be learnt because the FDB was full.
    pub fdb_full: Counter,
    /// Router: ICMP errors sent about frames received on this port.
    pub icmp_sent: Counter,
    /// Router: frames handed to the ARP thread to wait for their next hop's MAC.
    pub gleaned: Counter,
    /// Drops, indexed by [`Reason`]; counted on the port the frame came in on, except
    /// `tx-ring-full` and `no-free-frame`, counted on the egress port.
    pub drops: [Counter; Reason::COUNT],
    /// TX kicks (sendto) issued on this port's socket.
    pub kicks: Counter,
    /// Kicks answered EAGAIN (the kernel sent a budget and more remains): kicked again.
    pub kick_again: Counter,
    /// Kicks answered EBUSY, ENOBUFS or ENETDOWN (link down, device busy): retried next round.
    pub kick_busy: Counter,
    /// Kicks answered with any other error.
    pub kick_error: Counter,
    /// The kernel's statistics of this port's socket (`XDP_STATISTICS`), refreshed by the worker.
    pub xsk: XskGauges,
}

/// The kernel's counters of one AF_XDP socket, as last read by its worker.
#[derive(Debug, Default)]
pub struct XskGauges {
    /// Frames dropped for lack of RX ring room or other reasons (`rx_dropped`).
    pub rx_dropped: Counter,
    /// Frames dropped because the RX ring was full (`rx_ring_full`).
    pub rx_ring_full: Counter,
    /// Times the kernel found the fill ring empty (`rx_fill_ring_empty_descs`).
    pub fill_ring_empty: Counter,
    /// Times the kernel found the TX ring empty when kicked (`tx_ring_empty_descs`).
    pub tx_ring_empty: Counter,
    /// Invalid RX descriptors (`rx_invalid_descs`).
    pub rx_invalid: Counter,
    /// Invalid TX descriptors (`tx_invalid_descs`): a frame sent with a bad length or address.
    pub tx_invalid: Counter,
}

impl PortCounters {
    /// Counts one drop.
    #[inline]
    pub fn drop(&self, reason: Reason) {
        self.drops[reason as usize].inc();
    }
}

/// Where the frames of one UMEM are. A UMEM is one worker's in the per-queue layout and every
/// worker's in the per-CPU layout, so its frames are counted where its workers meet: per port,
/// the rings every member's socket there shares (fill and completion), and per member, what
/// only that worker holds or reads (its free list, its RX and TX rings). Frames are only ever
/// in one of these places, so [`PoolGauges::snapshot`] adds up to `total` whenever the workers
/// are between batches (see `io` for the rule).
///
/// The per-port `fill` and `tx` counts are the one exception to the single-writer rule: every
/// member adds to and takes from them (atomic read-modify-write, relaxed: they order nothing).
/// Each is raised before the kernel can see the frames and lowered after the worker took them
/// back, so it never counts fewer than the kernel holds.
#[derive(Debug)]
pub struct PoolGauges {
    /// The workers (by queue number) whose sockets use this UMEM.
    pub workers: Vec<u32>,
    /// The names of the ports whose sockets use it.
    pub port_names: Vec<String>,
    /// Per port, in port order.
    pub ports: Box<[PortFrames]>,
    /// Per member, in `workers` order.
    pub members: Box<[MemberFrames]>,
}

/// One port's share of a [`PoolGauges`]: the frames its shared rings carry, and its spare list.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PortFrames {
    /// Handed to the kernel through the fill ring, not yet taken off any member's RX ring.
    pub fill: AtomicI64,
    /// Put on a member's TX ring, not yet reaped from the completion ring.
    pub tx: AtomicI64,
    /// Still in the fill ring (read under the rings' lock, every statistics period and at exit).
    pub fill_ring: Counter,
    /// Sent and waiting in the completion ring (read likewise).
    pub completion: Counter,
    /// Free, in the pool's spare list rather than a member's (set under the rings' lock).
    pub spare: Counter,
}

/// One member worker's share of a [`PoolGauges`], written by that worker only.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct MemberFrames {
    /// Frames it was given at start.
    pub total: Counter,
    /// In its free list.
    pub free: Counter,
    /// Received and waiting in its RX rings (summed over the ports).
    pub rx_ring: Counter,
    /// Still in its TX rings, not yet taken by the kernel.
    pub tx_ring: Counter,
}

impl PoolGauges {
    /// Zeroed gauges for `workers` sharing one UMEM over the ports `port_names`.
    pub fn new(workers: Vec<u32>, port_names: Vec<String>) -> PoolGauges {
        let members = workers.iter().map(|_| MemberFrames::default()).collect();
        let ports = port_names.iter().map(|_| PortFrames::default()).collect();
        PoolGauges { workers, port_names, ports, members }
    }

    /// Where the frames are, summed; what no ring holds, the kernel does.
    pub fn snapshot(&self) -> FrameSnapshot {
        let sum = |f: fn(&MemberFrames) -> u64| self.members.iter().map(f).sum::<u64>();
        let fill: u64 = self.ports.iter().map(|p| p.fill.load(Relaxed).max(0) as u64).sum();
        let tx: u64 = self.ports.iter().map(|p| p.tx.load(Relaxed).max(0) as u64).sum();
        let fill_ring: u64 = self.ports.iter().map(|p| p.fill_ring.get()).sum();
        let completion: u64 = self.ports.iter().map(|p| p.completion.get()).sum();
        let (rx_ring, tx_ring) = (sum(|m| m.rx_ring.get()), sum(|m| m.tx_ring.get()));
        FrameSnapshot {
            total: sum(|m| m.total.get()),
            free: sum(|m| m.free.get()) + self.ports.iter().map(|p| p.spare.get()).sum::<u64>(),
            fill,
            tx,
            fill_ring,
            rx_ring,
            rx_kernel: fill.saturating_sub(fill_ring + rx_ring),
            tx_ring,
            completion,
            tx_kernel: tx.saturating_sub(tx_ring + completion),
        }
    }
}

/// Everything one worker (one queue) counts.
#[derive(Debug)]
pub struct QueueCounters {
    /// The queue this worker serves on every port.
    pub queue: u32,
    /// The core it is pinned to, if any.
    pub core: Option<usize>,
    /// Per port, in port order.
    pub ports: Box<[PortCounters]>,
    /// Times the worker slept in poll(2) for lack of work (adaptive mode).
    pub sleeps: Counter,
    /// Router: ICMP errors not sent because of the rate limit.
    pub icmp_rate_limited: Counter,
}

impl QueueCounters {
    /// Zeroed counters for a worker on `queue` serving `nports` ports.
    pub fn new(queue: u32, core: Option<usize>, nports: usize) -> QueueCounters {
        QueueCounters {
            queue,
            core,
            ports: (0..nports).map(|_| PortCounters::default()).collect(),
            sleeps: Counter::default(),
            icmp_rate_limited: Counter::default(),
        }
    }

    /// A plain copy of the counters, for reporting.
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            queue: self.queue,
            core: self.core,
            ports: self.ports.iter().map(PortCounters::snapshot).collect(),
            sleeps: self.sleeps.get(),
            icmp_rate_limited: self.icmp_rate_limited.get(),
        }
    }
}

impl PortCounters {
    /// A plain copy, for reporting.
    pub fn snapshot(&self) -> PortSnapshot {
        PortSnapshot {
            rx_frames: self.rx_frames.get(),
            rx_bytes: self.rx_bytes.get(),
            tx_frames: self.tx_frames.get(),
            tx_bytes: self.tx_bytes.get(),
            flooded: self.flooded.get(),
            fdb_full: self.fdb_full.get(),
            icmp_sent: self.icmp_sent.get(),
            gleaned: self.gleaned.get(),
            drops: Reason::ALL.iter().map(|r| (r.name().to_owned(), self.drops[*r as usize].get())).collect(),
            kicks: self.kicks.get(),
            kick_again: self.kick_again.get(),
            kick_busy: self.kick_busy.get(),
            kick_error: self.kick_error.get(),
            xsk: XskSnapshot {
                rx_dropped: self.xsk.rx_dropped.get(),
                rx_ring_full: self.xsk.rx_ring_full.get(),
                fill_ring_empty: self.xsk.fill_ring_empty.get(),
                tx_ring_empty: self.xsk.tx_ring_empty.get(),
                rx_invalid: self.xsk.rx_invalid.get(),
                tx_invalid: self.xsk.tx_invalid.get(),
            },
        }
    }
}

/// A copy of [`PortCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror PortCounters")]
pub struct PortSnapshot {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub flooded: u64,
    pub fdb_full: u64,
    pub icmp_sent: u64,
    pub gleaned: u64,
    /// (reason name, count), in [`Reason::ALL`] order.
    pub drops: Vec<(String, u64)>,
    pub kicks: u64,
    pub kick_again: u64,
    pub kick_busy: u64,
    pub kick_error: u64,
    pub xsk: XskSnapshot,
}

/// A copy of [`XskGauges`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror XskGauges")]
pub struct XskSnapshot {
    pub rx_dropped: u64,
    pub rx_ring_full: u64,
    pub fill_ring_empty: u64,
    pub tx_ring_empty: u64,
    pub rx_invalid: u64,
    pub tx_invalid: u64,
}

impl PortSnapshot {
    /// Sum of all drops.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }

    /// Adds `other` into `self` (to total a port over its queues).
    pub fn accumulate(&mut self, other: &PortSnapshot) {
        self.rx_frames += other.rx_frames;
        self.rx_bytes += other.rx_bytes;
        self.tx_frames += other.tx_frames;
        self.tx_bytes += other.tx_bytes;
        self.flooded += other.flooded;
        self.fdb_full += other.fdb_full;
        self.icmp_sent += other.icmp_sent;
        self.gleaned += other.gleaned;
        if self.drops.is_empty() {
            self.drops = other.drops.iter().map(|(n, _)| (n.clone(), 0)).collect();
        }
        for ((_, a), (_, b)) in self.drops.iter_mut().zip(&other.drops) {
            *a += b;
        }
        self.kicks += other.kicks;
        self.kick_again += other.kick_again;
        self.kick_busy += other.kick_busy;
        self.kick_error += other.kick_error;
        self.xsk.rx_dropped += other.xsk.rx_dropped;
        self.xsk.rx_ring_full += other.xsk.rx_ring_full;
        self.xsk.fill_ring_empty += other.xsk.fill_ring_empty;
        self.xsk.tx_ring_empty += other.xsk.tx_ring_empty;
        self.xsk.rx_invalid += other.xsk.rx_invalid;
        self.xsk.tx_invalid += other.xsk.tx_invalid;
    }
}

/// Where one pool's frames are ([`PoolGauges::snapshot`]): `fill` split into `fill_ring`,
/// `rx_ring` and `rx_kernel`, `tx` into `tx_ring`, `completion` and `tx_kernel`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror PoolGauges")]
pub struct FrameSnapshot {
    pub total: u64,
    pub free: u64,
    pub fill: u64,
    pub tx: u64,
    #[serde(default)]
    pub fill_ring: u64,
    #[serde(default)]
    pub rx_ring: u64,
    #[serde(default)]
    pub rx_kernel: u64,
    #[serde(default)]
    pub tx_ring: u64,
    #[serde(default)]
    pub completion: u64,
    #[serde(default)]
    pub tx_kernel: u64,
}

impl FrameSnapshot {
    /// Frames not found in any place: must be zero.
    pub fn unaccounted(&self) -> i64 {
        self.total as i64 - (self.free + self.fill + self.tx) as i64
    }
}

/// A copy of [`QueueCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs, reason = "fields mirror QueueCounters")]
pub struct QueueSnapshot {
    pub queue: u32,
    pub core: Option<usize>,
    pub ports: Vec<PortSnapshot>,
    pub sleeps: u64,
    pub icmp_rate_limited: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_snapshot_sums_its_members_and_splits_what_the_kernel_holds() {
        let g = PoolGauges::new(vec![0, 1], vec!["eth4".into(), "eth5".into()]);
        for (m, (total, free, rx, tx)) in g.members.iter().zip([(100, 30, 5, 2), (100, 50, 1, 0)]) {
            m.total.set(total);
            m.free.set(free);
            m.rx_ring.set(rx);
            m.tx_ring.set(tx);
        }
        // Port 0: 80 in the fill path (70 still in the ring), port 1: 20 in the TX path.
        g.ports[0].fill.fetch_add(80, Relaxed);
        g.ports[0].fill_ring.set(70);
        g.ports[1].tx.fetch_add(20, Relaxed);
        g.ports[1].completion.set(15);
        let f = g.snapshot();
        assert_eq!((f.total, f.free, f.fill, f.tx), (200, 80, 80, 20));
        assert_eq!(f.unaccounted(), 20, "200 - 80 free - 80 fill - 20 tx");
        assert_eq!((f.fill_ring, f.rx_ring, f.rx_kernel), (70, 6, 4));
        assert_eq!((f.tx_ring, f.completion, f.tx_kernel), (2, 15, 3));
        // A count lowered before it was raised (never, by the rule) reads as none, not as 2^64.
        g.ports[1].fill.fetch_sub(5, Relaxed);
        assert_eq!(g.snapshot().fill, 80);
    }

    #[test]
    fn counters_add_and_snapshot() {
        let q = QueueCounters::new(1, Some(0), 2);
        q.ports[1].rx_frames.add(3);
        q.ports[1].drop(Reason::SameSegment);
        q.ports[1].drop(Reason::SameSegment);
        let s = q.snapshot();
        assert_eq!(s.ports[1].rx_frames, 3);
        assert_eq!(s.ports[1].dropped(), 2);
        assert_eq!(s.ports[1].drops[Reason::SameSegment as usize], ("same-segment".to_owned(), 2));
        let mut total = PortSnapshot::default();
        total.accumulate(&s.ports[1]);
        total.accumulate(&s.ports[1]);
        assert_eq!(total.dropped(), 4);
        assert_eq!(total.rx_frames, 6);
    }
}
