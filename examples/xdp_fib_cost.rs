//! What the XDP path's IPv4 routes cost in the kernel, for choosing their layout by
//! measurement: the time one frame takes in the XDP program (`BPF_PROG_TEST_RUN` with a repeat
//! count: the kernel's own clock, no traffic), the time to write N routes into the program's
//! LPM trie, and the memory the kernel charges for them. Needs root (it loads the program).
//!
//! ```sh
//! cargo run --release --example xdp_fib_cost [ROUTES]     # default 1000000
//! ```
//!
//! The router is the reference one (l3::testing) with ROUTES /24s from 11.0.0.0 through 16
//! resolved gateways on eth4; both ports are `lo` to the program, which sends nothing under
//! `BPF_PROG_TEST_RUN`. A repeated run reuses its frame, so the gateways' MAC is the ingress
//! port's: a forwarded frame arrives again as one to forward, its TTL (255 at first) one lower,
//! for the 200 runs of each measurement. Each figure is the median of 101 such means.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use xfwd_dataplane::io::xdp::{LocalKind, ProgramMode, Steer, XdpProgram};
use xfwd_dataplane::io::PortInfo;
use xfwd_dataplane::l3::testing::{reference_ports, ETH4, ETH5};
use xfwd_dataplane::l3::{NeighborTable, Prefix, RouteTarget, RouterTables};
use xfwd_dataplane::wire::ipv4::Ipv4Packet;
use xfwd_dataplane::PortId;

const REPEAT: u32 = 200;
const CALLS: usize = 101;

fn main() {
    let routes: u32 = std::env::args().nth(1).map_or(1_000_000, |a| a.parse().expect("ROUTES: a number"));
    let gws: Vec<Ipv4Addr> = (0..16u8).map(|i| Ipv4Addr::new(198, 18, 30, 2 + i)).collect();
    let statics: Vec<(Prefix, RouteTarget<IpAddr>)> = (0..routes)
        .map(|i| {
            (Prefix::truncate(Ipv4Addr::from(0x0b00_0000 + (i << 8)), 24), RouteTarget::via(gws[(i % 16) as usize]))
        })
        .collect();
    let t = RouterTables::build(reference_ports(), &statics).expect("tables");
    let n = NeighborTable::new(1024);
    for gw in &gws {
        n.insert(*gw, ETH5, PortId(1), false).expect("neighbour");
    }
    let lo = PortInfo::read("lo").expect("lo");
    let ifindex = lo.ifindex;
    let local = [(IpAddr::from(Ipv4Addr::new(198, 18, 10, 2)), LocalKind::Address)];
    let mut p = XdpProgram::load(&[lo], ProgramMode::Router { local: &local }, Steer::ByQueue, None).expect("load");
    let mut maps = p.fast_maps().expect("maps");
    maps.set_port(PortId(0), ifindex, ETH5, true, xfwd_dataplane::io::frame_max(1500)).expect("port 0");
    maps.set_port(PortId(1), ifindex, ETH4, true, xfwd_dataplane::io::frame_max(1500)).expect("port 1");
    let start = Instant::now();
    maps.load(&t, &n, &xfwd_dataplane::l3::NeighborTable6::new6(1)).expect("routes");
    let took = start.elapsed();
    let memory = maps.routes_memory();
    println!(
        "{routes} routes (+{} connected and local) written in {:.2} s ({:.0} routes/s); the kernel charges {} for the LPM trie",
        t.v4.routes.len() - routes as usize,
        took.as_secs_f64(),
        t.v4.routes.len() as f64 / took.as_secs_f64(),
        memory.map_or("-".to_owned(), |m| format!("{:.1} MiB ({:.0} bytes a route)", m as f64 / 1048576.0, m as f64 / t.v4.routes.len() as f64)),
    );
    // Destinations spread over the table.
    let dsts: Vec<Ipv4Addr> = (0..8u32).map(|k| Ipv4Addr::from(0x0b00_0000 + ((k * routes / 8) << 8) + 1)).collect();
    let time = |p: &mut XdpProgram, ttl: u8, want: u32| -> Duration {
        let mut means: Vec<Duration> = Vec::with_capacity(CALLS * dsts.len());
        for dst in &dsts {
            let f = frame(*dst, ttl);
            for _ in 0..CALLS {
                let (verdict, mean) = p.time_run(&f, ifindex, 0, REPEAT).expect("test run");
                assert_eq!(verdict, want, "verdict for {dst}");
                means.push(mean);
            }
        }
        means.sort();
        means[means.len() / 2]
    };
    const XDP_PASS: u32 = 2;
    const XDP_REDIRECT: u32 = 4;
    let af_xdp = time(&mut p, 255, XDP_PASS);
    maps.set_path(true).expect("path");
    let forwarded = time(&mut p, 255, XDP_REDIRECT);
    let exception = time(&mut p, 1, XDP_PASS);
    println!("ns a frame in the program (median of {CALLS} × {} means of {REPEAT} runs):", dsts.len());
    println!("  AF_XDP path (classified, to the workers' socket):  {:>6}", af_xdp.as_nanos());
    println!("  XDP path, forwarded here:                           {:>6}", forwarded.as_nanos());
    println!("  XDP path, an exception (TTL 1) to the workers:      {:>6}", exception.as_nanos());
}

/// A 64-byte frame of a UDP packet to `dst` with `ttl`, to eth5's MAC.
fn frame(dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&ETH5.0);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x10, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    Ipv4Packet::emit(&mut f[14..60], 46, 7, ttl, 17, Ipv4Addr::new(198, 18, 10, 1), dst).expect("header");
    f
}
