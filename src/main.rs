//! `xfwd`: the command line.
//!
//! Exit codes: 0 after SIGINT/SIGTERM, 1 for a failure while running, 2 for bad usage or a
//! configuration that cannot work (bad port, queue count, ...), with one line
//! `xfwd: error: <what>: <cause>` (the whole cause chain with `-v`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use xfwd::{control, demo, render};
use xfwd_dataplane::io::{Forwarder, ForwarderConfig, PollMode, XdpMode};

#[derive(Parser, Debug)]
#[command(name = "xfwd", version, about = "User-space packet forwarder on AF_XDP")]
struct Cli {
    /// Print error cause chains and more detail.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Learning bridge between two or more ports.
    Bridge(BridgeArgs),
    /// Ask a running xfwd for its counters or tables.
    Show {
        #[command(subcommand)]
        what: Show,
        /// The running xfwd's control socket.
        #[arg(long, global = true, default_value = control::DEFAULT_PATH)]
        control: PathBuf,
    },
    /// Build a namespace rig, compare the Linux bridge with `xfwd bridge` on it, tear it down.
    Demo(demo::DemoArgs),
}

#[derive(Subcommand, Debug)]
enum Show {
    /// Counters per port and queue, XDP and AF_XDP socket statistics, frame accounting.
    Stats {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The learnt MAC addresses.
    Fdb,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum PollArg {
    Busy,
    Adaptive,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum XdpModeArg {
    Native,
    Generic,
    Auto,
}

#[derive(clap::Args, Debug)]
struct BridgeArgs {
    /// Ports to bridge (two or more), e.g. eth4 eth5.
    #[arg(required = true, num_args = 2..)]
    ports: Vec<String>,
    /// Workers, one per queue id [default: the smallest RX queue count of the ports, capped by cores].
    #[arg(long)]
    queues: Option<u32>,
    /// Core of each worker, in queue order, e.g. 0,1 or 2-3 [default: queue i on core i].
    #[arg(long, value_parser = xfwd_config::parse_cores)]
    cores: Option<Vec<usize>>,
    /// How workers wait for frames: busy spins; adaptive sleeps in poll(2) when idle.
    #[arg(long, value_enum, default_value = "adaptive")]
    poll: PollArg,
    /// How the XDP program attaches: native (driver), generic, or auto (native if possible).
    #[arg(long, value_enum, default_value = "auto")]
    xdp_mode: XdpModeArg,
    /// FDB ageing time (e.g. 300s, 5m).
    #[arg(long, default_value = "300s", value_parser = xfwd_config::parse_duration)]
    ageing: Duration,
    /// FDB capacity in entries.
    #[arg(long, default_value_t = 65536)]
    fdb_size: usize,
    /// Print one line per port at this interval (e.g. 1s, 500ms).
    #[arg(long, value_parser = xfwd_config::parse_duration)]
    stats: Option<Duration>,
    /// Control socket for `xfwd show`.
    #[arg(long, default_value = control::DEFAULT_PATH)]
    control: PathBuf,
}

fn error_line(e: &anyhow::Error, verbose: bool) -> String {
    if verbose {
        format!("xfwd: error: {e:#}")
    } else {
        format!("xfwd: error: {e}")
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let verbose = cli.verbose;
    let result = match cli.cmd {
        Cmd::Bridge(args) => bridge(args),
        Cmd::Show { what, control } => {
            let req = match what {
                Show::Stats { json: true } => "stats-json",
                Show::Stats { json: false } => "stats",
                Show::Fdb => "fdb",
            };
            control::query(&control, req).map(|text| {
                print!("{text}");
                ExitCode::SUCCESS
            })
        }
        Cmd::Demo(args) => demo::run(&args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", error_line(&e, verbose));
            let usage = e.downcast_ref::<xfwd_dataplane::io::StartError>().is_some_and(|s| s.is_usage());
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

fn bridge(args: BridgeArgs) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let cfg = ForwarderConfig {
        ports: args.ports.clone(),
        queues: args.queues,
        cores: args.cores,
        poll: match args.poll {
            PollArg::Busy => PollMode::Busy,
            PollArg::Adaptive => PollMode::Adaptive,
        },
        xdp_mode: match args.xdp_mode {
            XdpModeArg::Native => XdpMode::Native,
            XdpModeArg::Generic => XdpMode::Generic,
            XdpModeArg::Auto => XdpMode::Auto,
        },
        fdb_size: args.fdb_size,
        ageing_s: u32::try_from(args.ageing.as_secs()).unwrap_or(u32::MAX).max(1),
    };
    let fwd = Forwarder::start_bridge(&cfg)?;
    let view = fwd.view();
    for w in &fwd.warnings {
        eprintln!("xfwd: warning: {w}");
    }
    println!(
        "xfwd: bridge {} | {} queue(s), poll {}, AF_XDP copy mode, fdb {} entries, ageing {} s",
        args.ports.join(" "),
        fwd.cores.len(),
        cfg.poll,
        view.fdb.capacity(),
        cfg.ageing_s
    );
    println!("  queue  core");
    for (q, c) in fwd.cores.iter().enumerate() {
        println!("  {q:<5}  {}", c.map_or_else(|| "unpinned".into(), |c| c.to_string()));
    }
    println!("  port   xdp");
    for (p, m) in view.ports.iter().zip(&fwd.xdp_modes) {
        println!("  {:<5}  {m}", p.name);
        if *m == XdpMode::Generic && cfg.xdp_mode == XdpMode::Auto {
            println!("xfwd: hint: {}: the driver has no native XDP; generic mode costs an skb per frame", p.name);
        }
    }
    let _control = control::ControlServer::start(&args.control, Arc::clone(&view))
        .map_err(|e| xfwd_dataplane::io::StartError::Usage(format!("{e:#}")))?;
    println!("xfwd: ready");
    std::io::stdout().flush()?;

    let mut prev = view.report();
    let mut last = Instant::now();
    let mut last_check = Instant::now();
    let mut warned_no_socket = vec![false; view.ports.len()];
    let mut failed = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if !fwd.workers_alive() {
            eprintln!("xfwd: error: a worker stopped unexpectedly; shutting down");
            failed = true;
            break;
        }
        if last_check.elapsed() >= Duration::from_secs(1) {
            last_check = Instant::now();
            warn_unbound_queues(&view, &mut warned_no_socket);
        }
        if let Some(every) = args.stats {
            if last.elapsed() >= every {
                let now = view.report();
                let dt = last.elapsed();
                for (p, before) in now.ports.iter().zip(&prev.ports) {
                    println!("{}", render::port_line(p, Some(before), dt));
                }
                std::io::stdout().flush()?;
                prev = now;
                last = Instant::now();
            }
        }
    }
    let report = fwd.stop();
    println!("xfwd: stopped; totals:");
    for p in &report.ports {
        println!("{}", render::port_line(p, None, Duration::ZERO));
    }
    for line in render::frame_lines(&report) {
        println!("{line}");
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Says once per port when frames arrive on a queue that has no socket: they went to the kernel
/// and the forwarder never saw them (a queue count mismatch, or a driver numbering queues from
/// something other than 0).
fn warn_unbound_queues(view: &xfwd_dataplane::io::forwarder::LiveView, warned: &mut [bool]) {
    for (p, info) in view.ports.iter().enumerate() {
        let missed = view.xdp.port(p)[xfwd_dataplane::io::XdpCounter::PassNoSocket as usize];
        if missed > 0 && !warned[p] {
            warned[p] = true;
            eprintln!(
                "xfwd: warning: {}: {missed} frame(s) arrived on a queue without an AF_XDP socket and went to the kernel; \
                 check the port's queues (ethtool -l {}) against --queues (see `xfwd show stats`, xdp pass-no-socket)",
                info.name, info.name
            );
        }
    }
}
