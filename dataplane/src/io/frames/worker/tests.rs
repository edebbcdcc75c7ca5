//! The worker's accounting, checked without root: random arrivals, decisions, full rings,
//! failing kicks and device sends are driven through the real worker code over the fake kernel
//! (`io::frames::ring::fake`), one or two workers, either UMEM layout, with and without queue
//! management. After every step:
//!
//! - every frame is in exactly one place (the fake kernel refuses a frame produced twice), and
//!   the frames the workers hold (free lists, spare list, flow queues) are the ones the kernel
//!   sees outside its rings;
//! - each UMEM's published accounting adds up to its frames and agrees with the rings:
//!   free + queued + handed to fill rings + handed to TX rings = total, what was handed to
//!   the fill rings is in the fill and RX rings, what was handed to TX is in the TX and
//!   completion rings;
//! - every frame received is accounted for in the counters: sent, dropped with a reason,
//!   gleaned or queued (a flood is one leg per other port, an answer one more);
//! - every frame sent is what the decision said: its port, its length (the arrival stamp taken
//!   off), its bytes, and never twice to one port.
//!
//! At exit (settling, as `Worker::run` ends), the kernel holds nothing in flight and the
//! published census equals the rings'.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use proptest::prelude::*;

use super::account::monotonic_ns;
use super::frames::Lock;
use super::{Decide, Worker};
use crate::action::{Action, SCRATCH_LEN};
use crate::aqm::{CodelParams, FqParams};
use crate::io::frames::ring::fake::{self, Fake, FakeDesc, Layout, Place, Shared, FRAME};
use crate::io::frames::xsk::RingSizes;
use crate::io::program::xdp::STAMP_LEN;
use crate::io::setup::options::PollMode;
use crate::io::setup::start::plan::AqmPlan;
use crate::stats::{PortCounters, QueueCounters};
use crate::time::Clock;
use crate::{PortId, Reason};

/// Where a test frame says what to do with it (after its Ethernet header), and its number.
const KIND: usize = 14;
const ARG: usize = 15;
const ID: usize = 16;
/// The first byte of every answer the test's decision builds (a frame that arrives starts
/// with a locally administered MAC, 0x02).
const ANSWER: u8 = 0xEE;
const ANSWER_LEN: usize = 60;
/// Where `ForwardTrimmed` cuts.
const TRIM_LEN: usize = 60;
/// Port 1 takes no frame longer than this (a smaller MTU), for floods.
const PORT1_MAX: usize = 200;
/// The shortest and longest frames sent in (room left for a stamp).
const MIN_LEN: usize = 60;
const MAX_LEN: usize = FRAME - STAMP_LEN;

/// What the test's decision does with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Forward,
    Drop,
    Flood,
    Reply,
    Glean,
    Trim,
    BadPort,
}

impl Kind {
    const ALL: [Kind; 7] =
        [Kind::Forward, Kind::Drop, Kind::Flood, Kind::Reply, Kind::Glean, Kind::Trim, Kind::BadPort];
}

/// The decision the frames script: their kind byte and argument.
struct Scripted {
    ports: usize,
}

impl Decide for Scripted {
    fn decide(
        &mut self,
        frame: &mut [u8],
        ingress: PortId,
        _now_ms: u64,
        _counters: &PortCounters,
        scratch: &mut [u8; SCRATCH_LEN],
    ) -> Action {
        let port = PortId(frame[ARG] % self.ports as u8);
        match Kind::ALL[usize::from(frame[KIND])] {
            Kind::Forward => Action::Forward(port),
            Kind::Drop => Action::Drop(Reason::NoRoute),
            Kind::Flood => Action::Flood(crate::l2::PortSet::first(self.ports)),
            Kind::Reply => {
                scratch[..ANSWER_LEN].fill(ANSWER);
                scratch[ID..ID + 4].copy_from_slice(&frame[ID..ID + 4]);
                Action::Reply { port: ingress, len: ANSWER_LEN as u16, cause: Reason::TtlExceeded }
            }
            Kind::Glean => Action::Glean { port, next_hop: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)) },
            Kind::Trim => Action::ForwardTrimmed { port, len: TRIM_LEN as u16 },
            Kind::BadPort => Action::Forward(PortId(200)),
        }
    }

    fn glean(&mut self, frame: &[u8], _ingress: PortId, _port: PortId, _next_hop: IpAddr) -> bool {
        // Some go to a full glean queue.
        frame[ARG] & 0x80 == 0
    }

    fn fits(&self, len: usize, port: usize) -> bool {
        port != 1 || len <= PORT1_MAX
    }
}

/// A test frame's bytes: numbered, scripted, the rest a pattern of its number.
fn frame_bytes(id: u32, kind: Kind, arg: u8, len: usize) -> Vec<u8> {
    let mut f = vec![(id as u8) ^ 0x5A; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x88, 0xB5]);
    f[KIND] = Kind::ALL.iter().position(|&k| k == kind).expect("a kind") as u8;
    f[ARG] = arg;
    f[ID..ID + 4].copy_from_slice(&id.to_be_bytes());
    f
}

/// What the test expects of a frame sent in.
#[derive(Debug)]
struct Sent {
    ingress: usize,
    kind: Kind,
    arg: u8,
    len: usize,
    /// Ports it was sent out of so far.
    out: HashSet<usize>,
}

/// How a world is set up.
#[derive(Debug, Clone)]
struct Setup {
    workers: usize,
    ports: usize,
    layout: Layout,
    frames_per_port: usize,
    sizes: RingSizes,
    /// 0: no queue management; 1: CoDel on the RX rings; 2: flow queues.
    aqm: u8,
}

/// One step.
#[derive(Debug, Clone)]
enum Op {
    /// Frames arrive on a worker's socket of a port: (kind, argument, length, stamped).
    Arrive { worker: usize, port: usize, frames: Vec<(usize, u8, usize, bool)> },
    /// A worker's round.
    Round { worker: usize },
    /// A worker gets ready to sleep.
    Sleep { worker: usize },
    /// The device sends from a worker's TX ring of a port without a kick.
    DeviceSend { worker: usize, port: usize, n: usize },
    /// Kicks fail with this errno from now on (`None`: they work).
    KickError(Option<i32>),
    /// Fill rings ask to be woken, or not.
    FillWakeup(bool),
}

struct Rig {
    kernel: Shared,
    workers: Vec<Worker<Scripted, Fake>>,
    ports: usize,
    frames: HashMap<u32, Sent>,
    next_id: u32,
    now_ms: u64,
    stamp_key: Option<u64>,
}

const STAMP_KEY: u64 = 0x7e57_5eed_0bad_cafe;

impl Rig {
    fn new(s: &Setup) -> Rig {
        let (kernel, sockets) = fake::world(s.workers, s.ports, s.layout, s.frames_per_port, s.sizes);
        let aqm = match s.aqm {
            0 => None,
            1 => Some(AqmPlan { codel: CodelParams::default(), flow_queues: None }),
            _ => Some(AqmPlan {
                codel: CodelParams::default(),
                flow_queues: Some(FqParams { slots: 48, queues: 16, ..FqParams::default() }),
            }),
        };
        let workers = sockets
            .into_iter()
            .enumerate()
            .map(|(q, sockets)| {
                let counters = Arc::new(QueueCounters::new(q as u32, None, s.ports));
                let stop = Arc::new(AtomicBool::new(false));
                Worker::new(sockets, Scripted { ports: s.ports }, counters, stop, PollMode::Adaptive, Clock::start())
                    .manage_queues(aqm.map(|a| (a, STAMP_KEY)))
            })
            .collect();
        let stamp_key = aqm.map(|_| STAMP_KEY);
        Rig { kernel, workers, ports: s.ports, frames: HashMap::new(), next_id: 0, now_ms: 1, stamp_key }
    }

    fn step(&mut self, op: &Op) {
        self.now_ms += 1;
        let nw = self.workers.len();
        match *op {
            Op::Arrive { worker, port, ref frames } => {
                let (w, p) = (worker % nw, port % self.ports);
                let mut k = self.kernel.lock().unwrap();
                let s = k.socket(w, p);
                for &(kind, arg, len, stamped) in frames {
                    let (kind, len) = (Kind::ALL[kind % Kind::ALL.len()], len.clamp(MIN_LEN, MAX_LEN));
                    let id = self.next_id;
                    let mut bytes = frame_bytes(id, kind, arg, len);
                    if let (Some(key), true) = (self.stamp_key, stamped) {
                        bytes.extend_from_slice(&monotonic_ns().to_ne_bytes());
                        bytes.extend_from_slice(&key.to_ne_bytes());
                    }
                    if k.arrive(s, &bytes) {
                        self.frames.insert(id, Sent { ingress: p, kind, arg, len, out: HashSet::new() });
                        self.next_id += 1;
                    }
                }
            }
            Op::Round { worker } => {
                self.workers[worker % nw].round(self.now_ms);
            }
            Op::Sleep { worker } => self.workers[worker % nw].before_sleep(),
            Op::DeviceSend { worker, port, n } => {
                let mut k = self.kernel.lock().unwrap();
                let s = k.socket(worker % nw, port % self.ports);
                k.send(s, n);
            }
            Op::KickError(e) => self.kernel.lock().unwrap().kick_error = e,
            Op::FillWakeup(on) => self.kernel.lock().unwrap().fill_wakeup = on,
        }
        self.check_sent();
        self.check_frames();
        self.check_counters();
    }

    /// Every frame the device sent is what the decision said.
    fn check_sent(&mut self) {
        let sent = std::mem::take(&mut self.kernel.lock().unwrap().sent);
        for (port, bytes) in sent {
            let id = u32::from_be_bytes(bytes[ID..ID + 4].try_into().unwrap());
            let f = self.frames.get_mut(&id).unwrap_or_else(|| panic!("frame {id} sent but never received"));
            let egress = usize::from(f.arg) % self.ports;
            if bytes[0] == ANSWER {
                assert_eq!((f.kind, port, bytes.len()), (Kind::Reply, f.ingress, ANSWER_LEN), "answer to {id}");
            } else {
                let want = frame_bytes(id, f.kind, f.arg, f.len);
                match f.kind {
                    Kind::Forward => assert_eq!((port, &bytes[..]), (egress, &want[..]), "frame {id} forwarded"),
                    Kind::Trim => {
                        assert_eq!((port, &bytes[..]), (egress, &want[..TRIM_LEN.min(f.len)]), "frame {id} trimmed")
                    }
                    Kind::Flood => {
                        assert_ne!(port, f.ingress, "frame {id} flooded back out of its port");
                        assert!(port != 1 || f.len <= PORT1_MAX, "frame {id} flooded to a port it does not fit");
                        assert_eq!(bytes, want, "frame {id} flooded");
                    }
                    k => panic!("frame {id} ({k:?}) sent out of port {port}"),
                }
            }
            assert!(f.out.insert(port), "frame {id} sent twice out of port {port}");
        }
    }

    /// Every frame is in one place, and each UMEM's published accounting agrees with it.
    fn check_frames(&self) {
        let k = self.kernel.lock().unwrap();
        // Pools by UMEM, each once.
        let mut pools: HashMap<usize, &crate::io::frames::xsk::PoolShare<Fake>> = HashMap::new();
        for w in &self.workers {
            for share in &w.sockets.pools {
                pools.entry(share.umem.index()).or_insert(share);
            }
        }
        for (&umem, share) in &pools {
            let pool = &share.pool;
            let [user, in_fill, in_rx, in_tx, in_comp] = k.census(umem);
            // What the workers hold, each frame once, each outside the kernel's rings.
            let spare = pool.spare.lock().unwrap();
            let mut held: HashSet<u32> = HashSet::new();
            let mut queued = 0u64;
            for w in &self.workers {
                for (i, s) in w.sockets.pools.iter().enumerate() {
                    if s.umem.index() != umem {
                        continue;
                    }
                    for d in &w.free[i] {
                        assert_eq!(k.place(umem, d), Place::User, "free frame {d:?} is in a ring");
                        assert!(held.insert(d.addr), "frame {d:?} twice in the free lists");
                    }
                    for (fq, port) in w.fq.iter().zip(&w.sockets.ports) {
                        if port.pool == i {
                            queued += fq.len() as u64;
                        }
                    }
                    assert!(w.tx_batch.iter().all(Vec::is_empty), "a batch left between rounds");
                }
            }
            for d in spare.iter() {
                assert_eq!(k.place(umem, d), Place::User, "spare frame {d:?} is in a ring");
                assert!(held.insert(d.addr), "frame {d:?} both spare and free, or spare twice");
            }
            assert_eq!(user, held.len() as u64 + queued, "umem {umem}: frames outside the rings");
            // The published accounting.
            let g = &pool.gauges;
            let sum = |f: fn(&crate::stats::MemberFrames) -> i64| g.members.iter().map(f).sum::<i64>();
            let (free, q) = (sum(|m| m.free.get() as i64), sum(|m| m.queued.get() as i64));
            let (fill, tx, spared) = (sum(|m| m.fill.get()), sum(|m| m.tx.get()), sum(|m| m.spare.get()));
            let spare_now = g.spare_at_start as i64 + spared;
            assert_eq!(spare_now, spare.len() as i64, "umem {umem}: spare list");
            assert_eq!(free + spare_now, held.len() as i64, "umem {umem}: free frames published");
            assert_eq!(q, queued as i64, "umem {umem}: queued frames published");
            assert_eq!(fill, (in_fill + in_rx) as i64, "umem {umem}: frames handed to the fill rings");
            assert_eq!(tx, (in_tx + in_comp) as i64, "umem {umem}: frames handed to the TX rings");
            assert_eq!((free + spare_now + q + fill + tx) as u64, g.total, "umem {umem}: frames in all");
            // What refills and reaps go by, port by port.
            let fill_by_port: i64 = pool.in_flight.iter().map(|f| f.fill.load(Relaxed)).sum();
            let tx_by_port: i64 = pool.in_flight.iter().map(|f| f.tx.load(Relaxed)).sum();
            assert_eq!((fill_by_port, tx_by_port), (fill, tx), "umem {umem}: frames in flight");
        }
    }

    /// Every frame received is sent, dropped, gleaned or queued.
    fn check_counters(&self) {
        let mut legs = 0u64;
        let mut ends = 0u64;
        let mut sent = 0u64;
        for w in &self.workers {
            for pc in w.counters.ports.iter() {
                legs += pc.rx_frames.get() + pc.flooded.get() * (self.ports as u64 - 2) + pc.icmp_sent.get();
                ends += pc.tx_frames.get() + pc.drops.iter().map(|c| c.get()).sum::<u64>() + pc.gleaned.get();
                sent += pc.tx_frames.get();
            }
            ends += w.fq.iter().map(|f| f.len() as u64).sum::<u64>();
        }
        assert_eq!(legs, ends, "frames received (a flood a leg per other port, an answer one more) against their ends");
        let k = self.kernel.lock().unwrap();
        let on_tx: usize = (0..self.workers.len())
            .flat_map(|w| (0..self.ports).map(move |p| (w, p)))
            .map(|(w, p)| k.tx_len(k.socket(w, p)))
            .sum();
        assert_eq!(sent, k.sent_total + on_tx as u64, "frames put on TX rings against frames the device took");
    }

    /// Stops as `Worker::run` does, and checks that the kernel holds nothing in flight and
    /// the final census is the rings'.
    fn finish(&mut self) {
        self.kernel.lock().unwrap().kick_error = None;
        for w in &mut self.workers {
            w.settle();
        }
        for w in &mut self.workers {
            let copies = w.counters.snapshot().xsk_reads;
            w.read_xsk_stats(Lock::Wait);
            assert_eq!(w.counters.snapshot().xsk_reads, copies + 1, "every copy of the socket statistics is counted");
            w.publish_frames();
        }
        self.check_sent();
        self.check_frames();
        self.check_counters();
        let k = self.kernel.lock().unwrap();
        let mut seen = HashSet::new();
        for w in &self.workers {
            for s in &w.sockets.pools {
                if !seen.insert(s.umem.index()) {
                    continue;
                }
                let f = s.pool.gauges.snapshot();
                let [_, in_fill, in_rx, in_tx, in_comp] = k.census(s.umem.index());
                assert_eq!((f.rx_kernel, f.tx_kernel, f.queued), (0, 0, 0), "held at exit: {f:?}");
                assert_eq!((f.fill_ring, f.rx_ring, f.tx_ring, f.completion), (in_fill, in_rx, in_tx, in_comp));
                assert_eq!(f.free + f.fill_ring + f.rx_ring + f.tx_ring + f.completion, f.total, "{f:?}");
            }
        }
    }
}

fn setup() -> impl Strategy<Value = Setup> {
    let size = || prop::sample::select(vec![16u32, 64, 128]);
    (
        1usize..=2,
        2usize..=3,
        any::<bool>(),
        prop::sample::select(vec![24usize, 96, 300]),
        size(),
        size(),
        size(),
        size(),
        0u8..3,
    )
        .prop_map(|(workers, ports, per_cpu, frames_per_port, rx, tx, fill, completion, aqm)| Setup {
            workers,
            ports,
            layout: if per_cpu { Layout::PerCpu } else { Layout::PerQueue },
            frames_per_port,
            sizes: RingSizes { rx, tx, fill, completion },
            aqm,
        })
}

fn op() -> impl Strategy<Value = Op> {
    let frame = (0usize..Kind::ALL.len(), any::<u8>(), MIN_LEN..=MAX_LEN, any::<bool>());
    prop_oneof![
        4 => (0usize..2, 0usize..3, prop::collection::vec(frame, 1..90))
            .prop_map(|(worker, port, frames)| Op::Arrive { worker, port, frames }),
        4 => (0usize..2).prop_map(|worker| Op::Round { worker }),
        1 => (0usize..2).prop_map(|worker| Op::Sleep { worker }),
        2 => (0usize..2, 0usize..3, 0usize..80).prop_map(|(worker, port, n)| Op::DeviceSend { worker, port, n }),
        1 => prop::sample::select(vec![None, None, Some(libc::EBUSY), Some(libc::EAGAIN), Some(libc::ENETDOWN), Some(libc::EINVAL)])
            .prop_map(Op::KickError),
        1 => any::<bool>().prop_map(Op::FillWakeup),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_is_in_one_place_and_every_frame_received_is_accounted_for(
        s in setup(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut rig = Rig::new(&s);
        rig.check_frames();
        for op in &ops {
            rig.step(op);
        }
        rig.finish();
    }
}

#[test]
fn the_fake_kernel_refuses_a_frame_produced_twice() {
    let (kernel, mut sockets) = fake::world(1, 2, Layout::PerQueue, 8, RingSizes::default());
    let d = FakeDesc { addr: 0, len: 60 };
    let tx = &mut sockets[0].ports[0].tx;
    // The frame is the worker's (it starts in its share): the first produce takes it.
    // SAFETY: the fake's frames are plain memory; the test holds frame 0.
    assert_eq!(unsafe { crate::io::frames::ring::Producer::produce(tx, &[d]) }, 1);
    let twice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: as above; the fake must refuse this.
        unsafe { crate::io::frames::ring::Producer::produce(tx, &[d]) }
    }));
    assert!(twice.is_err(), "a frame on a ring was taken again");
    drop(kernel);
}
