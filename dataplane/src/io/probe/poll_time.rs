//! The kernel's time in the NAPI polls of chosen ports (bpf/poll_time.bpf.c: the raw tracepoints
//! `softirq_entry`/`softirq_exit` of NET_RX and `napi_poll`).
//!
//! A NET_RX softirq runs its ports' polls one after the other; `napi_poll` fires as each
//! returns, so the time from the previous poll's end (or the softirq's start) is that poll's,
//! with the softirq's own short loop between polls. On the rig a veth port with NAPI (an XDP
//! program on it, or GRO on) takes the frames its peer sent in such a poll, in the softirq of
//! the CPU that sent them, and everything the box does to a frame runs inside it on each path
//! xfwd compares: the kernel's forwarding up to the egress veth's enqueue into its peer, the XDP
//! program with its redirect and flush, the copy into an AF_XDP socket. Summed over the box's
//! ports, it is the box's own kernel time, which the bench adds to xfwd's threads' time to give
//! a path's cost per frame measured directly. Tracing costs three tracepoint programs per
//! softirq and poll (a poll takes up to 64 frames), the same on every path.
//!
//! Not timed: a port without NAPI (a veth without program or GRO hands its frames to the CPU's
//! backlog, whose poll names no port), and polls outside a NET_RX softirq (busy polling, NAPI
//! threads). The tracepoints are the kernel's, not veth's: the same timer serves any driver.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};
use thiserror::Error;

/// bpf/poll_time.bpf.c, compiled by build.rs.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/poll_time.bpf.o"));

/// Ports one timer can follow (POLL_MAX_PORTS in the program).
pub const MAX_PORTS: usize = 16;

/// Why the timer could not start or be read.
#[derive(Debug, Error)]
pub enum PollTimeError {
    /// More ports than the program has slots for.
    #[error("{0} ports to time: at most {MAX_PORTS}")]
    TooManyPorts(usize),
    /// A port's namespace or ifindex could not be read.
    #[error("{what}: {cause}")]
    Port {
        /// The port, or its namespace's path.
        what: String,
        /// Why.
        cause: String,
    },
    /// libbpf refused the program or its attachment (a kernel without BTF or raw tracepoints,
    /// no privileges).
    #[error("loading the NAPI poll timer (raw tracepoints napi_poll, softirq_entry/exit; needs CAP_BPF and CAP_PERFMON and a kernel with BTF): {0}")]
    Load(String),
    /// A map of the program could not be reached, written or read.
    #[error("poll timer map {map}: {cause}")]
    Map {
        /// The map.
        map: &'static str,
        /// Why.
        cause: String,
    },
}

/// A port to time: its network namespace's inode and its ifindex there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollPort {
    /// The inode of the port's network namespace (what `ls -i /run/netns/NAME` shows).
    pub netns: u32,
    /// The port's ifindex in that namespace.
    pub ifindex: u32,
}

impl PollPort {
    /// The port `dev` in the namespace bound at `netns_path` (`/run/netns/NAME`, or
    /// `/proc/self/ns/net`), its ifindex read from `ifindex_text` (the content of the port's
    /// `/sys/class/net/DEV/ifindex` as seen from inside the namespace).
    pub fn new(netns_path: &Path, dev: &str, ifindex_text: &str) -> Result<PollPort, PollTimeError> {
        let meta = std::fs::metadata(netns_path)
            .map_err(|e| PollTimeError::Port { what: netns_path.display().to_string(), cause: e.to_string() })?;
        let netns = u32::try_from(meta.ino()).map_err(|_| PollTimeError::Port {
            what: netns_path.display().to_string(),
            cause: format!("inode {} is not a namespace's (more than 32 bits)", meta.ino()),
        })?;
        let ifindex = ifindex_text.trim().parse().map_err(|e| PollTimeError::Port {
            what: dev.to_owned(),
            cause: format!("ifindex `{}`: {e}", ifindex_text.trim()),
        })?;
        Ok(PollPort { netns, ifindex })
    }
}

/// What the timed polls of one port cost, cumulative since the timer started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollTime {
    /// Nanoseconds in the port's polls, every CPU summed.
    pub ns: u64,
    /// Polls.
    pub polls: u64,
    /// Frames the polls took from the port's ring.
    pub frames: u64,
}

impl PollTime {
    /// What was added since `before`.
    pub fn since(&self, before: &PollTime) -> PollTime {
        PollTime {
            ns: self.ns.saturating_sub(before.ns),
            polls: self.polls.saturating_sub(before.polls),
            frames: self.frames.saturating_sub(before.frames),
        }
    }

    /// The sum of two ports' times.
    pub fn plus(&self, other: &PollTime) -> PollTime {
        PollTime { ns: self.ns + other.ns, polls: self.polls + other.polls, frames: self.frames + other.frames }
    }
}

/// The loaded, attached timer; detached when dropped.
pub struct PollTimer {
    /// Keeps the program loaded.
    _object: Object,
    /// The tracepoint attachments.
    _links: Vec<Link>,
    /// `poll_totals`.
    totals: MapHandle,
    /// How many ports it follows, in the order given.
    ports: usize,
}

impl PollTimer {
    /// Loads the program, gives `ports` the slots 0.. in order, and attaches it.
    pub fn start(ports: &[PollPort]) -> Result<PollTimer, PollTimeError> {
        if ports.len() > MAX_PORTS {
            return Err(PollTimeError::TooManyPorts(ports.len()));
        }
        let load = |e: libbpf_rs::Error| PollTimeError::Load(format!("{e:#}"));
        let object = ObjectBuilder::default().open_memory(OBJECT).map_err(load)?.load().map_err(load)?;
        let map = |name: &'static str| {
            let m = object
                .maps()
                .find(|m| m.name() == name)
                .ok_or(PollTimeError::Map { map: name, cause: "not in the program".into() })?;
            MapHandle::try_from(&m).map_err(|e| PollTimeError::Map { map: name, cause: format!("{e:#}") })
        };
        let port_map = map("poll_ports")?;
        for (slot, p) in ports.iter().enumerate() {
            let mut key = [0u8; 8];
            key[..4].copy_from_slice(&p.netns.to_ne_bytes());
            key[4..].copy_from_slice(&p.ifindex.to_ne_bytes());
            let slot = u32::try_from(slot).expect("at most MAX_PORTS");
            port_map
                .update(&key, &slot.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| PollTimeError::Map { map: "poll_ports", cause: format!("{e:#}") })?;
        }
        let totals = map("poll_totals")?;
        let links = object.progs_mut().map(|p| p.attach()).collect::<Result<Vec<_>, _>>().map_err(load)?;
        Ok(PollTimer { _object: object, _links: links, totals, ports: ports.len() })
    }

    /// Each port's polls so far, in the order given to [`PollTimer::start`].
    pub fn read(&self) -> Result<Vec<PollTime>, PollTimeError> {
        (0..self.ports)
            .map(|slot| {
                let key = u32::try_from(slot).expect("at most MAX_PORTS").to_ne_bytes();
                let per_cpu = self
                    .totals
                    .lookup_percpu(&key, MapFlags::ANY)
                    .map_err(|e| PollTimeError::Map { map: "poll_totals", cause: format!("{e:#}") })?
                    .unwrap_or_default();
                Ok(per_cpu.iter().fold(PollTime::default(), |sum, v| sum.plus(&decode(v))))
            })
            .collect()
    }
}

/// One CPU's `struct poll_total`: three u64 in native order (a short value reads as zeros).
fn decode(v: &[u8]) -> PollTime {
    let at = |i: usize| v.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes).unwrap_or(0);
    PollTime { ns: at(0), polls: at(1), frames: at(2) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpus_totals_decode_in_field_order_and_add_up() {
        let mut v = Vec::new();
        for x in [1_500u64, 3, 120] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        let one = decode(&v);
        assert_eq!(one, PollTime { ns: 1_500, polls: 3, frames: 120 });
        assert_eq!(decode(&v[..10]), PollTime { ns: 1_500, polls: 0, frames: 0 });
        let two = one.plus(&PollTime { ns: 500, polls: 1, frames: 8 });
        assert_eq!(two, PollTime { ns: 2_000, polls: 4, frames: 128 });
        assert_eq!(two.since(&one), PollTime { ns: 500, polls: 1, frames: 8 });
        assert_eq!(one.since(&two), PollTime::default(), "a counter never goes back: no wrap");
    }

    #[test]
    fn a_port_is_its_namespaces_inode_and_its_ifindex() {
        let p = PollPort::new(Path::new("/proc/self/ns/net"), "lo", "1\n").unwrap();
        assert_eq!(p.ifindex, 1);
        let ino = std::fs::metadata("/proc/self/ns/net").unwrap().ino();
        assert_eq!(u64::from(p.netns), ino);
        let e = PollPort::new(Path::new("/proc/self/ns/net"), "eth9", "x").unwrap_err();
        assert!(e.to_string().starts_with("eth9: ifindex `x`"), "{e}");
        let e = PollPort::new(Path::new("/nonexistent/ns"), "eth9", "3").unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/ns: "), "{e}");
    }
}
