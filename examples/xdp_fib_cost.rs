//! What the XDP path's routes cost in the kernel, for choosing their layout by measurement:
//! the time one frame takes in the XDP program (`BPF_PROG_TEST_RUN` with a repeat count: the
//! kernel's own clock, no traffic), the time to write N routes of each family into the
//! program's tables (IPv4: DIR-24-8 in mapped pages; IPv6: an LPM trie), and the memory the
//! kernel charges for them. Needs root (it loads the
//! program).
//!
//! ```sh
//! cargo run --release --example xdp_fib_cost [ROUTES]     # default 1000000 of each family
//! ```
//!
//! The router is the reference one (l3::testing, with IPv6 addresses on RFC 5180's
//! 2001:2::/48) with ROUTES IPv4 /24s from 11.0.0.0 and ROUTES IPv6 /48s from 3fff::/20 (RFC
//! 9637's documentation range), each through 16 resolved gateways on eth4; both ports are `lo`
//! to the program, which sends nothing under `BPF_PROG_TEST_RUN`. A repeated run reuses its
//! frame, so the gateways' MAC is the ingress port's: a forwarded frame arrives again as one to
//! forward, its TTL or hop limit (255 at first) one lower, for the 200 runs of each
//! measurement. Each figure is the median of 101 such means.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use xfwd_dataplane::io::program::xdp::{FastMaps, LocalKind, ProgramMode, Steer, XdpProgram};
use xfwd_dataplane::io::{DataPath, PortInfo};
use xfwd_dataplane::l3::export::{self, FastRoutes6};
use xfwd_dataplane::l3::fib::no_advice;
use xfwd_dataplane::l3::testing::{port, ETH4, ETH5};
use xfwd_dataplane::l3::{Key6, Prefix, Prefix6, RouteTarget, RouterTables};
use xfwd_dataplane::wire::ipv4::Ipv4Packet;
use xfwd_dataplane::wire::ipv6::Ipv6Packet;
use xfwd_dataplane::PortId;

const REPEAT: u32 = 200;
const CALLS: usize = 101;
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

fn main() {
    let routes: u32 = std::env::args().nth(1).map_or(1_000_000, |a| a.parse().expect("ROUTES: a number"));
    let gws: Vec<Ipv4Addr> = (0..16u8).map(|i| Ipv4Addr::new(198, 18, 30, 2 + i)).collect();
    let gws6: Vec<Ipv6Addr> = (0..16u16).map(|i| Ipv6Addr::new(0x2001, 2, 0, 0x30, 0, 0, 0, 2 + i)).collect();
    let statics: Vec<(Prefix, RouteTarget<IpAddr>)> = (0..routes)
        .map(|i| {
            (Prefix::truncate(Ipv4Addr::from(0x0b00_0000 + (i << 8)), 24), RouteTarget::via(gws[(i % 16) as usize]))
        })
        .collect();
    let statics6: Vec<(Prefix6, RouteTarget<Ipv6Addr>)> =
        (0..routes).map(|i| (Prefix6::truncate(net6(i), 48), RouteTarget::via(gws6[(i % 16) as usize]))).collect();
    let ports = vec![
        port("eth5", ETH5, &["198.18.10.2/24", "2001:2:0:10::2/64"]),
        port("eth4", ETH4, &["198.18.30.1/24", "2001:2:0:30::1/64"]),
    ];
    let t = RouterTables::build_dual(ports, &statics, &statics6, no_advice).expect("tables");
    let lo = PortInfo::read("lo").expect("lo");
    let ifindex = lo.ifindex;
    let local = [
        (IpAddr::from(Ipv4Addr::new(198, 18, 10, 2)), LocalKind::Address),
        (IpAddr::from(Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 2)), LocalKind::Address),
    ];
    let mode = ProgramMode::Router { local: &local, neighbors: 64 };
    let mut plain =
        XdpProgram::load(std::slice::from_ref(&lo), (mode, DataPath::AfXdp), Steer::ByQueue, None).expect("load");
    let mut p = XdpProgram::load(&[lo], (mode, DataPath::Xdp), Steer::ByQueue, None).expect("load");
    let mut maps = p.fast_maps().expect("maps");
    maps.set_port(PortId(0), ifindex, ETH5, (true, false), xfwd_dataplane::io::frame_max(1500)).expect("port 0");
    maps.set_port(PortId(1), ifindex, ETH4, (true, false), xfwd_dataplane::io::frame_max(1500)).expect("port 1");
    for (gw, gw6) in gws.iter().zip(&gws6) {
        maps.set_neighbor(*gw, PortId(1), ETH5).expect("neighbour");
        maps.set_neighbor6(Key6::global(*gw6), PortId(1), ETH5).expect("neighbour");
    }
    write4(&mut maps, &t, routes);
    write6(&mut maps, &export::fib6(&t), routes);

    // Destinations spread over each table.
    let dsts: Vec<u32> = (0..8u32).map(|k| k * routes / 8).collect();
    let v4 = |hops| -> Vec<Vec<u8>> {
        dsts.iter().map(|&i| frame4(Ipv4Addr::from(0x0b00_0000 + (i << 8) + 1), hops)).collect()
    };
    let v6 = |hops| -> Vec<Vec<u8>> { dsts.iter().map(|&i| frame6(net6(i), hops)).collect() };
    let af_xdp = time(&mut plain, ifindex, &v4(255), XDP_PASS);
    let af_xdp6 = time(&mut plain, ifindex, &v6(255), XDP_PASS);
    maps.set_path(true).expect("path");
    let forwarded = time(&mut p, ifindex, &v4(255), XDP_REDIRECT);
    let forwarded6 = time(&mut p, ifindex, &v6(255), XDP_REDIRECT);
    let exception = time(&mut p, ifindex, &v4(1), XDP_PASS);
    let exception6 = time(&mut p, ifindex, &v6(1), XDP_PASS);
    println!(
        "the program after verification: {} instructions loaded for the AF_XDP path, {} for the XDP path",
        plain.instructions().map_or("-".to_owned(), |n| n.to_string()),
        p.instructions().map_or("-".to_owned(), |n| n.to_string()),
    );
    println!("ns a frame in the program (median of {CALLS} × {} means of {REPEAT} runs):   IPv4   IPv6", dsts.len());
    println!(
        "  AF_XDP path (classified, to the workers' socket):      {:>6} {:>6}   (loaded without the XDP path)",
        af_xdp.as_nanos(),
        af_xdp6.as_nanos()
    );
    println!(
        "  XDP path, forwarded here:                              {:>6} {:>6}",
        forwarded.as_nanos(),
        forwarded6.as_nanos()
    );
    println!(
        "  XDP path, an exception (TTL 1) to the workers:         {:>6} {:>6}",
        exception.as_nanos(),
        exception6.as_nanos()
    );
}

/// The `i`th /48 of 3fff::/20.
fn net6(i: u32) -> Ipv6Addr {
    Ipv6Addr::from((0x3fff_u128 << 112) | (u128::from(i) << 80) | 1)
}

/// Copies the workers' IPv4 FIB (`routes` of its routes ours, the rest connected and local)
/// into the program's table and says what it took and what the kernel charges for it; then
/// again, as a reload does.
fn write4(maps: &mut FastMaps, t: &RouterTables, routes: u32) {
    let before = maps.routes_memory().unwrap_or(0);
    let start = Instant::now();
    maps.follow4(t).expect("routes");
    let took = start.elapsed();
    let memory = maps.routes_memory().map(|m| m.saturating_sub(before));
    let all = t.v4.fib.routes();
    println!(
        "IPv4: {routes} routes (+{} connected and local): the workers' FIB copied in {:.3} s; the kernel charges {} for both DIR-24-8 sets",
        all - routes as usize,
        took.as_secs_f64(),
        memory.map_or("-".to_owned(), |m| format!("{:.1} MiB", m as f64 / 1048576.0)),
    );
    // A reload of the same routes: new tables, copied into the spare set and swapped in.
    let mut again = t.clone();
    again.id = xfwd_dataplane::l3::tables::next_id();
    let start = Instant::now();
    maps.follow4(&again).expect("routes");
    println!("IPv4: reloaded whole in {:.3} s (the spare set filled and swapped in)", start.elapsed().as_secs_f64());
}

/// Writes `fast` (`routes` of them ours, the rest connected and local) into a new trie and
/// says what it took and what the kernel charges for it; then reloads it whole.
fn write6(maps: &mut FastMaps, fast: &FastRoutes6, routes: u32) {
    let before = maps.routes_memory().unwrap_or(0);
    let start = Instant::now();
    maps.load_routes(fast).expect("routes");
    let took = start.elapsed();
    let memory = maps.routes_memory().map(|m| m.saturating_sub(before));
    println!(
        "IPv6: {routes} routes (+{} connected and local) written in {:.2} s ({:.0} routes/s); the kernel charges {} for the LPM trie",
        fast.len() - routes as usize,
        took.as_secs_f64(),
        fast.len() as f64 / took.as_secs_f64(),
        memory.map_or("-".to_owned(), |m| format!("{:.1} MiB ({:.0} bytes a route)", m as f64 / 1048576.0, m as f64 / fast.len() as f64)),
    );
    // A reload of the same table: the spare filled, swapped in, the replaced one emptied.
    let start = Instant::now();
    maps.load_routes(fast).expect("routes");
    println!("IPv6: reloaded whole in {:.2} s (the spare table filled and swapped in)", start.elapsed().as_secs_f64());
}

/// The median of [`CALLS`] means of [`REPEAT`] runs of each of `frames`, each to end as `want`.
fn time(p: &mut XdpProgram, ifindex: u32, frames: &[Vec<u8>], want: u32) -> Duration {
    let mut means: Vec<Duration> = Vec::with_capacity(CALLS * frames.len());
    for f in frames {
        for _ in 0..CALLS {
            let (verdict, mean) = p.time_run(f, ifindex, 0, REPEAT).expect("test run");
            assert_eq!(verdict, want, "verdict");
            means.push(mean);
        }
    }
    means.sort();
    means[means.len() / 2]
}

/// A 64-byte frame of a UDP packet to `dst` with `ttl`, to eth5's MAC.
fn frame4(dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&ETH5.0);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x10, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    Ipv4Packet::emit(&mut f[14..60], 46, 7, ttl, 17, Ipv4Addr::new(198, 18, 10, 1), dst).expect("header");
    f
}

/// A 64-byte frame of a UDP packet to `dst` with hop limit `hops`, to eth5's MAC.
fn frame6(dst: Ipv6Addr, hops: u8) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&ETH5.0);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x10, 1]);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let src = Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 1);
    Ipv6Packet::emit(&mut f[14..64], 10, 17, hops, &src, &dst).expect("header");
    f
}
