//! `xfwd`: the command line.
//!
//! Exit codes: 0 after SIGINT/SIGTERM, 1 for a failure while running, 2 for bad usage or a
//! configuration that cannot work (bad port, queue count, ...), with one line
//! `xfwd: error: <what>: <cause>` (the whole cause chain with `-v`).

// Production code: no function over 100 lines of code (clippy.toml); tests may run longer.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use xfwd::{config_file, control, privs, render};
use xfwd_config::router::RouterConfig;
use xfwd_dataplane::io::setup::settings::{Cores, Layer, Opt, Origins, Refusal, Source, WorkerFlags, WorkerOptions};
use xfwd_dataplane::io::setup::start::plan::Layout;
use xfwd_dataplane::io::supervise::{Notice, Rebuild, Supervisor};
use xfwd_dataplane::io::{FibSource, Forwarder, ForwarderConfig, LiveView, Mode, StartError, XdpMode};

const LONG_ABOUT: &str = "User-space packet forwarder on AF_XDP: a learning bridge (xfwd bridge) and an IPv4 and \
IPv6 router (xfwd router). An XDP program hands the frames of the ports to AF_XDP sockets, one worker per \
queue forwards them, and what is for the box itself goes to the kernel. xfwd kernel sets up the kernel's \
own path with the same configuration, and xfwd bench compares the two on a rig of network namespaces.";

const FILES: &str = "Files:
  /etc/xfwd/NAME.toml       a router's configuration, run by xfwd-router@NAME.service
                            (schema: /usr/share/doc/xfwd/config.md)
  /etc/xfwd/NAME.bridge.toml  a bridge's ports and options, run by xfwd-bridge@NAME.service
  /run/xfwd/xfwd.sock       the control socket `xfwd show` asks
  /run/xfwd/NAME/xfwd.sock  a unit's control socket (xfwd show --control ...)

Signals: SIGHUP reads the router's file again (routes, neighbours, limits); SIGINT and SIGTERM stop,
detaching the XDP program. Under systemd (Type=notify) xfwd says READY, RELOADING and STOPPING.

Exit status: 0 after SIGINT or SIGTERM, 1 for a failure while running, 2 for bad usage or a
configuration that cannot work.";

#[derive(Parser, Debug)]
#[command(name = "xfwd", version, about = "User-space packet forwarder on AF_XDP", long_about = LONG_ABOUT, after_long_help = FILES)]
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
    /// IPv4 and IPv6 router configured by a TOML file (schema: config/README.md, installed as
    /// /usr/share/doc/xfwd/config.md).
    Router(RouterArgs),
    /// Ask a running xfwd for its counters or tables.
    Show {
        #[command(subcommand)]
        what: Show,
        /// The running xfwd's control socket.
        #[arg(long, global = true, default_value = control::DEFAULT_PATH)]
        control: PathBuf,
    },
    /// Clear a running xfwd's counters as `xfwd show stats` shows them (it then counts from
    /// the clear; the metrics endpoint, --stats lines, top and monitor count from start).
    Clear {
        #[command(subcommand)]
        what: Clear,
        /// The running xfwd's control socket.
        #[arg(long, global = true, default_value = control::DEFAULT_PATH)]
        control: PathBuf,
    },
    /// Ask a running xfwd to read its file again and wait for the outcome: exit 0 when applied
    /// (or, for a bridge, nothing to apply), 1 when refused, with why (as SIGHUP, but waited
    /// for: the units' ExecReload).
    Reload {
        /// The running xfwd's control socket.
        #[arg(long, default_value = control::DEFAULT_PATH)]
        control: PathBuf,
    },
    /// The A/B run: the kernel path against xfwd (and variants, and the bare wire) on a rig it
    /// builds, by the reference method; prints a table, writes report JSON and SVG plots.
    Bench(xfwd::bench::BenchArgs),
    /// The client side of the reference test on two machines: flows with fixed ports, JSON report.
    Load(xfwd::remote::LoadArgs),
    /// A live view of a running xfwd: per port rates, drops, each worker's load, ring fill.
    Top(xfwd::top::TopArgs),
    /// The box side of the reference test on two machines: per-core CPU and per-queue packets.
    Monitor(xfwd::remote::MonitorArgs),
    /// The table and plots again from saved report JSON files.
    Report {
        /// report-<mode>.json files written by `xfwd bench`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where to write the plots (default: beside each file).
        #[arg(long)]
        out: Option<PathBuf>,
        /// ARM=FILE: the box's samples from `xfwd monitor` while `xfwd load` ran that arm; its
        /// runs get the box's CPU and cost per packet, written into the report file.
        #[arg(long, value_parser = parse_monitor_arg)]
        monitor: Vec<(String, PathBuf)>,
    },
    /// What will work on these ports and why: driver, queues, XDP and AF_XDP support,
    /// interrupts, with the command that fixes each finding. Changes nothing.
    Doctor(xfwd::doctor::DoctorArgs),
    /// Apply the same configuration to the kernel's forwarding path (for A/B comparisons).
    Kernel {
        #[command(subcommand)]
        cmd: xfwd::kernel::KernelCmd,
    },
    /// For packaging: write the man pages (xfwd.1, xfwd-router.1, …) or the bash, zsh and fish
    /// completions into DIR.
    #[command(hide = true)]
    Generate { what: Generate, dir: PathBuf },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Generate {
    Man,
    Completions,
}

#[derive(Subcommand, Debug)]
enum Clear {
    /// The counters `xfwd show stats` shows.
    Stats,
}

#[derive(Subcommand, Debug)]
enum Show {
    /// Counters per port and queue, XDP and AF_XDP socket statistics, frame accounting.
    Stats {
        /// Print JSON instead of text (every counter).
        #[arg(long)]
        json: bool,
        /// Every drop reason and XDP verdict, zeros too [default: those that happened].
        #[arg(short, long)]
        all: bool,
    },
    /// The learnt MAC addresses.
    Fdb {
        /// Print JSON instead of text (named fields, with a schema version).
        #[arg(long)]
        json: bool,
    },
    /// The router's routes (connected, local, broadcast, static, or the kernel's), as `ip route`.
    Routes {
        /// Print JSON instead of text (named fields, with a schema version).
        #[arg(long)]
        json: bool,
    },
    /// The router's neighbour table, as `ip neigh`.
    Neighbors {
        /// Print JSON instead of text (named fields, with a schema version).
        #[arg(long)]
        json: bool,
    },
}

/// What both modes take: the worker options (the table in `xfwd_dataplane::io::setup::settings`;
/// the router's file may set them too, and flags win) and how xfwd itself runs.
#[derive(clap::Args, Debug)]
struct WorkerArgs {
    #[command(flatten)]
    options: WorkerFlags,
    /// Print one line per port at this interval (e.g. 1s, 500ms).
    #[arg(long, value_parser = xfwd_config::parse_duration)]
    stats: Option<Duration>,
    /// Control socket for `xfwd show`.
    #[arg(long, default_value = control::DEFAULT_PATH)]
    control: PathBuf,
    /// Let this group's members ask too (`xfwd show`, `xfwd top`): the control socket becomes
    /// the group's, mode 0660 [default: its owner only].
    #[arg(long, value_name = "GROUP")]
    control_group: Option<String>,
    /// Once set up, run as this user (a name or a uid). Every capability is dropped either way.
    #[arg(long)]
    user: Option<String>,
    /// Serve every counter on http://ADDR:PORT/metrics in the Prometheus text format, e.g.
    /// 127.0.0.1:9464, :9464 (every IPv4 address) or localhost:9464 (bound before privileges
    /// are dropped) [default: off].
    #[arg(long, value_name = "ADDR:PORT", value_parser = xfwd::metrics::parse_listen)]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(clap::Args, Debug)]
struct RouterArgs {
    /// The configuration file.
    #[arg(long)]
    config: PathBuf,
    /// Validate the file, and that its interfaces exist, are up and have an MTU xfwd carries, and
    /// exit: 0 if good, 2 if not.
    #[arg(long)]
    check: bool,
    /// With --check: the file alone, not the interfaces (for CI, or a machine other than the
    /// one it is for).
    #[arg(long, requires = "check")]
    parse_only: bool,
    #[command(flatten)]
    workers: WorkerArgs,
}

#[derive(clap::Args, Debug)]
struct BridgeArgs {
    /// Ports to bridge (two or more), e.g. eth4 eth5; or from --config.
    #[arg(required_unless_present = "config", num_args = 2.., conflicts_with = "config")]
    ports: Vec<String>,
    /// A bridge file: ports, ageing, fdb_size, [workers] and [aqm] (man xfwd-bridge; the flags
    /// given beside it win).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Validate the file, and that its ports exist, are up and have an MTU xfwd carries, and exit:
    /// 0 if good, 2 if not.
    #[arg(long, requires = "config")]
    check: bool,
    /// With --check: the file alone, not the ports.
    #[arg(long, requires = "check")]
    parse_only: bool,
    /// FDB ageing time (e.g. 300s, 5m) [default: 300s].
    #[arg(long, value_parser = xfwd_config::parse_duration)]
    ageing: Option<Duration>,
    /// FDB capacity in entries, 1 to 16777216 [default: 65536].
    #[arg(long, value_parser = xfwd_config::bridge::parse_fdb_size)]
    fdb_size: Option<usize>,
    #[command(flatten)]
    workers: WorkerArgs,
}

/// `--monitor ARM=FILE`.
fn parse_monitor_arg(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((arm, file)) if !arm.is_empty() && !file.is_empty() => Ok((arm.to_owned(), PathBuf::from(file))),
        _ => Err(format!("`{text}`: write ARM=FILE, e.g. kernel=kernel-cpu.json")),
    }
}

/// The worker options: the table's defaults, then `file`'s, then the flags; checked, a
/// refusal worded with what the user wrote; `cores = irq` replaced by the CPU of each RX
/// queue's interrupt on the first port, in queue order.
fn worker_options(
    flags: &WorkerFlags,
    file: Option<&Layer>,
    ports: &[String],
) -> anyhow::Result<(WorkerOptions, Origins)> {
    let flags = flags.layer();
    let layers: Vec<&Layer> = file.into_iter().chain([&flags]).collect();
    let (mut options, origins) = WorkerOptions::merge(&layers);
    options.check().map_err(|r| xfwd::UsageError(word(&r, &origins)))?;
    if options.cores == Some(Cores::Irq) {
        let first = ports.first().map(String::as_str).unwrap_or("");
        let cpus = xfwd::doctor::irq_cores(&xfwd::doctor::queue_irqs(first)).map_err(|why| {
            let name = name_of(Opt::Cores, &origins, false);
            xfwd::UsageError(format!("{name} irq: {first} {why}: give a core list (xfwd doctor {first})"))
        })?;
        options.cores = Some(Cores::List(cpus));
    }
    Ok((options, origins))
}

/// An option as the user wrote it: its flag, or its key in the file; a default in the words
/// of the file where the other options of a message came from there (`in_file`).
fn name_of(opt: Opt, origins: &Origins, in_file: bool) -> String {
    match origins.of(opt) {
        Source::Flag => opt.flag().to_owned(),
        Source::File { .. } => opt.key().to_owned(),
        Source::Default if in_file => opt.key().to_owned(),
        Source::Default => opt.flag().to_owned(),
    }
}

/// A refusal of the worker options in the user's words: led by the file's place of the first
/// of its options given there (`router.toml:5:10: aqm.target …`), each option called by its
/// flag or its key.
fn word(r: &Refusal, origins: &Origins) -> String {
    let place = r.options().into_iter().find_map(|o| match origins.of(o) {
        Source::File { path, line, col } => Some(format!("{}:{line}:{col}: ", path.display())),
        _ => None,
    });
    let text = r.describe(&|o| name_of(o, origins, place.is_some()));
    format!("{}{text}", place.unwrap_or_default())
}

/// Prints each port's RX queue → interrupt → CPU table, where the ports have them, and warns
/// when irqbalance may move those interrupts.
fn print_queue_irqs(ports: &[String]) {
    let rows: Vec<(&String, xfwd::doctor::QueueIrq)> =
        ports.iter().flat_map(|p| xfwd::doctor::queue_irqs(p).into_iter().map(move |q| (p, q))).collect();
    if rows.is_empty() {
        return;
    }
    println!("  port   queue  irq    cpus");
    for (p, q) in &rows {
        let cpus = q.irq.effective.as_ref().unwrap_or(&q.irq.cpus);
        println!(
            "  {p:<5}  {:<5}  {:<5}  {}",
            q.queue,
            q.irq.irq,
            cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
        );
    }
    if xfwd::doctor::irqbalance_running() {
        xfwd::elog!(
            "xfwd: warning: irqbalance runs and may move the ports' interrupts away from the workers' cores (systemctl stop irqbalance; see xfwd doctor)"
        );
    }
}

fn error_line(e: &anyhow::Error, verbose: bool) -> String {
    if verbose {
        format!("xfwd: error: {e:#}")
    } else {
        format!("xfwd: error: {e}")
    }
}

/// Lets a closed standard output end the process quietly, as it ends `ip` or `cat` (`xfwd show
/// routes | head -1`): Rust ignores SIGPIPE, and a print into a closed pipe then panics. Only for
/// the commands that just print; one that must clean up when a write fails (a rig, the data
/// plane, its control socket's clients) keeps SIGPIPE ignored.
fn quiet_on_closed_pipe() {
    // SAFETY: signal(2) restoring SIGPIPE's default action, on the main thread before any other
    // thread starts; no handler is installed.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let verbose = cli.verbose;
    if matches!(cli.cmd, Cmd::Show { .. } | Cmd::Doctor(_) | Cmd::Report { .. }) {
        quiet_on_closed_pipe();
    }
    let result = match cli.cmd {
        Cmd::Bridge(args) => bridge(args),
        Cmd::Router(args) => router(args),
        Cmd::Show { what, control } => {
            let (req, json) = match what {
                Show::Stats { json: false, all: true } => ("show-stats-all", false),
                Show::Stats { json, .. } => ("show-stats", json),
                Show::Fdb { json } => ("fdb", json),
                Show::Routes { json } => ("routes", json),
                Show::Neighbors { json } => ("neighbors", json),
            };
            let req = if json { format!("{req}-json") } else { req.to_owned() };
            control::query(&control, &req).map(|text| {
                print!("{text}");
                ExitCode::SUCCESS
            })
        }
        Cmd::Clear { what: Clear::Stats, control } => control::query(&control, "clear-stats").map(|text| {
            print!("{text}");
            ExitCode::SUCCESS
        }),
        Cmd::Reload { control } => {
            control::query_within(&control, "reload", control::RELOAD_TIMEOUT + Duration::from_secs(10)).map(|text| {
                print!("{text}");
                ExitCode::SUCCESS
            })
        }
        Cmd::Kernel { cmd } => xfwd::kernel::run(cmd),
        Cmd::Doctor(args) => xfwd::doctor::run(&args),
        Cmd::Load(args) => xfwd::remote::load(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Monitor(args) => xfwd::remote::monitor(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Top(args) => xfwd::top::run(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Bench(args) => xfwd::bench::run(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Report { files, out, monitor } => {
            xfwd::bench::report_files(&files, out.as_deref(), &monitor).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Generate { what, dir } => generate(what, &dir).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            xfwd::elog!("{}", error_line(&e, verbose));
            let usage = e.downcast_ref::<StartError>().is_some_and(|s| s.is_usage())
                || e.downcast_ref::<xfwd_config::ConfigError>().is_some()
                || e.downcast_ref::<xfwd::UsageError>().is_some();
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

/// `xfwd generate`: the man pages, one per command that does something (`xfwd-show-stats.1`),
/// or the completions, as the package installs them.
fn generate(what: Generate, dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // No `help` subcommand in the man pages (a page would list xfwd-help(1), which has none):
    // `man` is the help there. The completions keep it.
    let mut cmd = if matches!(what, Generate::Man) { without_help(Cli::command()) } else { Cli::command() };
    cmd.build();
    match what {
        Generate::Completions => {
            for shell in [clap_complete::Shell::Bash, clap_complete::Shell::Zsh, clap_complete::Shell::Fish] {
                let path = clap_complete::generate_to(shell, &mut cmd, "xfwd", dir)
                    .with_context(|| format!("writing the {shell} completions into {}", dir.display()))?;
                println!("{}", path.display());
            }
        }
        Generate::Man => man_pages(&cmd, "xfwd", dir)?,
    }
    Ok(())
}

/// `cmd` and its subcommands without the `help` subcommand clap adds.
fn without_help(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    names.iter().fold(cmd.disable_help_subcommand(true), |c, n| c.mut_subcommand(n, without_help))
}

/// Writes `NAME.1` for `cmd`, then a page for each visible subcommand (`NAME-SUB.1`).
fn man_pages(cmd: &clap::Command, name: &str, dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let page = cmd.clone().name(name.to_owned()).bin_name(name.replace('-', " ")).version(env!("CARGO_PKG_VERSION"));
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        man_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(())
}

fn xsk_mode(fwd: &Forwarder) -> &'static str {
    if fwd.zero_copy {
        "AF_XDP zero-copy mode"
    } else {
        "AF_XDP copy mode"
    }
}

fn bridge(args: BridgeArgs) -> anyhow::Result<ExitCode> {
    let hup = hup_flag()?;
    let file = args.config.as_deref().map(config_file::load_bridge).transpose()?;
    let ports = file.as_ref().map_or_else(|| args.ports.clone(), |f| f.port_names());
    let w = &args.workers;
    if args.parse_only {
        let file = file.as_ref().expect("--parse-only requires --config");
        let flags = w.options.layer();
        let (options, origins) = WorkerOptions::merge(&[&file.options, &flags]);
        options.check().map_err(|r| xfwd::UsageError(word(&r, &origins)))?;
        println!("{}: ok: {} port(s) (not looked for: --parse-only)", file.path.display(), ports.len());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(f) = &file {
        f.check_ports(xfwd_dataplane::io::setup::port::exists).map_err(|mut e| {
            if args.check {
                e.message.push_str("; --check --parse-only checks the file alone");
            }
            e
        })?;
    }
    let (workers, origins) = worker_options(&w.options, file.as_ref().map(|f| &f.options), &ports)?;
    let settings = bridge_settings(file.as_ref());
    if args.check {
        start_would_take(&ports)?;
        println!(
            "{}: ok: {} port(s)",
            args.config.as_deref().unwrap_or(std::path::Path::new("-")).display(),
            ports.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let ageing = args.ageing.or(file.as_ref().and_then(|f| f.ageing)).unwrap_or(Duration::from_secs(300));
    let fdb_size = args.fdb_size.or(file.as_ref().and_then(|f| f.fdb_size)).unwrap_or(65536);
    let cfg = ForwarderConfig {
        ports: ports.clone(),
        workers,
        mode: Mode::Bridge {
            fdb_size,
            ageing_s: u32::try_from(ageing.as_secs()).unwrap_or(u32::MAX).max(1),
            settings: settings.clone(),
        },
    };
    let sig = signals(hup)?;
    let (fwd, control) = start(&cfg, w, &origins, &sig)?;
    println!(
        "xfwd: bridge {} | {} queue(s), poll {}, {}, fdb {} entries, ageing {} s",
        ports.join(" "),
        fwd.cores.len(),
        cfg.workers.poll,
        xsk_mode(&fwd),
        fwd.view().fdb.capacity(),
        ageing.as_secs().max(1)
    );
    if !settings.is_default() {
        println!("xfwd: bridge ports: {}", describe_settings(&settings, &ports));
    }
    let status = format!("bridge {}", ports.join(" "));
    run(fwd, control, &cfg, (w, &origins), &sig, &status, None)
}

/// The file's per-port settings and static stations (the defaults without a file).
fn bridge_settings(
    file: Option<&xfwd_config::bridge::BridgeConfig>,
) -> xfwd_dataplane::io::setup::config::BridgeSettings {
    file.map_or_else(Default::default, |f| xfwd_dataplane::io::setup::config::BridgeSettings {
        ports: f.port_settings.clone(),
        statics: f.statics.iter().map(|&(mac, i)| (mac, xfwd_dataplane::PortId(i as u8))).collect(),
    })
}

/// What differs from a plain learning bridge, per port: `eth4: isolated; eth6: learning off,
/// mcast_flood off; 1 static entry`.
fn describe_settings(settings: &xfwd_dataplane::io::setup::config::BridgeSettings, ports: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (name, p) in ports.iter().zip(&settings.ports) {
        let mut off: Vec<&str> = Vec::new();
        for (on, what) in [
            (p.learning, "learning off"),
            (p.flood, "flood off"),
            (p.mcast_flood, "mcast_flood off"),
            (p.bcast_flood, "bcast_flood off"),
            (!p.isolated, "isolated"),
        ] {
            if !on {
                off.push(what);
            }
        }
        let storm = p.storm_limit.map(|n| format!("storm control {n} flooded frames/s"));
        let said: Vec<&str> = off.iter().copied().chain(storm.as_deref()).collect();
        if !said.is_empty() {
            parts.push(format!("{name}: {}", said.join(", ")));
        }
    }
    let n = settings.statics.len();
    if n > 0 {
        parts.push(format!("{n} static entr{}", if n == 1 { "y" } else { "ies" }));
    }
    parts.join("; ")
}

fn router(args: RouterArgs) -> anyhow::Result<ExitCode> {
    let hup = hup_flag()?;
    let c = config_file::load(&args.config)?;
    if args.parse_only {
        // The worker options merged and checked as at start, but `cores = irq`, which reads the
        // first port's interrupts, left as it is.
        let flags = args.workers.options.layer();
        let (options, origins) = WorkerOptions::merge(&[&c.options, &flags]);
        options.check().map_err(|r| xfwd::UsageError(word(&r, &origins)))?;
        println!("{}: ok: {} interface(s) (not looked for: --parse-only)", args.config.display(), c.interfaces.len());
        return Ok(ExitCode::SUCCESS);
    }
    c.check_interfaces(xfwd_dataplane::io::setup::port::exists).map_err(|mut e| {
        if args.check {
            e.message.push_str("; --check --parse-only checks the file alone");
        }
        e
    })?;
    let routes_from = match c.fib {
        FibSource::Config => format!(
            "{} static route(s), {} static neighbor(s)",
            c.routes.len() + c.routes6.len(),
            c.neighbors.len() + c.neighbors6.len()
        ),
        FibSource::Kernel { table, .. } => {
            format!("addresses, routes (local table and table {table}) and neighbours from the kernel")
        }
    };
    let w = &args.workers;
    let (workers, origins) = worker_options(&w.options, Some(&c.options), &c.ports())?;
    if args.check {
        start_would_take(&c.ports())?;
        println!("{}: ok: {} interface(s), {routes_from}", args.config.display(), c.interfaces.len());
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = ForwarderConfig { ports: c.ports(), workers, mode: Mode::Router(Box::new(c.setup())) };
    let sig = signals(hup)?;
    let (fwd, control) = start(&cfg, w, &origins, &sig)?;
    println!(
        "xfwd: router {} | {} queue(s), poll {}, {}, {routes_from}",
        args.config.display(),
        fwd.cores.len(),
        cfg.workers.poll,
        xsk_mode(&fwd),
    );
    for i in &c.interfaces {
        let addrs: Vec<String> = i
            .addresses
            .iter()
            .map(|(a, l)| format!("{a}/{l}"))
            .chain(i.addresses6.iter().map(|(a, l)| format!("{a}/{l}")))
            .collect();
        println!("  {:<6} {}", i.name, addrs.join(" "));
    }
    let status = format!("router {}", args.config.display());
    run(fwd, control, &cfg, (w, &origins), &sig, &status, Some((&args.config, c)))
}

/// `--check` where the ports are: what start-up would refuse of them (one down, an MTU above
/// what an AF_XDP frame of xfwd carries), as start-up words it.
fn start_would_take(ports: &[String]) -> anyhow::Result<()> {
    xfwd_dataplane::io::setup::port::check_ports(ports, xfwd_dataplane::io::frames::xsk::MAX_MTU)
        .map(drop)
        .map_err(|e| xfwd::UsageError(e.to_string()).into())
}

/// Starts the forwarder with the control socket bound and, before any thread runs, every
/// capability dropped (and the user switched with `--user`); then serves the control socket.
fn start(
    cfg: &ForwarderConfig,
    w: &WorkerArgs,
    origins: &Origins,
    sig: &Signals,
) -> anyhow::Result<(Forwarder, control::ControlServer)> {
    privs::check_for_start().map_err(xfwd::UsageError)?;
    let user = w.user.as_deref().map(privs::User::lookup).transpose().map_err(|e| xfwd::UsageError(e.to_string()))?;
    let group = w
        .control_group
        .as_deref()
        .map(privs::group_id)
        .transpose()
        .map_err(|e| xfwd::UsageError(format!("--control-group: {e}")))?;
    // Bound as root, the socket file stays root's (and --control-group's): only they may query.
    let mut control =
        control::ControlServer::bind(&w.control, group).map_err(|e| xfwd::UsageError(format!("{e:#}")))?;
    // Bound now, while xfwd may still bind any port; served once the workers run.
    let metrics = w
        .metrics
        .map(xfwd::metrics::MetricsServer::bind)
        .transpose()
        .map_err(|e| xfwd::UsageError(format!("{e:#}")))?;
    let mut keep: Vec<caps::Capability> = privs::keep_for_map_reads_here().into_iter().collect();
    // The kernel resolves the neighbours of its routes: asking it to (RTM_NEWNEIGH) takes
    // CAP_NET_ADMIN in the thread that sends the request, not only in the socket's opener.
    let kernel_fib = matches!(&cfg.mode, Mode::Router(s) if s.fib != FibSource::Config);
    if kernel_fib {
        keep.push(caps::Capability::CAP_NET_ADMIN);
    }
    let mut dropped = None;
    let fwd = Forwarder::start_with(
        cfg,
        || {
            dropped = Some(privs::drop_all(user.as_ref(), &keep).map_err(|e| e.to_string())?);
            Ok(())
        },
        // Only the ARP thread asks the kernel to resolve: every thread started after it (the
        // workers, the mirror, the XDP path's, control and metrics) goes without.
        || {
            if kernel_fib {
                privs::drop_one(caps::Capability::CAP_NET_ADMIN).map_err(|e| e.to_string())
            } else {
                Ok(())
            }
        },
    )
    .map_err(|e| match e {
        StartError::Refused(r) => anyhow::Error::new(xfwd::UsageError(word(&r, origins))),
        e => e.into(),
    })?;
    control.serve(fwd.view(), Arc::clone(&sig.reloads))?;
    if let Some(m) = metrics {
        let addr = m.local_addr()?;
        m.serve(fwd.view())?;
        println!("xfwd: metrics on http://{addr}/metrics");
    }
    if let Some(d) = dropped {
        let why = |c: &caps::Capability| match c {
            caps::Capability::CAP_NET_ADMIN => "in the ARP thread alone, to ask the kernel to resolve neighbours",
            _ => "this kernel needs it to read the counters map",
        };
        let kept = if d.kept.is_empty() {
            "no capabilities left".to_owned()
        } else {
            format!("kept only {}", d.kept.iter().map(|c| format!("{c} ({})", why(c))).collect::<Vec<_>>().join(", "))
        };
        let user = user.map_or_else(|| format!("uid {}", d.uid), |u| format!("user {} (uid {})", u.name, d.uid));
        println!("xfwd: privileges dropped: {kept}, running as {user}");
    }
    Ok((fwd, control))
}

/// What the signals ask of a running xfwd, and whom to tell about it.
struct Signals {
    /// SIGINT or SIGTERM: stop.
    stop: Arc<AtomicBool>,
    /// SIGHUP or `xfwd reload`: reload (the router's file; the bridge reads nothing again and
    /// says so), and the outcome for `xfwd reload`.
    reloads: Arc<control::Reloads>,
    /// The service manager, when there is one (`$NOTIFY_SOCKET`).
    notify: xfwd::notify::Notifier,
}

/// SIGHUP, registered first thing: a reload asked for while xfwd still reads its file (an
/// eager `systemctl reload`) must not kill it (SIGHUP's default action); it runs once ready.
fn hup_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))?;
    Ok(hup)
}

/// Registers SIGINT and SIGTERM once the file is read (until then they stop xfwd as they stop
/// any program, even in a read that hangs) and connects to the service manager.
fn signals(hup: Arc<AtomicBool>) -> anyhow::Result<Signals> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let notify = xfwd::notify::Notifier::from_env();
    Ok(Signals { stop, reloads: control::Reloads::new(hup), notify })
}

/// The worker options a router runs with, for a reload to compare with its file: the queue
/// count and cores it chose where they were left out, and where each value came from.
fn running_settings(fwd: &Forwarder, cfg: &ForwarderConfig, origins: &Origins) -> xfwd_config::router::Running {
    let mut options = cfg.workers.clone();
    options.queues = Some(fwd.cores.len() as u32);
    if options.cores.is_none() {
        options.cores = fwd.cores.iter().copied().collect::<Option<Vec<usize>>>().map(Cores::List);
    }
    xfwd_config::router::Running { options, origins: origins.clone() }
}

/// SIGHUP (or `xfwd reload`): reads the file again and applies routes, neighbours and limits;
/// what was applied, or why not (also said on stderr).
fn reload(
    fwd: &Forwarder,
    path: &std::path::Path,
    running: &mut RouterConfig,
    settings: &xfwd_config::router::Running,
) -> Result<String, String> {
    let refused = |why: String| {
        xfwd::elog!("xfwd: warning: reload refused: {why}");
        Err(why)
    };
    let new = match config_file::load(path) {
        Ok(n) => n,
        Err(e) => return refused(format!("{e}; the running tables are unchanged")),
    };
    if let Some(why) = running.needs_restart(&new, settings) {
        return refused(format!("{why}; restart xfwd to apply it (the running tables are unchanged)"));
    }
    match fwd.reload_router(&new.routes, &new.routes6, new.neighbors.clone(), new.neighbors6.clone(), new.limits) {
        Ok(()) => {
            let done = format!(
                "reloaded {}: {} static route(s), {} static neighbor(s)",
                path.display(),
                new.routes.len() + new.routes6.len(),
                new.neighbors.len() + new.neighbors6.len()
            );
            println!("xfwd: {done}");
            *running = new;
            Ok(done)
        }
        Err(e) => refused(format!("{e}; the running tables are unchanged")),
    }
}

/// Prints how the forwarder started: its warnings, the workers' cores and priority, the
/// sockets' layout, the queues' interrupts, each port's XDP mode.
fn print_start(fwd: &Forwarder, view: &LiveView, cfg: &ForwarderConfig) {
    for warning in &fwd.warnings {
        xfwd::elog!("xfwd: warning: {warning}");
    }
    println!("  queue  core");
    for (q, c) in fwd.cores.iter().enumerate() {
        println!("  {q:<5}  {}", c.map_or_else(|| "unpinned".into(), |c| c.to_string()));
    }
    match view.rt_priority {
        Some(p) if xfwd_dataplane::io::setup::start::sched::may_step_up(p) => println!(
            "xfwd: workers under SCHED_FIFO {p}, ahead of ordinary processes; after {} ms of work without a pause a worker takes a normal thread's share until the next",
            xfwd_dataplane::io::frames::worker::YIELD_AFTER_MS
        ),
        Some(p) => println!(
            "xfwd: workers under SCHED_FIFO {p}, ahead of ordinary processes, under sustained load too: a worker could not step back up after stepping down (RLIMIT_RTPRIO could not be raised: it needs CAP_SYS_RESOURCE at start), so the kernel's real-time throttling (sched_rt_runtime_us) is the limit"
        ),
        None => println!("xfwd: workers are normal threads"),
    }
    if let Layout::PerCpu { slots } = &fwd.layout {
        println!(
            "xfwd: sockets per-cpu: every worker binds queue 0 of every port, a UMEM per port shared by the workers; a frame goes to the worker of the CPU it arrived on"
        );
        println!("  cpu    queue");
        let ncpus = std::thread::available_parallelism().map_or(1, usize::from);
        for (cpu, w) in slots.iter().take(ncpus).enumerate() {
            println!("  {cpu:<5}  {w}");
        }
    }
    print_queue_irqs(&view.ports.iter().map(|p| p.name.clone()).collect::<Vec<_>>());
    println!("  port   xdp");
    for (p, m) in view.ports.iter().zip(&fwd.xdp_modes) {
        println!("  {:<5}  {m}", p.name);
        // (A driver known to break native AF_XDP was put in generic mode on purpose, and the
        // warnings above said why.)
        let chosen = p
            .driver
            .as_deref()
            .and_then(xfwd_dataplane::io::setup::drivers::lookup)
            .is_some_and(|q| q.queue_index == xfwd_dataplane::io::setup::drivers::QueueIndex::HardwareQueueId);
        if *m == XdpMode::Generic && cfg.workers.xdp_mode == XdpMode::Auto && !chosen {
            println!("xfwd: hint: {}: the driver has no native XDP; generic mode costs an skb per frame", p.name);
        }
    }
}

/// Prints what the supervisor has to say, each on its stream.
fn say(notices: Vec<Notice>) {
    for n in notices {
        match n {
            Notice::Info(s) => println!("xfwd: {s}"),
            Notice::Note(s) => xfwd::elog!("xfwd: {s}"),
            Notice::Warning(s) => xfwd::elog!("xfwd: warning: {s}"),
            Notice::Error(s) => xfwd::elog!("xfwd: error: {s}"),
        }
    }
}

/// Answers a SIGHUP or `xfwd reload`: a router reads its file again ([`reload`]); a bridge
/// reads nothing again. Tells the service manager and the one who asked.
fn answer_reload(
    fwd: &Forwarder,
    sig: &Signals,
    status: &str,
    router: Option<&mut (&PathBuf, RouterConfig)>,
    settings: &xfwd_config::router::Running,
) -> anyhow::Result<()> {
    sig.notify.reloading();
    let (outcome, said) = match router {
        Some((path, running)) => {
            let o = reload(fwd, path, running, settings);
            let said = if o.is_ok() { "reloaded" } else { "the last reload was refused (see the log)" };
            (o, said)
        }
        None => {
            let why = "a bridge reads nothing again (its ports, ageing, FDB size and worker options take a restart); nothing changed";
            println!("xfwd: SIGHUP: {why}");
            (Ok(format!("nothing to reload: {why}")), "nothing to reload")
        }
    };
    std::io::stdout().flush()?;
    sig.notify.ready(&format!("forwarding: {status}; {said}"));
    sig.reloads.finished(outcome);
    Ok(())
}

/// The service manager's watchdog: fed every quarter of its period while every thread goes
/// round its loop; a thread that has not for half of it stops the feeding (said once, in
/// `stuck_said`, until they all go round again). `fed`: when it was last fed.
fn feed_watchdog(view: &LiveView, sig: &Signals, status: &str, fed: &mut Instant, stuck_said: &mut bool) {
    let Some(period) = sig.notify.watchdog_period().filter(|p| fed.elapsed() >= *p / 4) else { return };
    *fed = Instant::now();
    let stuck = xfwd::notify::stuck(&view.heartbeats(), period / 2);
    if stuck.is_empty() {
        sig.notify.watchdog();
        if std::mem::take(stuck_said) {
            println!("xfwd: every thread goes round its loop again; the watchdog is fed again");
            sig.notify.status(&format!("forwarding: {status}"));
        }
    } else if !std::mem::replace(stuck_said, true) {
        let names: Vec<String> = stuck.iter().map(|(n, ms)| format!("{n} ({ms} ms)")).collect();
        let why = format!(
            "stuck: {} not gone round its loop for more than half the watchdog's {period:?}; the watchdog is no longer fed, so the service manager restarts xfwd",
            names.join(", ")
        );
        xfwd::elog!("xfwd: error: {why}");
        sig.notify.status(&why);
    }
}

/// Runs a started forwarder until a signal: prints the tables, serves the control socket,
/// prints stats, reloads on SIGHUP (router), follows the ports ([`Supervisor`]), and prints
/// the totals on the way out.
fn run(
    fwd: Forwarder,
    _control: control::ControlServer,
    cfg: &ForwarderConfig,
    (w, origins): (&WorkerArgs, &Origins),
    sig: &Signals,
    status: &str,
    mut router: Option<(&PathBuf, RouterConfig)>,
) -> anyhow::Result<ExitCode> {
    let view = fwd.view();
    let settings = running_settings(&fwd, cfg, origins);
    print_start(&fwd, &view, cfg);
    println!("xfwd: ready");
    std::io::stdout().flush()?;
    sig.notify.ready(&format!("forwarding: {status}"));

    let mut prev = view.report();
    let mut last = Instant::now();
    let mut last_check = Instant::now();
    let mut supervisor = Supervisor::new(&view);
    // The ports' changes as the kernel announces them (an MTU lowered is followed at once, not
    // at the next second's look); without the socket, every second only.
    let mut links = xfwd_dataplane::routes::rtnl::Rtnl::links()
        .map_err(|e| {
            xfwd::elog!("xfwd: warning: link notifications unavailable ({e}); ports are looked at every second")
        })
        .ok();
    let mut failed = false;
    let mut fed = Instant::now();
    let mut stuck_said = false;
    while !sig.stop.load(Ordering::Relaxed) {
        let tick = Duration::from_millis(20);
        let link_changed = match links.as_mut() {
            Some(l) => l.wait(tick),
            None => {
                std::thread::sleep(tick);
                false
            }
        };
        if !fwd.workers_alive() {
            xfwd::elog!("xfwd: error: a worker stopped unexpectedly; shutting down");
            failed = true;
            break;
        }
        if sig.reloads.asked.swap(false, Ordering::Relaxed) {
            answer_reload(&fwd, sig, status, router.as_mut(), &settings)?;
        }
        feed_watchdog(&view, sig, status, &mut fed, &mut stuck_said);
        let second = last_check.elapsed() >= Duration::from_secs(1);
        if second {
            last_check = Instant::now();
            say(supervisor.counters(&fwd, &view));
        }
        if second || link_changed {
            // A router's static tables built again with a port's new MAC or MTU.
            let rebuild = router.as_ref().map(|(_, c)| {
                move |f: &Forwarder| {
                    f.reload_router(&c.routes, &c.routes6, c.neighbors.clone(), c.neighbors6.clone(), c.limits)
                        .map_err(|e| e.to_string())
                }
            });
            match supervisor.ports(&fwd, &view, rebuild.as_ref().map(|r| r as Rebuild<'_>)) {
                Err(gone) => {
                    xfwd::elog!("xfwd: error: {gone}: the interface is gone; stopping (restart xfwd when it is back)");
                    failed = true;
                    break;
                }
                Ok(notices) => {
                    say(notices);
                    std::io::stdout().flush()?;
                }
            }
        }
        if w.stats.is_some_and(|every| last.elapsed() >= every) {
            let now = view.report();
            let dt = last.elapsed();
            let stamp = xfwd::log::stamp();
            for (p, before) in now.ports.iter().zip(&prev.ports) {
                println!("{stamp}{}", render::port_line(p, Some(before), dt));
            }
            std::io::stdout().flush()?;
            prev = now;
            last = Instant::now();
        }
    }
    sig.notify.stopping();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use xfwd_dataplane::io::PollMode;

    /// The file's layer for `text` (the interface part is fixed).
    fn file(options: &str) -> Layer {
        let text = format!("[[interface]]\nname = \"lo\"\naddresses = [\"198.18.99.1/24\"]\n{options}");
        RouterConfig::parse(std::path::Path::new("router.toml"), &text, |_| unreachable!()).unwrap().options
    }

    fn flags(args: &[&str]) -> WorkerFlags {
        let cli = Cli::try_parse_from(["xfwd", "router", "--config", "r.toml"].iter().chain(args)).unwrap();
        let Cmd::Router(r) = cli.cmd else { unreachable!() };
        r.workers.options
    }

    #[test]
    fn defaults_then_the_file_then_the_flags_each_value_remembering_its_source() {
        let f = file("[workers]\nqueues = 2\npoll = \"busy\"\n[aqm]\ntarget = \"2ms\"\n");
        let (o, from) = WorkerOptions::merge(&[&f, &flags(&["--queues", "3", "--huge-pages"]).layer()]);
        assert_eq!(
            (o.queues, o.poll, o.aqm_target, o.huge_pages),
            (Some(3), PollMode::Busy, Duration::from_millis(2), true)
        );
        assert_eq!(o.aqm_interval, Duration::from_millis(100), "the table's default");
        assert_eq!(*from.of(Opt::Queues), Source::Flag);
        assert_eq!(*from.of(Opt::Poll), Source::File { path: "router.toml".into(), line: 6, col: 8 });
        assert_eq!(*from.of(Opt::AqmInterval), Source::Default);
    }

    #[test]
    fn a_refusal_names_the_file_place_or_the_flag_the_user_wrote() {
        let f = file("[workers]\nxdp_mode = \"native\"\nsockets = \"per-cpu\"\n");
        let e = worker_options(&flags(&[]), Some(&f), &[]).unwrap_err().to_string();
        assert!(e.starts_with("router.toml:6:11: workers.sockets per-cpu with workers.xdp_mode native:"), "{e}");
        let e = worker_options(&flags(&["--sockets", "per-cpu"]), Some(&f), &[]).unwrap_err().to_string();
        assert!(e.starts_with("router.toml:5:12: --sockets per-cpu with workers.xdp_mode native:"), "{e}");
        let e = worker_options(&flags(&["--aqm-target", "1s"]), None, &[]).unwrap_err().to_string();
        assert!(e.starts_with("--aqm-target (1s) must be below --aqm-interval (100ms)"), "{e}");
        let e = worker_options(&flags(&[]), Some(&file("[aqm]\ntarget = \"200ms\"\n")), &[]).unwrap_err().to_string();
        assert!(e.starts_with("router.toml:5:10: aqm.target (200ms) must be below aqm.interval (100ms)"), "{e}");
    }
}
