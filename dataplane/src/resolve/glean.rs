//! The hand-off of gleaned frames ([`crate::Action::Glean`]: next hop unresolved) from the
//! workers to the ARP thread, without allocating on the packet path.
//!
//! The UMEM frame must go back to the rings at once, so the worker copies the frame out: into a
//! buffer taken from a pool filled at start, queued on a bounded channel. The ARP thread lends
//! each frame to [`crate::resolve::arp::ArpEngine::on_glean`], which copies what it keeps (the ARP
//! thread is the slow path: a few frames per unresolved neighbour), and puts the buffer back.
//!
//! Sizes. The queue holds [`QUEUE`] frames: a worker that finds it full drops the frame, counted
//! as `glean-queue-full`. The pool has one buffer more than the queue holds for each worker and
//! one for the ARP thread, the most that can be out of the pool and the queue at once, so a
//! worker always finds a free buffer and a frame is refused exactly when the queue is full.
//! Each buffer holds a whole UMEM frame; about 2 MiB in all for one worker, allocated once.
//! Why not a queue of `Vec`s made per frame: that allocation (and the ARP thread's free) would
//! sit on the worker's packet path, which allocates nothing.

use std::net::IpAddr;
#[cfg(test)]
use std::net::Ipv4Addr;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::resolve::arp::Glean;
use crate::PortId;

/// Frames waiting for the ARP thread, at most.
pub const QUEUE: usize = 1024;

/// A gleaned frame on its way to the ARP thread.
#[derive(Debug)]
struct GleanMsg {
    ingress: PortId,
    port: PortId,
    next_hop: IpAddr,
    /// The frame, in a buffer of the pool (never grown: see [`GleanSender::send`]).
    frame: Vec<u8>,
}

/// The workers' end: cloned into each worker's decision.
#[derive(Debug, Clone)]
pub struct GleanSender {
    queue: Sender<GleanMsg>,
    pool: Receiver<Vec<u8>>,
    pool_back: Sender<Vec<u8>>,
}

/// The ARP thread's end.
#[derive(Debug)]
pub struct GleanReceiver {
    queue: Receiver<GleanMsg>,
    pool_back: Sender<Vec<u8>>,
}

/// A queue of [`QUEUE`] frames for `workers` senders, with a pool of buffers of `frame_len`
/// bytes made now (see the module documentation for the sizes).
pub fn channel(workers: usize, frame_len: usize) -> (GleanSender, GleanReceiver) {
    let buffers = QUEUE + workers + 1;
    let (queue_tx, queue_rx) = crossbeam_channel::bounded(QUEUE);
    let (pool_tx, pool_rx) = crossbeam_channel::bounded(buffers);
    for _ in 0..buffers {
        // Cannot fail: the pool has room for every buffer.
        let _ = pool_tx.try_send(Vec::with_capacity(frame_len));
    }
    (
        GleanSender { queue: queue_tx, pool: pool_rx, pool_back: pool_tx.clone() },
        GleanReceiver { queue: queue_rx, pool_back: pool_tx },
    )
}

impl GleanSender {
    /// Queues a copy of `frame` (received on `ingress`, to leave by `port` once `next_hop`
    /// resolves) for the ARP thread. False when the queue is full (or, never for a UMEM frame,
    /// when the frame is longer than a buffer). Allocates nothing: the buffer comes from the
    /// pool and is filled within its capacity.
    pub fn send(&self, frame: &[u8], ingress: PortId, port: PortId, next_hop: IpAddr) -> bool {
        let Ok(mut buf) = self.pool.try_recv() else {
            return false;
        };
        if frame.len() > buf.capacity() {
            let _ = self.pool_back.try_send(buf);
            return false;
        }
        buf.clear();
        buf.extend_from_slice(frame);
        match self.queue.try_send(GleanMsg { ingress, port, next_hop, frame: buf }) {
            Ok(()) => true,
            Err(TrySendError::Full(m) | TrySendError::Disconnected(m)) => {
                let _ = self.pool_back.try_send(m.frame);
                false
            }
        }
    }
}

impl GleanReceiver {
    /// Lends every queued frame to `f`, in order, and puts each buffer back in the pool.
    pub fn drain(&self, mut f: impl FnMut(Glean<'_>)) {
        while let Ok(m) = self.queue.try_recv() {
            f(Glean { ingress: m.ingress, port: m.port, next_hop: m.next_hop, frame: &m.frame });
            // Cannot fail: every buffer came from the pool, which has room for all of them.
            let _ = self.pool_back.try_send(m.frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOP: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 30, 2));

    fn drained(rx: &GleanReceiver) -> Vec<(PortId, PortId, IpAddr, Vec<u8>)> {
        let mut out = Vec::new();
        rx.drain(|g| out.push((g.ingress, g.port, g.next_hop, g.frame.to_vec())));
        out
    }

    #[test]
    fn frames_arrive_whole_and_in_order() {
        let (tx, rx) = channel(1, 64);
        assert!(tx.send(&[1, 2, 3], PortId(0), PortId(1), HOP));
        assert!(tx.send(&[4; 64], PortId(1), PortId(0), HOP));
        assert_eq!(
            drained(&rx),
            vec![(PortId(0), PortId(1), HOP, vec![1, 2, 3]), (PortId(1), PortId(0), HOP, vec![4; 64])]
        );
        assert!(drained(&rx).is_empty());
    }

    #[test]
    fn a_full_queue_refuses_and_every_buffer_comes_back() {
        let (tx, rx) = channel(2, 16);
        let other = tx.clone();
        for i in 0..QUEUE {
            assert!(if i % 2 == 0 { &tx } else { &other }.send(&[7; 16], PortId(0), PortId(1), HOP), "frame {i}");
        }
        // Full: refused, and the refused frame's buffer is not lost.
        assert!(!tx.send(&[7; 16], PortId(0), PortId(1), HOP));
        assert!(!other.send(&[7; 16], PortId(0), PortId(1), HOP));
        assert_eq!(drained(&rx).len(), QUEUE);
        // Round after round the pool neither runs dry nor grows.
        for _ in 0..3 {
            for _ in 0..QUEUE {
                assert!(tx.send(&[7; 16], PortId(0), PortId(1), HOP));
            }
            assert!(!tx.send(&[7; 16], PortId(0), PortId(1), HOP));
            assert_eq!(drained(&rx).len(), QUEUE);
        }
        assert_eq!(tx.pool.len(), QUEUE + 2 + 1, "every buffer back in the pool");
    }

    #[test]
    fn a_frame_longer_than_a_buffer_is_refused_not_grown_into() {
        let (tx, rx) = channel(1, 16);
        assert!(!tx.send(&[0; 17], PortId(0), PortId(1), HOP));
        assert!(drained(&rx).is_empty());
        assert_eq!(tx.pool.len(), QUEUE + 2);
        assert!(tx.pool.try_iter().all(|b| b.is_empty() && b.capacity() < 17), "no buffer grew");
    }
}
