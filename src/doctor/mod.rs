//! `xfwd doctor PORT...`: what will work on these ports and why, before anything else runs.
//!
//! It changes nothing: it reads sysfs and /proc, runs `ethtool -i/-l/-k` and `ip -d -j link`
//! (all read-only), and asks the kernel's `netdev` netlink family what each driver advertises.
//! [`facts`] parses what is read, [`quirks`] knows what drivers do that they do not advertise,
//! [`assess`](mod@assess) turns facts into findings; this module reads and prints.
//!
//! Exit codes: 0 when xfwd can run on these ports, 1 when it cannot (an `error` finding), 2 for
//! bad usage (a port that does not exist).

pub mod assess;
pub mod facts;

pub use xfwd_dataplane::io::setup::drivers as quirks;

use std::fmt::Write as _;
use std::process::{Command, ExitCode};

use anyhow::Result;
use xfwd_dataplane::io::program::netdev;

use crate::UsageError;
use assess::{assess, Diagnosis};
use facts::{Irq, PortFacts, SystemFacts};

/// Options of `xfwd doctor`.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// The ports xfwd is to drive, e.g. eth4 eth5.
    #[arg(required = true)]
    pub ports: Vec<String>,
    /// Print JSON (ports, system, findings) instead of text.
    #[arg(long)]
    pub json: bool,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

fn read_num<T: std::str::FromStr>(path: &str) -> Option<T> {
    read(path)?.parse().ok()
}

/// A command's standard output when it succeeds.
fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn count_queues(name: &str, prefix: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with(prefix)).count())
        .unwrap_or(0) as u32
}

fn cpu_list(path: &str) -> Option<Vec<usize>> {
    let text = read(path)?;
    if text.is_empty() {
        return Some(Vec::new());
    }
    xfwd_config::parse_cores(&text).ok()
}

/// The port's interrupts, with their handlers' names: those its NAPI instances name, those of
/// its PCI device (`msi_irqs`), and those whose handler's name holds the interface's name.
pub fn port_irqs(name: &str, napi_irqs: &[u32], msi_irqs: &[u32], interrupts: &[facts::IrqLine]) -> Vec<(u32, String)> {
    let mut wanted: Vec<u32> = napi_irqs.iter().chain(msi_irqs).copied().collect();
    wanted.extend(interrupts.iter().filter(|l| facts::irq_belongs_to(&l.name, name)).map(|l| l.irq));
    wanted.sort_unstable();
    wanted.dedup();
    wanted
        .into_iter()
        .map(|irq| (irq, interrupts.iter().find(|l| l.irq == irq).map_or_else(String::new, |l| l.name.clone())))
        .collect()
}

/// [`port_irqs`] with the CPUs each may run on.
fn irqs_of(name: &str, napi_irqs: &[u32], interrupts: &[facts::IrqLine]) -> Vec<Irq> {
    let msi: Vec<u32> = std::fs::read_dir(format!("/sys/class/net/{name}/device/msi_irqs"))
        .map(|d| d.filter_map(Result::ok).filter_map(|e| e.file_name().to_string_lossy().parse().ok()).collect())
        .unwrap_or_default();
    port_irqs(name, napi_irqs, &msi, interrupts)
        .into_iter()
        .map(|(irq, name)| Irq {
            irq,
            name,
            cpus: cpu_list(&format!("/proc/irq/{irq}/smp_affinity_list")).unwrap_or_default(),
            effective: cpu_list(&format!("/proc/irq/{irq}/effective_affinity_list")),
        })
        .collect()
}

/// The RX queue an interrupt serves, from its handler's name, where the driver names it so:
/// `eth4-rx-0`, `eth4-TxRx-3`, `ice-eth4-TxRx-3`, `i40e-eth4-TxRx-1` (the number after the
/// interface's name and a `rx`/`TxRx` word). `None` for any other name.
pub fn queue_of_irq_name(name: &str, ifname: &str) -> Option<u32> {
    let words: Vec<&str> = name.split('-').collect();
    let at = words.iter().position(|w| *w == ifname)?;
    match &words[at + 1..] {
        [kind, n] if kind.eq_ignore_ascii_case("rx") || kind.eq_ignore_ascii_case("txrx") => n.parse().ok(),
        _ => None,
    }
}

/// One RX queue's interrupt and the CPUs it may run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueIrq {
    /// The queue.
    pub queue: u32,
    /// Its interrupt.
    pub irq: Irq,
}

impl QueueIrq {
    /// The one CPU the interrupt runs on: its effective affinity, else the CPUs it may run on,
    /// when that is a single CPU; `None` when it may move between several.
    pub fn cpu(&self) -> Option<usize> {
        match self.irq.effective.as_deref().unwrap_or(&self.irq.cpus) {
            [one] => Some(*one),
            _ => None,
        }
    }
}

/// Each RX queue's interrupt on `ifname`, in queue order: from the kernel's queue → NAPI → IRQ
/// links where it has them (Linux 6.8+), else from the handlers' names. Empty for a device
/// without interrupts of its own (veth) or a driver that names them otherwise.
pub fn queue_irqs(ifname: &str) -> Vec<QueueIrq> {
    let interrupts = facts::parse_interrupts(&read("/proc/interrupts").unwrap_or_default());
    let ifindex: u32 = read_num(&format!("/sys/class/net/{ifname}/ifindex")).unwrap_or(0);
    let mut by_queue: Vec<(u32, u32)> = Vec::new();
    if let Some(mut nl) = netdev::Netdev::open().ok().flatten() {
        if let (Ok(queues), Ok(napis)) = (nl.queues(ifindex), nl.napis(ifindex)) {
            for q in queues.iter().filter(|q| q.rx) {
                if let Some(irq) = q.napi_id.and_then(|id| napis.iter().find(|n| n.id == id)).and_then(|n| n.irq) {
                    by_queue.push((q.id, irq));
                }
            }
        }
    }
    if by_queue.is_empty() {
        by_queue = interrupts.iter().filter_map(|l| queue_of_irq_name(&l.name, ifname).map(|q| (q, l.irq))).collect();
    }
    by_queue.sort_unstable();
    by_queue
        .into_iter()
        .map(|(queue, irq)| QueueIrq {
            queue,
            irq: Irq {
                irq,
                name: interrupts.iter().find(|l| l.irq == irq).map_or_else(String::new, |l| l.name.clone()),
                cpus: cpu_list(&format!("/proc/irq/{irq}/smp_affinity_list")).unwrap_or_default(),
                effective: cpu_list(&format!("/proc/irq/{irq}/effective_affinity_list")),
            },
        })
        .collect()
}

/// Queue *i*'s interrupt CPU for queues 0, 1, … in order, as far as each queue's interrupt is
/// known and pinned to one CPU, or why there is none to give.
pub fn irq_cores(irqs: &[QueueIrq]) -> Result<Vec<usize>, String> {
    if irqs.is_empty() {
        return Err("has no interrupt per RX queue that the kernel names (a virtual device has none)".into());
    }
    let mut cpus = Vec::new();
    for (i, q) in irqs.iter().enumerate() {
        if q.queue != i as u32 {
            break;
        }
        match q.cpu() {
            Some(c) => cpus.push(c),
            None if cpus.is_empty() => {
                return Err(format!(
                    "queue {i}'s interrupt {} may run on CPUs {:?}, not one: pin it first (echo CPU > /proc/irq/{}/smp_affinity_list)",
                    q.irq.irq, q.irq.cpus, q.irq.irq
                ))
            }
            None => break,
        }
    }
    if cpus.is_empty() {
        return Err("has no interrupt for queue 0".into());
    }
    Ok(cpus)
}

/// Whether irqbalance runs (it may move interrupts under the workers).
pub fn irqbalance_running() -> bool {
    std::fs::read_dir("/proc").is_ok_and(|d| {
        d.filter_map(Result::ok).any(|e| read(&format!("{}/comm", e.path().display())).as_deref() == Some("irqbalance"))
    })
}

/// Reads everything about one port that exists.
fn gather_port(name: &str, nl: Option<&mut netdev::Netdev>, interrupts: &[facts::IrqLine]) -> PortFacts {
    let sys = |a: &str| format!("/sys/class/net/{name}/{a}");
    let ifindex = read_num(&sys("ifindex")).unwrap_or(0);
    let flags = read(&sys("flags")).and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok()).unwrap_or(0);
    let (features, queues, napis) = match nl {
        Some(nl) => (nl.dev(ifindex).ok(), nl.queues(ifindex).ok(), nl.napis(ifindex).ok()),
        None => (None, None, None),
    };
    let napi_irqs: Vec<u32> = napis.iter().flatten().filter_map(|n| n.irq).collect();
    let k = output("ethtool", &["-k", name]);
    PortFacts {
        name: name.to_owned(),
        ifindex,
        driver: output("ethtool", &["-i", name]).as_deref().and_then(facts::parse_ethtool_i),
        rx_queues: count_queues(name, "rx-"),
        tx_queues: count_queues(name, "tx-"),
        channels: output("ethtool", &["-l", name]).as_deref().and_then(facts::parse_ethtool_l),
        mtu: read_num(&sys("mtu")).unwrap_or(0),
        link: output("ip", &["-d", "-j", "link", "show", "dev", name]).as_deref().and_then(facts::parse_ip_link_json),
        up: flags & libc::IFF_UP as u32 != 0,
        carrier: read(&sys("carrier")).as_deref() == Some("1"),
        features,
        queues,
        napis,
        rx_vlan_offload: k.as_deref().and_then(|k| facts::parse_ethtool_k(k, "rx-vlan-offload")),
        irqs: irqs_of(name, &napi_irqs, interrupts),
        napi_defer_hard_irqs: read_num(&sys("napi_defer_hard_irqs")),
        gro_flush_timeout: read_num(&sys("gro_flush_timeout")),
    }
}

fn gather_system() -> SystemFacts {
    let irqbalance = irqbalance_running();
    use xfwd_dataplane::io::probe::frame_gen::{self, GenError};
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let (live_frames, live_frames_said) = match root.then(frame_gen::live_frames) {
        // Loading the probe needs privileges (libbpf would also say why on stderr).
        None => (None, Some("not asked: needs root".into())),
        Some(Ok(())) => (Some(true), None),
        Some(Err(GenError::LiveFramesRefused(said))) => (Some(false), Some(said)),
        Some(Err(e)) => (None, Some(e.to_string())),
    };
    SystemFacts {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        isolated: cpu_list("/sys/devices/system/cpu/isolated").unwrap_or_default(),
        irqbalance,
        busy_poll: read_num("/proc/sys/net/core/busy_poll"),
        busy_read: read_num("/proc/sys/net/core/busy_read"),
        huge_pages: facts::parse_meminfo(&read("/proc/meminfo").unwrap_or_default()),
        kernel: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
        live_frames,
        live_frames_said,
    }
}

/// Reads the facts of `ports` and the system and diagnoses them.
pub fn diagnose(ports: &[String]) -> Result<Diagnosis> {
    for (i, p) in ports.iter().enumerate() {
        if !xfwd_dataplane::io::setup::port::exists(p) {
            return Err(UsageError(xfwd_dataplane::io::setup::port::not_found(p).to_string()).into());
        }
        if ports[..i].contains(p) {
            return Err(UsageError(format!("{p}: given more than once; name each port once")).into());
        }
    }
    let mut nl = netdev::Netdev::open().ok().flatten();
    let interrupts = facts::parse_interrupts(&read("/proc/interrupts").unwrap_or_default());
    let facts: Vec<PortFacts> = ports.iter().map(|p| gather_port(p, nl.as_mut(), &interrupts)).collect();
    Ok(assess(facts, gather_system(), xfwd_dataplane::io::frames::xsk::MAX_MTU))
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// The text a person reads.
pub fn render(d: &Diagnosis) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<12} {:>4} {:>4} {:>6} {:>7} {:>9} {:>9} {:>8} {:<18} {:>8}",
        "port", "driver", "rxq", "txq", "mtu", "max mtu", "native", "zero-copy", "xdp path", "queue index", "rx-vlan"
    );
    for p in &d.ports {
        let _ = writeln!(
            s,
            "{:<10} {:<12} {:>4} {:>4} {:>6} {:>7} {:>9} {:>9} {:>8} {:<18} {:>8}",
            p.name,
            p.driver.as_deref().unwrap_or("-"),
            p.rx_queues,
            p.tx_queues,
            p.mtu,
            opt(p.max_mtu),
            yes_no(p.xdp_native.map(|n| n && p.xdp_redirect == Some(true))),
            yes_no(p.zero_copy),
            yes_no(p.xdp_path),
            format!(
                "{}{}",
                serde_json::to_value(p.queue_index)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                if p.queue_index_known { "" } else { " (assumed)" }
            ),
            yes_no(p.rx_vlan_offload)
        );
    }
    let irqs: Vec<(&str, &Irq)> =
        d.ports.iter().flat_map(|p| p.facts.irqs.iter().map(move |i| (p.name.as_str(), i))).collect();
    if irqs.is_empty() {
        let _ = writeln!(s, "interrupts: none of the ports has its own (a virtual device, or the kernel does not say)");
    } else {
        let _ = writeln!(s, "{:<10} {:>5} {:<28} {:<10} {:<10}", "port", "irq", "name", "cpus", "effective");
        for (port, i) in irqs {
            let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
            let _ = writeln!(
                s,
                "{port:<10} {:>5} {:<28} {:<10} {:<10}",
                i.irq,
                i.name,
                list(&i.cpus),
                i.effective.as_deref().map_or_else(|| "-".into(), list)
            );
        }
    }
    let sys = &d.system;
    let _ = writeln!(
        s,
        "system: {} CPUs, kernel {}, irqbalance {}, huge pages {} reserved ({} free), busy_poll {} µs",
        sys.cpus,
        sys.kernel,
        if sys.irqbalance { "running" } else { "not running" },
        sys.huge_pages.total,
        sys.huge_pages.free,
        opt(sys.busy_poll)
    );
    for f in &d.findings {
        let port = f.port.as_deref().map_or_else(String::new, |p| format!("{p}: "));
        let _ = writeln!(s, "{:<5} {:<28} {port}{}", f.severity, f.code, f.text);
        if !f.fix.is_empty() {
            let _ = writeln!(s, "      {:<28} fix: {}", "", f.fix);
        }
    }
    let _ = writeln!(
        s,
        "{}",
        if d.can_run() {
            "xfwd can run on these ports."
        } else {
            "xfwd cannot run on these ports: see the errors above."
        }
    );
    s
}

/// `xfwd doctor`.
pub fn run(args: &DoctorArgs) -> Result<ExitCode> {
    let d = diagnose(&args.ports)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", render(&d));
    }
    Ok(if d.can_run() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

#[cfg(test)]
mod tests {
    use super::assess::Severity;
    use super::*;
    use xfwd_dataplane::io::program::netdev::DevFeatures;
    use xfwd_dataplane::io::setup::drivers::QueueIndex;

    /// A port as the fixture folder `driver` describes it (see tests/fixtures/doctor/README.md).
    fn fixture(driver: &str, ifname: &str) -> PortFacts {
        let dir = format!("{}/tests/fixtures/doctor/{driver}", env!("CARGO_MANIFEST_DIR"));
        let file = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap_or_default();
        let interrupts = facts::parse_interrupts(&file("interrupts.txt"));
        let msi: Vec<u32> = file("msi_irqs.txt").split_whitespace().map(|n| n.parse().unwrap()).collect();
        let xdp = file("netdev.txt").trim().strip_prefix("xdp-features: ").unwrap().parse().unwrap();
        let channels = facts::parse_ethtool_l(&file("ethtool-l.txt"));
        let rx = channels.and_then(|c| c.current.rx_queues()).unwrap_or(8);
        PortFacts {
            name: ifname.into(),
            ifindex: 5,
            driver: facts::parse_ethtool_i(&file("ethtool-i.txt")),
            rx_queues: rx,
            tx_queues: rx,
            channels,
            mtu: 1500,
            up: true,
            carrier: true,
            features: Some(DevFeatures { xdp_features: xdp, ..Default::default() }),
            rx_vlan_offload: facts::parse_ethtool_k(&file("ethtool-k.txt"), "rx-vlan-offload"),
            irqs: port_irqs(ifname, &[], &msi, &interrupts)
                .into_iter()
                .map(|(irq, name)| Irq { irq, name, cpus: vec![0], effective: None })
                .collect(),
            ..Default::default()
        }
    }

    fn diagnose_fixture(driver: &str, ifname: &str) -> Diagnosis {
        let sys = SystemFacts { cpus: 4, irqbalance: true, ..Default::default() };
        assess(vec![fixture(driver, ifname)], sys, 1774)
    }

    fn finding<'a>(d: &'a Diagnosis, code: &str) -> Option<&'a assess::Finding> {
        d.findings.iter().find(|f| f.code == code)
    }

    #[test]
    fn queues_are_read_from_the_names_drivers_give_their_interrupts() {
        let mut found = Vec::new();
        for (driver, ifname) in
            [("ice", "ens785f0"), ("ixgbe", "enp1s0f0"), ("i40e", "ens2f0"), ("mlx5_core", "x"), ("dpaa_eth", "eth4")]
        {
            let text = std::fs::read_to_string(format!(
                "{}/tests/fixtures/doctor/{driver}/interrupts.txt",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            let queues: Vec<u32> =
                facts::parse_interrupts(&text).iter().filter_map(|l| queue_of_irq_name(&l.name, ifname)).collect();
            found.push((driver, queues));
        }
        assert_eq!(
            found,
            [
                ("ice", vec![0, 1, 2, 3]),
                ("ixgbe", vec![0, 1, 2, 3]),
                ("i40e", vec![0, 1, 2, 3]),
                // mlx5 names channels, not interfaces (the kernel's NAPI links give its queues),
                // and dpaa's portals belong to CPUs: neither is read from names.
                ("mlx5_core", vec![]),
                ("dpaa_eth", vec![]),
            ]
        );
        assert_eq!(queue_of_irq_name("eth4-rx-7", "eth4"), Some(7));
        assert_eq!(queue_of_irq_name("eth4-tx-7", "eth4"), None);
        assert_eq!(queue_of_irq_name("eth40-rx-1", "eth4"), None);
        let q =
            QueueIrq { queue: 0, irq: Irq { irq: 9, name: String::new(), cpus: vec![2, 3], effective: Some(vec![3]) } };
        assert_eq!(q.cpu(), Some(3));
        // Allowed on several CPUs and no effective affinity: no one CPU to name.
        let q = QueueIrq { queue: 0, irq: Irq { irq: 9, name: String::new(), cpus: vec![0, 1], effective: None } };
        assert_eq!(q.cpu(), None);
    }

    #[test]
    fn cores_follow_the_queues_interrupts_in_queue_order() {
        let q = |queue: u32, cpus: &[usize]| QueueIrq {
            queue,
            irq: Irq { irq: 40 + queue, name: String::new(), cpus: cpus.to_vec(), effective: None },
        };
        assert_eq!(irq_cores(&[q(0, &[2]), q(1, &[3])]), Ok(vec![2, 3]));
        // A queue missing from the list ends it: queue 2's CPU is not worker 1's.
        assert_eq!(irq_cores(&[q(0, &[2]), q(2, &[3])]), Ok(vec![2]));
        // Queue 0's interrupt not pinned to one CPU: refused with the fix.
        let e = irq_cores(&[q(0, &[0, 1, 2, 3])]).unwrap_err();
        assert!(e.contains("/proc/irq/40/smp_affinity_list"), "{e}");
        assert!(irq_cores(&[]).unwrap_err().contains("no interrupt per RX queue"));
        assert!(irq_cores(&[q(1, &[1])]).unwrap_err().contains("no interrupt for queue 0"));
    }

    #[test]
    fn the_boards_dpaa_eth() {
        let d = diagnose_fixture("dpaa_eth", "eth4");
        let p = &d.ports[0];
        assert_eq!(p.driver.as_deref(), Some("fsl_dpa"));
        assert_eq!((p.queue_index, p.queue_index_known), (QueueIndex::HardwareQueueId, true));
        assert_eq!((p.xdp_native, p.zero_copy, p.rx_vlan_offload), (Some(true), Some(false), Some(false)));
        assert!(p.facts.channels.is_none(), "dpaa_eth answers no ethtool -l");
        // Its interrupts are the CPUs' QMan portals, not the port's: none is attributed to it.
        assert!(p.facts.irqs.is_empty());
        let q = finding(&d, "queue-index-not-zero-based").unwrap();
        assert_eq!((q.severity, q.fix.as_str()), (Severity::Warn, "--xdp-mode generic --sockets per-cpu"));
        assert!(finding(&d, "attach-restarts-link").is_some() && finding(&d, "copy-mode").is_some());
        assert!(finding(&d, "irqbalance").is_none() && finding(&d, "rx-vlan-stripped").is_none());
        assert!(d.can_run());
        assert!(render(&d).contains("hardware-queue-id"), "{}", render(&d));
    }

    #[test]
    fn zero_copy_nics_with_their_interrupts_and_vlan_stripping() {
        for (driver, ifname, irqs, strips) in [
            ("mlx5_core", "enp59s0f0np0", 3, true),
            ("ice", "ens785f0", 4, true),
            ("ixgbe", "enp1s0f0", 5, true),
            ("i40e", "ens2f0", 4, false),
        ] {
            let d = diagnose_fixture(driver, ifname);
            let p = &d.ports[0];
            assert_eq!(p.driver.as_deref(), Some(driver));
            assert_eq!((p.xdp_native, p.zero_copy), (Some(true), Some(true)), "{driver}");
            assert_eq!((p.queue_index, p.queue_index_known), (QueueIndex::ZeroBased, true), "{driver}");
            assert_eq!(p.facts.irqs.len(), irqs, "{driver}: {:?}", p.facts.irqs);
            assert!(finding(&d, "copy-mode").is_none(), "{driver}");
            assert_eq!(finding(&d, "rx-vlan-stripped").is_some(), strips, "{driver}");
            assert_eq!(finding(&d, "irqbalance").map(|f| f.severity), Some(Severity::Warn), "{driver}");
            assert!(d.can_run(), "{driver}: {:?}", d.findings);
        }
        // mlx5 runs 2 of 16 channels on a 4-CPU machine: raising them is offered.
        let d = diagnose_fixture("mlx5_core", "enp59s0f0np0");
        assert_eq!(finding(&d, "more-queues-available").unwrap().fix, "ethtool -L enp59s0f0np0 combined 4");
        assert_eq!(
            d.ports[0].facts.driver.as_ref().and_then(|i| i.firmware.as_deref()),
            Some("16.35.2000 (MT_0000000080)")
        );
    }
}
