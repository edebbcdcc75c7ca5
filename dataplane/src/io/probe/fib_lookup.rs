//! The kernel's own route lookup, timed without traffic (bpf/fib_lookup.bpf.c): a frame's
//! destination looked up in the kernel's FIB by `bpf_fib_lookup()` under `BPF_PROG_TEST_RUN`,
//! in the network namespace of the calling thread. `xfwd bench --lookups` sets it beside the
//! XDP program's own table and the workers' FIB, on the same destinations.

use libbpf_rs::{Object, ObjectBuilder};

/// bpf/fib_lookup.bpf.c, compiled by build.rs.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fib_lookup.bpf.o"));

/// The verdict of a frame whose destination the kernel has a route for.
pub const FOUND: u32 = 3; // XDP_TX

/// The loaded lookup program.
pub struct KernelLookup {
    object: Object,
}

impl std::fmt::Debug for KernelLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelLookup").finish_non_exhaustive()
    }
}

impl KernelLookup {
    /// Loads it (CAP_BPF); the error says what failed.
    pub fn load() -> Result<KernelLookup, String> {
        let load = |e: libbpf_rs::Error| format!("the kernel-FIB lookup program: {e:#}");
        let object = ObjectBuilder::default().open_memory(OBJECT).map_err(load)?.load().map_err(load)?;
        Ok(KernelLookup { object })
    }

    /// Runs the program once on `frame` arriving on `ifindex` (a device of this thread's
    /// namespace, with forwarding on, which `bpf_fib_lookup` asks): its verdict ([`FOUND`] when
    /// the kernel has a route) and the kernel's time for the run.
    pub fn time(&mut self, frame: &[u8], ifindex: u32) -> Result<(u32, std::time::Duration), String> {
        let prog = self
            .object
            .progs_mut()
            .find(|p| p.name() == "fib_lookup")
            .ok_or("the kernel-FIB lookup program: no program fib_lookup")?;
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex.
        let md = [0, frame.len() as u32, 0, ifindex, 0, 0];
        let mut ctx: Vec<u8> = md.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx),
            data_in: Some(frame),
            repeat: 1,
            ..Default::default()
        };
        let out = prog.test_run(input).map_err(|e| format!("test run of the kernel-FIB lookup: {e:#}"))?;
        Ok((out.return_value, out.duration))
    }
}
