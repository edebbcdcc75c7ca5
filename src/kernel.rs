//! `xfwd kernel …`: the same configuration applied to the kernel's own forwarding path, so that
//! the kernel and xfwd are compared on one file.
//!
//! Everything is done with iproute2 commands, printed before they run (they are what a user
//! would type), fed to one `ip -batch` process so that a full routes file applies quickly. The
//! command stays in the foreground and undoes what it did on SIGINT/SIGTERM; `--keep` applies,
//! prints and exits; `xfwd kernel undo …` removes it after a run that was killed. The previous
//! value of every forwarding switch it turns on is kept under /run/xfwd for the undo.
//!
//! IPv6 is switched on per interface, as the kernel allows since 6.17: `forwarding` (the
//! interface acts as a router: advertisements with the Router flag, no solicitations of
//! routers) and `force_forwarding` (forwards what arrives on it whatever the global switch
//! says) on each interface with IPv6 addresses; on kernels without `force_forwarding` the
//! global `all.forwarding` instead, which forwards between all interfaces. IPv6 addresses are
//! added without duplicate address detection (`nodad`), as xfwd uses its own at once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use xfwd_config::router::RouterConfig;
use xfwd_dataplane::l3::RouteTarget;

/// Where the previous `ip_forward` is kept for the undo, per configuration file.
fn state_path(config: &Path) -> PathBuf {
    let key: String = std::fs::canonicalize(config)
        .unwrap_or_else(|_| config.to_owned())
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    PathBuf::from(format!("/run/xfwd/kernel-router{key}.state"))
}

/// Options of `xfwd kernel`.
#[derive(clap::Subcommand, Debug)]
pub enum KernelCmd {
    /// Apply a router file to the kernel: addresses, routes, static neighbours, ip_forward.
    Router {
        /// The same file `xfwd router` takes (IPv4 and IPv6).
        #[arg(long)]
        config: PathBuf,
        /// Apply, print and exit instead of staying in the foreground.
        #[arg(long)]
        keep: bool,
    },
    /// Build the Linux bridge equivalent of `xfwd bridge PORTS…`.
    Bridge {
        /// Ports to bridge; or from --config.
        #[arg(required_unless_present = "config", num_args = 2.., conflicts_with = "config")]
        ports: Vec<String>,
        /// The bridge file `xfwd bridge --config` reads: its ports and ageing (fdb_size and the
        /// worker options have no kernel counterpart and are left out, said).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The bridge device's name.
        #[arg(long, default_value = "xfwdbr0")]
        name: String,
        /// Apply, print and exit instead of staying in the foreground.
        #[arg(long)]
        keep: bool,
    },
    /// Remove what `xfwd kernel router|bridge --keep` (or a killed run) left.
    Undo {
        #[command(subcommand)]
        what: UndoCmd,
    },
}

/// What to undo.
#[derive(clap::Subcommand, Debug)]
pub enum UndoCmd {
    /// Remove a router file's addresses, routes and neighbours; restore ip_forward.
    Router {
        /// The file that was applied.
        #[arg(long)]
        config: PathBuf,
    },
    /// Delete the bridge device (its ports are released).
    Bridge {
        /// The bridge device's name.
        #[arg(long, default_value = "xfwdbr0")]
        name: String,
    },
}

/// The `ip -batch` lines that apply `c`, and those that undo them (in reverse order).
pub fn router_commands(c: &RouterConfig) -> (Vec<String>, Vec<String>) {
    let mut apply = Vec::new();
    let mut undo = Vec::new();
    for i in &c.interfaces {
        for (a, l) in &i.addresses {
            apply.push(format!("addr add {a}/{l} dev {}", i.name));
            undo.push(format!("addr del {a}/{l} dev {}", i.name));
        }
        for (a, l) in &i.addresses6 {
            apply.push(format!("addr add {a}/{l} dev {} nodad", i.name));
            undo.push(format!("addr del {a}/{l} dev {}", i.name));
        }
    }
    // An IPv4 route through an IPv6 gateway (RFC 5549) says so to `ip`: `via inet6`.
    let v4 = c.routes.iter().map(|(p, t)| {
        (p.to_string(), t.map_gw(|gw| if gw.is_ipv6() { format!("inet6 {gw}") } else { gw.to_string() }))
    });
    let v6 = c.routes6.iter().map(|(p, t)| (p.to_string(), t.map_gw(|gw| gw.to_string())));
    for (prefix, target) in v4.chain(v6) {
        let route = match target {
            RouteTarget::Via { gw, dev: Some(port) } => format!("{prefix} via {gw} dev {}", c.port_name(port)),
            RouteTarget::Via { gw, dev: None } => format!("{prefix} via {gw}"),
            RouteTarget::Dev(port) => format!("{prefix} dev {}", c.port_name(port)),
        };
        apply.push(format!("route add {route}"));
        undo.push(format!("route del {route}"));
    }
    for (ip, mac) in &c.neighbors6 {
        if let Some(dev) = c
            .interfaces
            .iter()
            .find(|i| i.addresses6.iter().any(|(a, l)| xfwd_dataplane::l3::Prefix6::truncate(*a, *l).contains(*ip)))
        {
            apply.push(format!("neigh replace {ip} lladdr {mac} dev {} nud permanent", dev.name));
            undo.push(format!("neigh del {ip} dev {}", dev.name));
        }
    }
    for (ip, mac) in &c.neighbors {
        if let Some(dev) = c
            .interfaces
            .iter()
            .find(|i| i.addresses.iter().any(|(a, l)| xfwd_dataplane::l3::Prefix::truncate(*a, *l).contains(*ip)))
        {
            apply.push(format!("neigh replace {ip} lladdr {mac} dev {} nud permanent", dev.name));
            undo.push(format!("neigh del {ip} dev {}", dev.name));
        }
    }
    undo.reverse();
    (apply, undo)
}

/// Feeds `lines` to `ip -batch -` (with `-force`: keep going past an error, as an undo must),
/// in network namespace `netns` when one is named (`ip -n NETNS`).
pub fn ip_batch_in(netns: Option<&str>, lines: &[String], force: bool) -> Result<()> {
    batch_in("ip", netns, lines, force)
}

/// Runs `text` (commands a line) through `ip -batch -` in `netns`: for a batch too large to
/// hold as lines (a full table).
pub fn ip_batch_text_in(netns: Option<&str>, text: &str, force: bool) -> Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    run_batch("ip", netns, force, |w| w.write_all(text.as_bytes()))
}

/// Runs `lines` through `tool -batch -` (`ip`, or `bridge` for FDB entries).
fn batch_in(tool: &str, netns: Option<&str>, lines: &[String], force: bool) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    run_batch(tool, netns, force, |w| {
        for l in lines {
            writeln!(w, "{l}")?;
        }
        Ok(())
    })
}

/// Runs `tool -batch -` with what `write` writes to its input.
fn run_batch(
    tool: &str,
    netns: Option<&str>,
    force: bool,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut args = vec!["-batch", "-"];
    if force {
        args.insert(0, "-force");
    }
    if let Some(ns) = netns {
        args.splice(0..0, ["-n", ns]);
    }
    let mut child = Command::new(tool)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(if force { Stdio::null() } else { Stdio::piped() })
        .spawn()
        .with_context(|| format!("running {tool} (iproute2)"))?;
    // A tool that stops at an error closes its input: what it said is the error, not the pipe.
    let wrote = {
        let mut stdin = std::io::BufWriter::new(child.stdin.take().context("ip stdin")?);
        write(&mut stdin).and_then(|()| stdin.flush())
    };
    let out = child.wait_with_output()?;
    if !out.status.success() && !force {
        bail!("{tool} -batch: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    wrote.with_context(|| format!("writing to {tool} -batch"))
}

/// The `ip` command that gives bridge port `port` the settings `pol`, where any differ from a
/// Linux bridge port's defaults.
fn bridge_port_command(port: &str, pol: &xfwd_dataplane::l2::PortPolicy) -> Option<String> {
    // Storm control is not the kernel's (said where the bridge is made).
    let kernel = xfwd_dataplane::l2::PortPolicy { storm_limit: None, ..*pol };
    if kernel.is_default() {
        return None;
    }
    let on = |b: bool| if b { "on" } else { "off" };
    Some(format!(
        "link set {port} type bridge_slave learning {} flood {} mcast_flood {} bcast_flood {} isolated {}",
        on(pol.learning),
        on(pol.flood),
        on(pol.mcast_flood),
        on(pol.bcast_flood),
        on(pol.isolated)
    ))
}

fn ip_batch(lines: &[String], force: bool) -> Result<()> {
    ip_batch_in(None, lines, force)
}

/// A sysctl's key as `sysctl` prints it (`net/ipv6/conf/eth0.100/forwarding` keeps its
/// slashes: an interface name may hold a dot).
fn sysctl_get(key: &str) -> Result<String> {
    let path = format!("/proc/sys/{key}");
    Ok(std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?.trim().to_owned())
}

fn sysctl_set(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{key}");
    std::fs::write(&path, value).with_context(|| format!("writing {path}"))
}

/// The forwarding switches a router file turns on (see the module documentation), given
/// whether the kernel has a key (`has`).
pub fn forwarding_switches(c: &RouterConfig, has: impl Fn(&str) -> bool) -> Vec<String> {
    let mut keys = vec!["net/ipv4/ip_forward".to_owned()];
    let mut global = false;
    for i in c.interfaces.iter().filter(|i| !i.addresses6.is_empty()) {
        keys.push(format!("net/ipv6/conf/{}/forwarding", i.name));
        let force = format!("net/ipv6/conf/{}/force_forwarding", i.name);
        if has(&force) {
            keys.push(force);
        } else {
            global = true;
        }
    }
    if global {
        keys.push("net/ipv6/conf/all/forwarding".to_owned());
    }
    keys
}

/// Saved switches: `key=value` lines; a file from before IPv6 holds `ip_forward`'s value alone.
fn parse_state(text: &str) -> Vec<(String, String)> {
    let t = text.trim();
    if !t.is_empty() && !t.contains('=') {
        return vec![("net/ipv4/ip_forward".to_owned(), t.to_owned())];
    }
    t.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect()
}

/// Restores saved switches, printing each.
fn restore(saved: &[(String, String)]) -> Result<()> {
    let mut first = Ok(());
    for (k, v) in saved.iter().rev() {
        let r = sysctl_set(k, v);
        println!("  sysctl -w {k}={v}");
        if first.is_ok() {
            first = r;
        }
    }
    first
}

fn print_commands(lines: &[String], limit: usize) {
    for l in lines.iter().take(limit) {
        println!("  ip {l}");
    }
    if lines.len() > limit {
        println!("  … and {} more (the same shape)", lines.len() - limit);
    }
}

fn signal_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}

fn wait(stop: &AtomicBool) -> Result<()> {
    println!("xfwd: ready");
    std::io::stdout().flush()?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Refuses a file whose addresses or routes the kernel has already: applying it would change
/// them, and undoing it would remove what xfwd did not make.
fn refuse_conflicts(c: &RouterConfig) -> Result<()> {
    let usage = |m: String| anyhow::Error::from(crate::UsageError(m));
    let addrs =
        String::from_utf8_lossy(&Command::new("ip").args(["-o", "-4", "addr", "show"]).output()?.stdout).into_owned();
    for i in &c.interfaces {
        for (a, l) in &i.addresses {
            if addrs.lines().any(|line| line.contains(&format!(" inet {a}/"))) {
                return Err(usage(format!("{a} is already configured in the kernel ({}/{l} in the file); remove it first, xfwd kernel only removes what it made", a)));
            }
        }
    }
    if !c.routes.is_empty() {
        let routes = String::from_utf8_lossy(
            &Command::new("ip").args(["-4", "route", "show", "table", "main"]).output()?.stdout,
        )
        .into_owned();
        let present: std::collections::HashSet<&str> =
            routes.lines().filter_map(|l| l.split_whitespace().next()).collect();
        for (prefix, _) in &c.routes {
            let p = prefix.to_string();
            let key = if prefix.prefix_len() == 32 {
                p.trim_end_matches("/32").to_owned()
            } else if prefix.is_default() {
                "default".to_owned()
            } else {
                p
            };
            if present.contains(key.as_str()) {
                return Err(usage(format!("a route for {prefix} exists already in the kernel; remove it first")));
            }
        }
    }
    Ok(())
}

fn load(config: &Path) -> Result<RouterConfig> {
    let c = crate::config_file::load(config)?;
    c.check_interfaces(xfwd_dataplane::io::setup::port::exists)?;
    Ok(c)
}

/// `xfwd kernel router`: the configuration applied to the kernel (addresses, routes,
/// neighbours, forwarding on), undone on a signal unless `keep`.
fn router(config: &Path, keep: bool) -> Result<ExitCode> {
    let c = load(config)?;
    refuse_conflicts(&c)?;
    let (apply, undo) = router_commands(&c);
    let switches = forwarding_switches(&c, |k| Path::new("/proc/sys").join(k).exists());
    let previous: Vec<(String, String)> =
        switches.iter().map(|k| Ok((k.clone(), sysctl_get(k)?))).collect::<Result<_>>()?;
    println!("xfwd: kernel router from {}:", config.display());
    print_commands(&apply, 40);
    for (k, was) in &previous {
        println!("  sysctl -w {k}=1   (was {was})");
    }
    // Signals first: a Ctrl-C during a long apply must still lead to the undo.
    let stop = signal_flag()?;
    std::fs::create_dir_all("/run/xfwd")?;
    let state = state_path(config);
    // A second --keep must not overwrite the value saved by the first.
    if !state.exists() {
        let text: String = previous.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(&state, text)?;
    }
    if let Err(e) = ip_batch(&apply, false) {
        // Everything in the file was checked absent before: removing it all is safe.
        let _ = ip_batch(&undo, true);
        let _ = std::fs::remove_file(&state);
        return Err(e.context("applying the configuration (undone)"));
    }
    for (k, _) in &previous {
        sysctl_set(k, "1")?;
    }
    if keep {
        println!("xfwd: applied; remove with: xfwd kernel undo router --config {}", config.display());
        return Ok(ExitCode::SUCCESS);
    }
    wait(&stop)?;
    println!("xfwd: undoing:");
    print_commands(&undo, 40);
    let undone = ip_batch(&undo, true);
    restore(&previous)?;
    let _ = std::fs::remove_file(&state);
    undone?;
    Ok(ExitCode::SUCCESS)
}

/// `xfwd kernel bridge`: a kernel bridge over `ports` as xfwd's bridge would be (the file's
/// ageing, port settings and static stations), removed on a signal unless `keep`.
fn bridge(ports: Vec<String>, config: Option<&Path>, name: &str, keep: bool) -> Result<ExitCode> {
    let file = config.map(crate::config_file::load_bridge).transpose()?;
    let ports = file.as_ref().map_or(ports, |f| f.port_names());
    // The kernel's default ageing is xfwd's too: 300 s.
    let ageing = file.as_ref().and_then(|f| f.ageing).unwrap_or(std::time::Duration::from_secs(300));
    if let Some(n) = file.as_ref().and_then(|f| f.fdb_size) {
        println!(
            "xfwd: note: fdb_size = {n} is not applied to the kernel's bridge (its fdb_max_learned, Linux 6.8+, is left as it is: unbounded unless set)"
        );
    }
    for (i, p) in ports.iter().enumerate() {
        let usage = |m: String| anyhow::Error::from(crate::UsageError(m));
        if !xfwd_dataplane::io::setup::port::exists(p) {
            return Err(usage(xfwd_dataplane::io::setup::port::not_found(p).to_string()));
        }
        if ports[..i].contains(p) {
            return Err(usage(format!("{p}: given more than once; name each port once")));
        }
    }
    if xfwd_dataplane::io::setup::port::exists(name) {
        return Err(anyhow::Error::from(crate::UsageError(format!(
            "{name} exists already; pick another --name (xfwd kernel only removes what it made)"
        ))));
    }
    let stop = signal_flag()?;
    let mut apply = vec![format!("link add {name} type bridge ageing_time {}", ageing.as_millis() / 10)];
    apply.extend(ports.iter().map(|p| format!("link set {p} master {name}")));
    // Each port's settings as xfwd applies them (l2::policy), and the static stations,
    // sticky so that learning never moves them, as xfwd's never move.
    let settings = file.as_ref().map(|f| (f.port_settings.clone(), f.statics.clone())).unwrap_or_default();
    apply.extend(ports.iter().zip(&settings.0).filter_map(|(p, pol)| bridge_port_command(p, pol)));
    apply.push(format!("link set {name} up"));
    let fdb: Vec<String> =
        settings.1.iter().map(|(mac, i)| format!("fdb add {mac} dev {} master static sticky", ports[*i])).collect();
    let undo = vec![format!("link del {name}")];
    println!("xfwd: kernel bridge {name}:");
    // Storm control is a switch's setting the kernel's bridge does not have (its
    // nearest, a tc policer on a port's ingress, cannot tell flooded frames from the
    // rest): said, so that the comparison says the kernel path floods without limit.
    for (p, pol) in ports.iter().zip(&settings.0) {
        if let Some(n) = pol.storm_limit {
            println!(
                "  note: {p}: storm_control = {n} is not applied: the kernel's bridge has no storm control (its floods have no limit)"
            );
        }
    }
    print_commands(&apply, 40);
    for l in fdb.iter().take(40) {
        println!("  bridge {l}");
    }
    if let Err(e) = ip_batch(&apply, false).and_then(|()| batch_in("bridge", None, &fdb, false)) {
        ip_batch(&undo, true)?;
        return Err(e.context("building the bridge (undone)"));
    }
    if keep {
        println!("xfwd: applied; remove with: xfwd kernel undo bridge --name {name}");
        return Ok(ExitCode::SUCCESS);
    }
    wait(&stop)?;
    println!("xfwd: undoing:");
    print_commands(&undo, 40);
    ip_batch(&undo, true)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `xfwd kernel …`.
pub fn run(cmd: KernelCmd) -> Result<ExitCode> {
    match cmd {
        KernelCmd::Router { config, keep } => router(&config, keep),
        KernelCmd::Bridge { ports, config, name, keep } => bridge(ports, config.as_deref(), &name, keep),
        KernelCmd::Undo { what: UndoCmd::Router { config } } => {
            let c = crate::config_file::load(&config)?;
            let (_, undo) = router_commands(&c);
            print_commands(&undo, 40);
            ip_batch(&undo, true)?;
            let state = state_path(&config);
            // Without a saved state (removed, or never written), every switch goes off.
            let saved = std::fs::read_to_string(&state).map(|t| parse_state(&t)).unwrap_or_else(|_| {
                forwarding_switches(&c, |k| Path::new("/proc/sys").join(k).exists())
                    .into_iter()
                    .map(|k| (k, "0".to_owned()))
                    .collect()
            });
            restore(&saved)?;
            let _ = std::fs::remove_file(&state);
            Ok(ExitCode::SUCCESS)
        }
        KernelCmd::Undo { what: UndoCmd::Bridge { name } } => {
            let undo = vec![format!("link del {name}")];
            print_commands(&undo, 1);
            ip_batch(&undo, true)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_becomes_iproute2_commands_and_forwarding_is_switched_per_interface() {
        let text = "[[interface]]\nname = \"eth5\"\naddresses = [\"2001:2:0:10::2/64\"]\n\n[[interface]]\nname = \"eth4\"\naddresses = [\"198.18.30.1/24\", \"2001:2:0:30::1/64\"]\n\n[[interface]]\nname = \"eth6\"\naddresses = [\"198.18.60.1/24\"]\n\n[[route]]\nprefix = \"2001:2:0:1000::/52\"\nvia = \"2001:2:0:30::2\"\n\n[[route]]\nprefix = \"2001:2:0:2000::/52\"\nvia = \"fe80::2\"\ndev = \"eth4\"\n\n[[route]]\nprefix = \"2001:2:0:3000::/52\"\ndev = \"eth5\"\n\n[[route]]\nprefix = \"198.19.5.0/24\"\nvia = \"fe80::2\"\ndev = \"eth4\"\n\n[[route]]\nprefix = \"198.19.6.0/24\"\nvia = \"2001:2:0:30::2\"\n\n[[neighbor]]\nip = \"2001:2:0:30::2\"\nmac = \"02:00:00:00:00:02\"\n";
        let c = RouterConfig::parse(Path::new("r.toml"), text, |_| panic!("no routes file here")).unwrap();
        let (apply, undo) = router_commands(&c);
        assert_eq!(
            apply,
            vec![
                "addr add 2001:2:0:10::2/64 dev eth5 nodad",
                "addr add 198.18.30.1/24 dev eth4",
                "addr add 2001:2:0:30::1/64 dev eth4 nodad",
                "addr add 198.18.60.1/24 dev eth6",
                // IPv4 through IPv6 gateways (RFC 5549).
                "route add 198.19.5.0/24 via inet6 fe80::2 dev eth4",
                "route add 198.19.6.0/24 via inet6 2001:2:0:30::2",
                "route add 2001:2:0:1000::/52 via 2001:2:0:30::2",
                "route add 2001:2:0:2000::/52 via fe80::2 dev eth4",
                "route add 2001:2:0:3000::/52 dev eth5",
                "neigh replace 2001:2:0:30::2 lladdr 02:00:00:00:00:02 dev eth4 nud permanent",
            ]
        );
        assert_eq!(undo.first().map(String::as_str), Some("neigh del 2001:2:0:30::2 dev eth4"));
        assert_eq!(undo.last().map(String::as_str), Some("addr del 2001:2:0:10::2/64 dev eth5"));
        // Per interface with IPv6 addresses (eth6 has none), force_forwarding where it exists.
        assert_eq!(
            forwarding_switches(&c, |_| true),
            vec![
                "net/ipv4/ip_forward",
                "net/ipv6/conf/eth5/forwarding",
                "net/ipv6/conf/eth5/force_forwarding",
                "net/ipv6/conf/eth4/forwarding",
                "net/ipv6/conf/eth4/force_forwarding",
            ]
        );
        // Before 6.17: the global switch instead.
        assert_eq!(
            forwarding_switches(&c, |_| false),
            vec![
                "net/ipv4/ip_forward",
                "net/ipv6/conf/eth5/forwarding",
                "net/ipv6/conf/eth4/forwarding",
                "net/ipv6/conf/all/forwarding",
            ]
        );
        assert_eq!(parse_state("0\n"), vec![("net/ipv4/ip_forward".to_owned(), "0".to_owned())], "an old state file");
        assert_eq!(parse_state("net/ipv4/ip_forward=1\nnet/ipv6/conf/eth4/forwarding=0\n").len(), 2);
    }

    #[test]
    fn router_file_becomes_iproute2_commands_and_their_undo() {
        let text = "[[interface]]\nname = \"eth5\"\naddresses = [\"192.168.10.2/24\"]\n\n[[interface]]\nname = \"eth4\"\naddresses = [\"192.168.30.1/24\"]\n\n[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"192.168.30.2\"\n\n[[route]]\nprefix = \"172.16.0.0/12\"\ndev = \"eth4\"\n\n[[neighbor]]\nip = \"192.168.30.2\"\nmac = \"02:00:00:00:00:01\"\n";
        let c = RouterConfig::parse(Path::new("r.toml"), text, |_| panic!("no routes file here")).unwrap();
        let (apply, undo) = router_commands(&c);
        assert_eq!(
            apply,
            vec![
                "addr add 192.168.10.2/24 dev eth5",
                "addr add 192.168.30.1/24 dev eth4",
                "route add 10.0.0.0/8 via 192.168.30.2",
                "route add 172.16.0.0/12 dev eth4",
                "neigh replace 192.168.30.2 lladdr 02:00:00:00:00:01 dev eth4 nud permanent",
            ]
        );
        assert_eq!(
            undo,
            vec![
                "neigh del 192.168.30.2 dev eth4",
                "route del 172.16.0.0/12 dev eth4",
                "route del 10.0.0.0/8 via 192.168.30.2",
                "addr del 192.168.30.1/24 dev eth4",
                "addr del 192.168.10.2/24 dev eth5",
            ]
        );
    }
}
