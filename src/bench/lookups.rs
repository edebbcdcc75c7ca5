//! `xfwd bench --lookups`: what a route lookup costs per frame over a whole table, where
//! traffic may not go. On the rig every frame's destination stays inside the benchmarking
//! range, so a full table's other prefixes are never looked up by traffic; here frames whose
//! destinations are drawn from the whole table are run through each path's lookup without
//! being sent (`BPF_PROG_TEST_RUN`, no live frames), at one route and at the full table:
//!
//! - the XDP path's program, with the table in its own (IPv4: the workers' DIR-24-8 copied into
//!   its mapped sets; IPv6: an LPM trie) (the whole per-frame work of a forwarded frame: route,
//!   neighbour, rewrite, redirect);
//! - the kernel's FIB, with the same table loaded into a namespace's kernel, looked up by a
//!   small program calling `bpf_fib_lookup()` (route and neighbour, as xdp-forward does);
//! - the workers' FIB (the decision's table lookup), timed in this process.
//!
//! Each destination is looked up once per pass, in the order drawn (no frame twice in a row:
//! the cache holds what the table's other lookups left, as with many destinations), and the
//! figure is the median of the destinations' times (the workers': the mean of a pass, the
//! median of passes, as one lookup is below the clock's resolution).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xfwd_dataplane::io::probe::fib_lookup::{KernelLookup, FOUND};
use xfwd_dataplane::io::program::xdp::{LocalKind, ProgramMode, Steer, XdpProgram};
use xfwd_dataplane::io::{DataPath, PortInfo};
use xfwd_dataplane::l3::export;
use xfwd_dataplane::l3::fib::{no_advice, NhIndex};
use xfwd_dataplane::l3::testing::{port, ETH4, ETH5};
use xfwd_dataplane::l3::{Fib, Fib6, Key6, Prefix, Prefix6, RouteTarget, RouterTables};
use xfwd_dataplane::wire::ipv4::Ipv4Packet;
use xfwd_dataplane::wire::ipv6::Ipv6Packet;
use xfwd_dataplane::PortId;

use super::args::BenchArgs;
use super::scale::{self, Scale};
use super::tables::{self, Rng};
use crate::rig::Netns;

/// Destinations drawn from each table (each looked up once a pass).
pub const DSTS: usize = 20_000;

/// Passes of the workers' lookups over the destinations.
const PASSES: usize = 11;

/// The XDP program's verdict for a frame it forwarded itself.
const XDP_REDIRECT: u32 = 4;

/// One path's cost at one table size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// `xdp-program`, `kernel-fib`, `workers-fib`.
    pub path: String,
    /// 4 or 6.
    pub ip: u8,
    /// Prefixes in the table.
    pub routes: u32,
    /// Median ns per frame (`None`: not measured, with `why`).
    pub median_ns: Option<f64>,
    /// Mean ns per frame.
    pub mean_ns: Option<f64>,
    /// Destinations the path found a route for (all of them, unless something is wrong).
    pub found: usize,
    /// Why a figure is missing.
    #[serde(default)]
    pub why: String,
}

/// `lookups.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LookupReport {
    /// Destinations per table.
    pub dsts: usize,
    /// The tables' seed.
    pub seed: u64,
    /// `uname -r`.
    pub kernel: String,
    /// Every path at every size.
    pub rows: Vec<Row>,
}

/// Runs the measurement for `--routes` (and `--routes6`), at one route and at the full table;
/// prints the table and writes `lookups.json` into `out`.
pub fn run(args: &BenchArgs, out: &Path) -> Result<()> {
    let mut sizes: Vec<(u8, u32)> = Vec::new();
    if args.routes > 0 || args.routes6 == 0 {
        sizes.extend([(4, 1), (4, args.routes.max(1))]);
    }
    if args.routes6 > 0 {
        sizes.extend([(6, 1), (6, args.routes6)]);
    }
    sizes.dedup();
    let mut rows = Vec::new();
    for (ip, routes) in sizes {
        crate::render::progress(&format!("xfwd bench --lookups: IPv{ip}, {routes} route(s) …"));
        rows.extend(measure(ip, routes, args.seed).with_context(|| format!("IPv{ip}, {routes} route(s)"))?);
    }
    crate::render::progress_done();
    let report = LookupReport {
        dsts: DSTS,
        seed: args.seed,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_owned(),
        rows,
    };
    println!("{}", render(&report));
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join("lookups.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("report: {}", path.display());
    Ok(())
}

/// The table a person reads: a row per path, a column per family and size.
pub fn render(r: &LookupReport) -> String {
    use std::fmt::Write as _;
    let mut cols: Vec<(u8, u32)> = r.rows.iter().map(|x| (x.ip, x.routes)).collect();
    cols.dedup();
    let mut s = format!(
        "\nroute lookups per frame without traffic, ns (median of {} destinations drawn from the table, each once; kernel {}, seed {:#x})\n{:<44}",
        r.dsts, r.kernel, r.seed, "path"
    );
    for (ip, n) in &cols {
        let _ = write!(s, " {:>18}", format!("IPv{ip} {n} route{}", if *n == 1 { "" } else { "s" }));
    }
    s.push('\n');
    for (path, said) in [
        ("xdp-program", "XDP path's program (route, neighbour, rewrite)"),
        ("kernel-fib", "kernel's FIB (bpf_fib_lookup)"),
        ("workers-fib", "workers' FIB (the decision's lookup)"),
    ] {
        let _ = write!(s, "{said:<44}");
        for (ip, n) in &cols {
            let cell = r
                .rows
                .iter()
                .find(|x| x.path == path && x.ip == *ip && x.routes == *n)
                .and_then(|x| x.median_ns)
                .map_or_else(|| "-".to_owned(), |m| format!("{m:.0}"));
            let _ = write!(s, " {cell:>18}");
        }
        s.push('\n');
    }
    for x in r.rows.iter().filter(|x| !x.why.is_empty()) {
        let _ = writeln!(s, "{} IPv{} {} routes: {}", x.path, x.ip, x.routes, x.why);
    }
    s
}

/// A frame to `dst` (IPv4 or IPv6, 64 or 78 bytes, TTL 64), to eth5's MAC from h1.
fn frame(dst: IpAddr) -> Result<Vec<u8>> {
    let mut f = vec![0u8; 14];
    f[0..6].copy_from_slice(&ETH5.0);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x10, 1]);
    match dst {
        IpAddr::V4(d) => {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f.resize(60, 0);
            Ipv4Packet::emit(&mut f[14..60], 46, 7, 64, 17, Ipv4Addr::new(198, 18, 10, 1), d)
                .map_err(|e| anyhow::anyhow!("an IPv4 header: {e:?}"))?;
        }
        IpAddr::V6(d) => {
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f.resize(74, 0);
            let src = Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 1);
            Ipv6Packet::emit(&mut f[14..74], 20, 17, 64, &src, &d)
                .map_err(|e| anyhow::anyhow!("an IPv6 header: {e:?}"))?;
        }
    }
    Ok(f)
}

/// The table of `routes` prefixes of family `ip` from `seed` and destinations drawn from it.
fn table_and_dsts(ip: u8, routes: u32, seed: u64) -> (Vec<Prefix>, Vec<Prefix6>, Vec<IpAddr>) {
    let mut rng = Rng(seed ^ 0xA076_1D64_78BD_642F);
    if ip == 4 {
        let t = tables::table4(routes as usize, seed, scale::RANGE4.parse().expect("a prefix"));
        let d = tables::destinations(&t, DSTS, &mut rng).into_iter().map(IpAddr::V4).collect();
        (t, Vec::new(), d)
    } else {
        let t = tables::table6(routes as usize, seed, scale::RANGE6.parse().expect("a prefix"));
        let d = tables::destinations6(&t, DSTS, &mut rng).into_iter().map(IpAddr::V6).collect();
        (Vec::new(), t, d)
    }
}

/// Median and mean of `ns`.
fn median_mean(mut ns: Vec<f64>) -> (Option<f64>, Option<f64>) {
    if ns.is_empty() {
        return (None, None);
    }
    ns.sort_by(f64::total_cmp);
    (Some(ns[ns.len() / 2]), Some(ns.iter().sum::<f64>() / ns.len() as f64))
}

/// [`PASSES`] passes of `lookup` over `dsts`: each pass's ns per lookup, and how many it found.
fn passes<A: Copy>(dsts: &[A], lookup: impl Fn(A) -> bool) -> (Vec<f64>, usize) {
    let mut ns = Vec::with_capacity(PASSES);
    let mut found = 0;
    for _ in 0..PASSES {
        let t = Instant::now();
        found = dsts.iter().filter(|a| std::hint::black_box(lookup(**a))).count();
        ns.push(t.elapsed().as_nanos() as f64 / dsts.len().max(1) as f64);
    }
    (ns, found)
}

/// The workers' FIB over the table (`t4` or `t6` by `ip`), looked up here for `dsts`.
fn workers_fib(ip: u8, routes: u32, (t4, t6): (&[Prefix], &[Prefix6]), dsts: &[IpAddr]) -> Result<Row> {
    let nh = |i: usize| NhIndex((i % 4 + 1) as u16);
    let (passes, found) = if ip == 4 {
        let fib = Fib::build(&t4.iter().enumerate().map(|(i, p)| (*p, nh(i))).collect::<Vec<_>>())?;
        let d: Vec<Ipv4Addr> =
            dsts.iter().filter_map(|a| if let IpAddr::V4(v) = a { Some(*v) } else { None }).collect();
        passes(&d, |a| fib.lookup(a).is_some())
    } else {
        let fib = Fib6::build(&t6.iter().enumerate().map(|(i, p)| (*p, nh(i))).collect::<Vec<_>>())?;
        let d: Vec<Ipv6Addr> =
            dsts.iter().filter_map(|a| if let IpAddr::V6(v) = a { Some(*v) } else { None }).collect();
        passes(&d, |a| fib.lookup(a).is_some())
    };
    let (median, _) = median_mean(passes.clone());
    Ok(Row {
        path: "workers-fib".into(),
        ip,
        routes,
        median_ns: median,
        mean_ns: Some(passes.iter().sum::<f64>() / passes.len() as f64),
        found,
        why: String::new(),
    })
}

/// A namespace of its own with a port and the kernel holding the table (`routes` of family
/// `ip` drawn from `seed`), for the kernel's FIB and the XDP program.
fn table_namespace(ip: u8, routes: u32, seed: u64) -> Result<Netns> {
    let ns = Netns::new(format!("xfwd{}-lookups", std::process::id()))?;
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0"])?;
    ns.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"])?;
    ns.ip(&["link", "add", "eth5", "type", "veth", "peer", "name", "eth5p"])?;
    ns.ip(&["addr", "add", "198.18.10.2/24", "dev", "eth5"])?;
    ns.ip(&["addr", "add", "2001:2:0:10::2/64", "dev", "eth5", "nodad"])?;
    ns.ip(&["link", "set", "eth5", "up"])?;
    ns.ip(&["link", "set", "eth5p", "up"])?;
    let table = Scale {
        routes: if ip == 4 { routes } else { 0 },
        routes6: if ip == 6 { routes } else { 0 },
        dsts: 0,
        v6: ip == 6,
        seed,
    };
    crate::kernel::ip_batch_text_in(Some(ns.name()), &table.kernel_batch(), false)
        .context("loading the table into the namespace's kernel")?;
    Ok(ns)
}
/// The three paths at one family and table size.
fn measure(ip: u8, routes: u32, seed: u64) -> Result<Vec<Row>> {
    let (t4, t6, dsts) = table_and_dsts(ip, routes, seed);
    let frames: Vec<Vec<u8>> = dsts.iter().map(|d| frame(*d)).collect::<Result<_>>()?;
    let row = |path: &str, ns: Vec<f64>, found: usize, why: String| {
        let (median_ns, mean_ns) = median_mean(ns);
        Row { path: path.into(), ip, routes, median_ns, mean_ns, found, why }
    };
    let workers = workers_fib(ip, routes, (&t4, &t6), &dsts)?;
    // The kernel's FIB and the XDP program, in a namespace of their own holding the table.
    let ns = table_namespace(ip, routes, seed)?;
    let statics: Vec<(Prefix, RouteTarget<IpAddr>)> =
        t4.iter().enumerate().map(|(i, p)| (*p, RouteTarget::via(IpAddr::V4(scale::NEXT_HOPS4[i % 4])))).collect();
    let statics6: Vec<(Prefix6, RouteTarget<Ipv6Addr>)> =
        t6.iter().enumerate().map(|(i, p)| (*p, RouteTarget::via(scale::NEXT_HOPS6[i % 4]))).collect();
    let (kernel, program) = ns.inside(move || {
        let lo = PortInfo::read("lo").context("lo")?;
        let mut k = KernelLookup::load().map_err(anyhow::Error::msg)?;
        let mut kernel_ns = Vec::with_capacity(frames.len());
        let mut kernel_found = 0;
        for f in &frames {
            let (verdict, took) = k.time(f, lo.ifindex).map_err(anyhow::Error::msg)?;
            kernel_found += usize::from(verdict == FOUND);
            kernel_ns.push(took.as_nanos() as f64);
        }
        // The XDP program with the table, ports and next hops as the router has them.
        let ports = vec![
            port("eth5", ETH5, &["198.18.10.2/24", "2001:2:0:10::2/64"]),
            port("eth4", ETH4, &["198.18.30.1/24", "2001:2:0:30::1/64"]),
        ];
        let t = RouterTables::build_dual(ports, &statics, &statics6, no_advice).context("the router's tables")?;
        let local = [
            (IpAddr::from(Ipv4Addr::new(198, 18, 10, 2)), LocalKind::Address),
            (IpAddr::from(Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 2)), LocalKind::Address),
        ];
        let mode = ProgramMode::Router { local: &local, neighbors: 64 };
        let mut p = XdpProgram::load(std::slice::from_ref(&lo), (mode, DataPath::Xdp), Steer::ByQueue, None)
            .context("loading the XDP program")?;
        let mut maps = p.fast_maps().context("the program's maps")?;
        let max = xfwd_dataplane::io::frame_max(1500);
        maps.set_port(PortId(0), lo.ifindex, ETH5, (true, false), max).context("port 0")?;
        maps.set_port(PortId(1), lo.ifindex, ETH4, (true, false), max).context("port 1")?;
        for (h, h6) in scale::NEXT_HOPS4.iter().zip(&scale::NEXT_HOPS6) {
            maps.set_neighbor(*h, PortId(0), ETH4).context("a neighbour")?;
            maps.set_neighbor6(Key6::global(*h6), PortId(0), ETH4).context("a neighbour")?;
        }
        maps.follow4(&t).context("the program's IPv4 routes")?;
        maps.load_routes(&export::fib6(&t)).context("the program's IPv6 routes")?;
        maps.set_path(true).context("the XDP path")?;
        let mut program_ns = Vec::with_capacity(frames.len());
        let mut program_found = 0;
        for f in &frames {
            let (verdict, took): (u32, Duration) = p.time_run(f, lo.ifindex, 0, 1).context("a test run")?;
            program_found += usize::from(verdict == XDP_REDIRECT);
            program_ns.push(took.as_nanos() as f64);
        }
        Ok(((kernel_ns, kernel_found), (program_ns, program_found)))
    })?;
    drop(ns);
    let mut rows = vec![
        row("xdp-program", program.0, program.1, String::new()),
        row("kernel-fib", kernel.0, kernel.1, String::new()),
        workers,
    ];
    for r in &mut rows {
        if r.found < DSTS {
            r.why = format!("found a route for {} of {DSTS} destinations", r.found);
        }
    }
    if rows.iter().any(|r| r.found == 0) {
        bail!("a path found no route at all: {rows:?}");
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_prints_a_row_per_path_and_dashes_where_not_measured() {
        let row = |path: &str, ip, routes, m: Option<f64>| Row {
            path: path.into(),
            ip,
            routes,
            median_ns: m,
            mean_ns: m,
            found: DSTS,
            why: String::new(),
        };
        let r = LookupReport {
            dsts: DSTS,
            seed: 1,
            kernel: "6.18".into(),
            rows: vec![
                row("xdp-program", 4, 1, Some(120.0)),
                row("kernel-fib", 4, 1, Some(60.4)),
                row("workers-fib", 4, 1, Some(3.0)),
                row("xdp-program", 4, 1000, Some(400.0)),
                row("kernel-fib", 4, 1000, None),
                row("workers-fib", 4, 1000, Some(9.6)),
            ],
        };
        let t = render(&r);
        assert!(t.contains("IPv4 1 route") && t.contains("IPv4 1000 routes"), "{t}");
        let line = |p: &str| {
            t.lines().find(|l| l.starts_with(p)).unwrap().split_whitespace().rev().take(2).collect::<Vec<_>>()
        };
        assert_eq!(line("XDP path's program"), ["400", "120"]);
        assert_eq!(line("kernel's FIB"), ["-", "60"]);
        assert_eq!(line("workers' FIB"), ["10", "3"]);
    }

    #[test]
    fn frames_carry_the_destination() {
        let f = frame("1.2.3.4".parse().unwrap()).unwrap();
        assert_eq!((f.len(), &f[30..34]), (60, &[1, 2, 3, 4][..]));
        let f6 = frame("2a00::1".parse().unwrap()).unwrap();
        assert_eq!(f6.len(), 74);
        assert_eq!(&f6[38..40], &[0x2a, 0x00]);
    }
}
