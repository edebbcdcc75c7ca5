//! The XDP path's redirects the kernel refused after the program counted them forwarded
//! (bpf/refused.bpf.c, on the raw tracepoint `xdp_redirect_err`), by port: an egress that is
//! down, takes no redirected frames, or is shorter than the frame. Without it such a frame was
//! counted `xdp-forwarded` and lost without a trace; [`crate::io::program::fast`] adds these to each port's
//! `egress-refused`, beside what a veth's driver counts itself.

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};

/// bpf/refused.bpf.c, compiled by build.rs.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/refused.bpf.o"));

/// Ports the program counts (REFUSED_MAX_PORTS).
pub const MAX_PORTS: usize = 64;

/// The loaded, attached counter; detached when dropped.
pub struct RefusedCounter {
    _object: Object,
    _link: Link,
    counts: MapHandle,
    ports: usize,
}

impl std::fmt::Debug for RefusedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefusedCounter").field("ports", &self.ports).finish_non_exhaustive()
    }
}

impl RefusedCounter {
    /// Loads the counter for the devmap whose id is `egress` and attaches it; `ports` ports are
    /// read. Needs CAP_BPF and CAP_PERFMON (taken before privileges are dropped); the error
    /// says why it could not start.
    pub fn start(egress: u32, ports: usize) -> Result<RefusedCounter, String> {
        let load =
            |e: libbpf_rs::Error| format!("the refused-redirect counter (raw tracepoint xdp_redirect_err): {e:#}");
        let object = ObjectBuilder::default().open_memory(OBJECT).map_err(load)?.load().map_err(load)?;
        let map = |object: &Object, name: &str| {
            let m = object.maps().find(|m| m.name() == name).ok_or(format!("refused counter: no map {name}"))?;
            MapHandle::try_from(&m).map_err(|e| format!("refused counter: {name}: {e:#}"))
        };
        map(&object, "refused_map")?
            .update(&0u32.to_ne_bytes(), &egress.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| format!("refused counter: refused_map: {e:#}"))?;
        let counts = map(&object, "refused_ports")?;
        let link = object
            .progs_mut()
            .find(|p| p.name() == "refused")
            .ok_or("refused counter: no program".to_owned())?
            .attach()
            .map_err(load)?;
        Ok(RefusedCounter { _object: object, _link: link, counts, ports: ports.min(MAX_PORTS) })
    }

    /// Each port's refused redirects so far, by port (summed over the CPUs).
    pub fn read(&self) -> Vec<u64> {
        (0..self.ports)
            .map(|p| {
                let key = (p as u32).to_ne_bytes();
                let per_cpu = self.counts.lookup_percpu(&key, MapFlags::ANY).ok().flatten().unwrap_or_default();
                per_cpu.iter().map(|v| v.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes)).sum()
            })
            .collect()
    }
}
