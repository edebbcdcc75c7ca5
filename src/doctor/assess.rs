//! From facts to findings: what will work on these ports, what will not, and the command that
//! fixes each. Pure: the facts come in, nothing is read here.
//!
//! Severities: `error` — xfwd refuses to start, or would forward nothing whatever its options;
//! `warn` — it runs only with the given fix, or worse than it could; `info` — worth knowing.
//! Codes are stable: scripts may match on them.

use serde::Serialize;

use super::facts::{PortFacts, SystemFacts};
use xfwd_dataplane::io::setup::drivers::{self as quirks, QueueIndex};
use xfwd_dataplane::io::setup::start::plan::{kernel_version, PER_CPU_KERNEL};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Works only with the fix, or worse than it could.
    Warn,
    /// xfwd cannot run, or would forward nothing.
    Error,
}

impl Severity {
    fn word(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// One thing found, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// Stable code, e.g. `mtu-too-large`.
    pub code: &'static str,
    /// The port it is about, or `None` for the machine.
    pub port: Option<String>,
    /// What was found, in a sentence.
    pub text: String,
    /// The exact command (or option) that fixes it; empty when there is nothing to do.
    pub fix: String,
}

/// A port as `--json` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortSummary {
    /// Interface name.
    pub name: String,
    /// Driver name (`null`: could not tell).
    pub driver: Option<String>,
    /// RX queues.
    pub rx_queues: u32,
    /// TX queues.
    pub tx_queues: u32,
    /// Native XDP (`null`: the kernel does not say).
    pub xdp_native: Option<bool>,
    /// XDP_REDIRECT in native mode.
    pub xdp_redirect: Option<bool>,
    /// AF_XDP zero-copy.
    pub zero_copy: Option<bool>,
    /// The XDP path (`--path xdp`) can run here: native XDP with redirect in, and the driver
    /// takes frames an XDP program redirects to it (`ndo-xmit`) out.
    pub xdp_path: Option<bool>,
    /// MTU.
    pub mtu: u32,
    /// The driver's largest MTU.
    pub max_mtu: Option<u32>,
    /// The largest MTU a UMEM frame of xfwd carries.
    pub xfwd_max_mtu: u32,
    /// The queue index the driver gives XDP: `zero-based`, `sender-tx-queue`, `hardware-queue-id`.
    pub queue_index: QueueIndex,
    /// Whether that comes from the table of known drivers (else it is assumed).
    pub queue_index_known: bool,
    /// `rx-vlan-offload` on (`null`: not reported).
    pub rx_vlan_offload: Option<bool>,
    /// Everything read, for whoever wants it.
    pub facts: PortFacts,
}

/// The whole diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// Per port.
    pub ports: Vec<PortSummary>,
    /// The machine.
    pub system: SystemFacts,
    /// Findings, worst first, ports in the order given.
    pub findings: Vec<Finding>,
}

impl Diagnosis {
    /// Whether xfwd can run on these ports (no error finding).
    pub fn can_run(&self) -> bool {
        self.findings.iter().all(|f| f.severity != Severity::Error)
    }
}

struct Out<'a>(&'a mut Vec<Finding>, Option<&'a str>);

impl Out<'_> {
    fn add(&mut self, severity: Severity, code: &'static str, text: String, fix: impl Into<String>) {
        self.0.push(Finding { severity, code, port: self.1.map(str::to_owned), text, fix: fix.into() });
    }
}

/// Diagnoses `ports` on `system`; `max_mtu` is the largest MTU a UMEM frame carries.
pub fn assess(ports: Vec<PortFacts>, system: SystemFacts, max_mtu: u32) -> Diagnosis {
    let mut findings = Vec::new();
    for p in &ports {
        port_findings(p, &system, max_mtu, &mut Out(&mut findings, Some(&p.name)));
    }
    system_findings(&ports, &system, &mut Out(&mut findings, None));
    // Worst first; a stable sort keeps the ports' order within a severity.
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let ports = ports
        .into_iter()
        .map(|p| {
            let quirk = p.driver.as_ref().and_then(|d| quirks::lookup(&d.driver));
            PortSummary {
                name: p.name.clone(),
                driver: p.driver.as_ref().map(|d| d.driver.clone()),
                rx_queues: p.rx_queues,
                tx_queues: p.tx_queues,
                xdp_native: p.features.map(|f| f.native()),
                xdp_redirect: p.features.map(|f| f.native() && f.redirect()),
                zero_copy: p.features.map(|f| f.zero_copy()),
                xdp_path: p.features.map(|f| f.native() && f.redirect() && f.takes_redirects()),
                mtu: p.mtu,
                max_mtu: p.link.as_ref().and_then(|l| l.max_mtu),
                xfwd_max_mtu: max_mtu,
                queue_index: quirk.map_or(QueueIndex::ZeroBased, |q| q.queue_index),
                queue_index_known: quirk.is_some(),
                rx_vlan_offload: p.rx_vlan_offload.map(|f| f.on),
                facts: p,
            }
        })
        .collect();
    Diagnosis { ports, system, findings }
}

/// What stops xfwd on the port itself (state, MTU, another program), then [`driver_findings`].
fn port_findings(p: &PortFacts, sys: &SystemFacts, max_mtu: u32, out: &mut Out) {
    use Severity::{Error, Warn};
    let name = &p.name;
    if !p.up {
        out.add(
            Error,
            "port-down",
            "is administratively down; xfwd refuses it".into(),
            format!("ip link set {name} up"),
        );
    } else if !p.carrier {
        out.add(Warn, "no-carrier", "has no carrier: nothing will arrive until the link is up".into(), "");
    }
    if p.mtu > max_mtu {
        out.add(
            Error,
            "mtu-too-large",
            format!("MTU {} is larger than a UMEM frame of xfwd carries ({max_mtu}); xfwd refuses it", p.mtu),
            format!("ip link set {name} mtu {max_mtu}"),
        );
    }
    if let Some((mode, id)) = p.link.as_ref().and_then(|l| l.xdp_attached.clone()) {
        out.add(
            Error,
            "xdp-program-attached",
            format!(
                "already has an XDP program attached ({mode}, id {id}): another xfwd, or another tool, owns this port"
            ),
            format!(
                "stop what attached it, or: ip link set dev {name} {} off",
                if mode == "xdpmulti" { "xdp off xdpgeneric" } else { mode.as_str() }
            ),
        );
    }
    driver_findings(p, sys, out);
}

/// What the port's driver can and cannot do for xfwd: its advertised features, the table of
/// known drivers, VLAN stripping, queues and interrupts.
fn driver_findings(p: &PortFacts, sys: &SystemFacts, out: &mut Out) {
    use Severity::{Info, Warn};
    let name = &p.name;
    let driver = p.driver.as_ref().map_or("an unknown driver", |d| d.driver.as_str());
    let quirk = p.driver.as_ref().and_then(|d| quirks::lookup(&d.driver));
    feature_findings(p, driver, out);
    queue_findings(p, sys, driver, quirk.map(|q| q.queue_index), out);
    if quirk.is_some_and(|q| q.attach_restarts_link) {
        out.add(
            Info,
            "attach-restarts-link",
            format!("{driver} restarts the port when a program is attached or removed: expect a link flap at start and exit"),
            "",
        );
    }
    if let Some(v) = p.rx_vlan_offload.filter(|v| v.on) {
        if quirk.is_some_and(|q| q.strips_vlan_before_xdp) {
            let fix = if v.fixed { String::new() } else { format!("ethtool -K {name} rxvlan off") };
            out.add(
                Warn,
                "rx-vlan-stripped",
                format!("{driver} strips VLAN tags before XDP while rx-vlan-offload is on: tagged frames reach xfwd untagged"),
                fix,
            );
        }
    }
    if let Some(ch) = p.channels {
        if let (Some(max), Some(cur)) = (ch.max.combined, ch.current.combined) {
            if max > cur && cur < sys.cpus as u32 {
                out.add(
                    Info,
                    "more-queues-available",
                    format!("{cur} combined channels of {max} in use, {} CPUs", sys.cpus),
                    format!("ethtool -L {name} combined {}", max.min(sys.cpus as u32)),
                );
            }
        }
    }
    if !p.irqs.is_empty() && sys.irqbalance {
        out.add(
            Warn,
            "irqbalance",
            format!("irqbalance runs and may move {name}'s {} interrupts away from the workers' cores", p.irqs.len()),
            "systemctl stop irqbalance, then pin each queue's IRQ (echo CPU > /proc/irq/N/smp_affinity_list)",
        );
    }
}

/// What the driver's advertised XDP and AF_XDP features (netdev netlink) allow.
fn feature_findings(p: &PortFacts, driver: &str, out: &mut Out) {
    use Severity::{Info, Warn};
    match p.features {
        None => out.add(
            Info,
            "features-unknown",
            "the kernel did not say what XDP and AF_XDP features the driver has (its netdev netlink family, Linux 6.3+, is missing or did not answer for this port); xfwd finds out at start".into(),
            "",
        ),
        Some(f) if !f.native() => out.add(
            Warn,
            "no-native-xdp",
            format!("{driver} runs no XDP program itself: xfwd attaches in generic mode, where every frame is an sk_buff first (slower)"),
            "--xdp-mode generic (what auto picks), or a NIC whose driver has native XDP",
        ),
        Some(f) if !f.redirect() => out.add(
            Warn,
            "no-native-redirect",
            format!("{driver} has native XDP without XDP_REDIRECT: frames cannot reach AF_XDP sockets in native mode"),
            "--xdp-mode generic",
        ),
        Some(_) => {}
    }
    if let Some(f) = p.features {
        if !f.takes_redirects() {
            let (why, fix) = if driver == "veth" {
                (
                    "a veth takes frames an XDP program redirects to it only while its peer runs NAPI, and this one's does not",
                    "ethtool -K PEER gro on (or an XDP program on the peer)",
                )
            } else {
                ("its driver has no ndo_xdp_xmit", "--path af-xdp (the default)")
            };
            out.add(
                Info,
                "no-xdp-path-egress",
                format!(
                    "{driver} does not take frames an XDP program redirects to it (no ndo-xmit): --path xdp in native mode cannot forward out of it, and refuses to start (generic mode can); {why}"
                ),
                fix,
            );
        }
        if !f.zero_copy() {
            out.add(
                Info,
                "copy-mode",
                format!("{driver} has no AF_XDP zero-copy: each frame is copied into the UMEM and out again"),
                "",
            );
        }
    }
}

/// What the driver's queue numbering (`index`, from the table of known drivers) means for the
/// sockets and the XDP path.
fn queue_findings(p: &PortFacts, sys: &SystemFacts, driver: &str, index: Option<QueueIndex>, out: &mut Out) {
    use Severity::{Info, Warn};
    match index {
        Some(QueueIndex::HardwareQueueId) => {
            out.add(
                Warn,
                "queue-index-not-zero-based",
                format!(
                    "{driver} gives XDP its hardware frame-queue id as the queue index: in native mode no AF_XDP socket matches and xfwd would forward nothing; \
                     in generic mode every frame arrives as queue 0, from every CPU, and per-CPU sockets give each CPU's frames to its own worker (--xdp-mode auto and --sockets auto, the defaults, do this)"
                ),
                "--xdp-mode generic --sockets per-cpu",
            );
            if p.features.is_some_and(|f| f.native() && f.takes_redirects()) {
                out.add(
                    Info,
                    "xdp-path-generic",
                    format!(
                        "{driver} sends frames an XDP program redirects to it (ndo-xmit), but --path xdp runs here in generic mode as the rest of xfwd does: \
                         the program hands its exceptions (ICMP errors, unresolved next hops, the box's own traffic) to AF_XDP sockets, which native mode cannot reach with these queue ids; \
                         in generic mode the program forwards before the kernel's stack, though after the sk_buff is built"
                    ),
                    "--path xdp --xdp-mode generic --sockets per-cpu",
                );
            }
            let (a, b) = PER_CPU_KERNEL;
            if kernel_version(&sys.kernel).is_none_or(|k| k < PER_CPU_KERNEL) {
                out.add(
                    Warn,
                    "per-cpu-needs-kernel",
                    format!(
                        "per-CPU sockets share queue 0's rings between CPUs, safe from Linux {a}.{b} (generic receive serialised per buffer pool, completions written only once sent); \
                         this kernel is {}: xfwd runs one worker here unless asked for per-CPU sockets, which is safe only if it carries both fixes as backports",
                        if sys.kernel.is_empty() { "unknown" } else { sys.kernel.as_str() }
                    ),
                    format!("a Linux {a}.{b}+ kernel; or, if this one has the fixes, --sockets per-cpu"),
                );
            }
        }
        Some(QueueIndex::SenderTxQueue) if p.rx_queues > 1 => out.add(
            Info,
            "queue-is-senders",
            format!("{driver}: a frame arrives on the queue its sender transmitted it on; in generic mode on that queue less one (queue 0 for the first two)"),
            "--xdp-mode native for more than one queue; pin senders and set XPS to spread them",
        ),
        _ => {}
    }
}

fn system_findings(ports: &[PortFacts], sys: &SystemFacts, out: &mut Out) {
    use Severity::Info;
    let zc: Vec<bool> = ports.iter().filter_map(|p| p.features.map(|f| f.zero_copy())).collect();
    if zc.len() == ports.len() && zc.iter().any(|&z| z) && !zc.iter().all(|&z| z) {
        out.add(
            Info,
            "zero-copy-mixed",
            "only some ports' drivers have zero-copy: a worker's sockets share one UMEM, which has one mode, so xfwd binds all in copy mode".into(),
            "",
        );
    }
    if sys.huge_pages.total == 0 {
        out.add(
            Info,
            "no-huge-pages",
            "no huge pages are reserved: --huge-pages would be refused".into(),
            "sysctl vm.nr_hugepages=16 (eight 2 MiB pages per worker with two ports)",
        );
    }
    let unset: Vec<&str> = ports
        .iter()
        .filter(|p| p.napi_defer_hard_irqs == Some(0) || p.gro_flush_timeout == Some(0))
        .map(|p| p.name.as_str())
        .collect();
    if !unset.is_empty() {
        let fix = unset
            .iter()
            .map(|n| {
                format!(
                    "echo 2 > /sys/class/net/{n}/napi_defer_hard_irqs; echo 200000 > /sys/class/net/{n}/gro_flush_timeout"
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        out.add(
            Info,
            "busy-poll-deferral-off",
            format!(
                "{}: interrupt deferral is off, so --poll busy --busy-poll-budget N cannot keep the driver's interrupts off",
                unset.join(", ")
            ),
            fix,
        );
    }
    if sys.live_frames == Some(false) {
        out.add(
            Info,
            "live-frames-refused",
            format!(
                "the kernel refuses BPF_PROG_TEST_RUN with live frames ({}): `xfwd bench --sender xdp` cannot send here",
                sys.live_frames_said.as_deref().unwrap_or("no reason given")
            ),
            "xfwd bench --sender trafgen-xdp (the same XDP frames for the box, from trafgen through an XDP redirect)",
        );
    }
    if !sys.isolated.is_empty() {
        let list = sys.isolated.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        out.add(
            Info,
            "isolated-cpus",
            format!("CPUs {list} are isolated from the scheduler: a good place for the workers"),
            format!("--cores {list}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::facts::{DriverInfo, Feature};
    use xfwd_dataplane::io::program::netdev::{xdp_act, DevFeatures};

    fn port(driver: &str, features: Option<u64>) -> PortFacts {
        PortFacts {
            name: "eth4".into(),
            ifindex: 4,
            driver: Some(DriverInfo { driver: driver.into(), ..Default::default() }),
            rx_queues: 1,
            tx_queues: 1,
            mtu: 1500,
            up: true,
            carrier: true,
            features: features.map(|x| DevFeatures { xdp_features: x, ..Default::default() }),
            napi_defer_hard_irqs: Some(0),
            gro_flush_timeout: Some(0),
            ..Default::default()
        }
    }

    fn sys() -> SystemFacts {
        SystemFacts { cpus: 4, ..Default::default() }
    }

    fn codes(d: &Diagnosis) -> Vec<&'static str> {
        d.findings.iter().map(|f| f.code).collect()
    }

    #[test]
    fn a_veth_port_runs_in_copy_mode() {
        let veth = xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::NDO_XMIT | xdp_act::RX_SG;
        let d = assess(vec![port("veth", Some(veth))], sys(), 1774);
        assert!(d.can_run(), "{:?}", d.findings);
        assert!(codes(&d).contains(&"copy-mode"));
        let p = &d.ports[0];
        assert_eq!((p.xdp_native, p.zero_copy, p.queue_index), (Some(true), Some(false), QueueIndex::SenderTxQueue));
        assert_eq!(p.xdp_path, Some(true));
        assert!(!codes(&d).contains(&"no-xdp-path-egress"));
    }

    #[test]
    fn a_veth_whose_peer_runs_no_napi_is_no_egress_of_the_xdp_path() {
        let d = assess(vec![port("veth", Some(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::RX_SG))], sys(), 1774);
        assert!(d.can_run(), "the AF_XDP path runs");
        assert_eq!(d.ports[0].xdp_path, Some(false));
        let f = d.findings.iter().find(|f| f.code == "no-xdp-path-egress").unwrap();
        assert!(f.text.contains("its peer runs NAPI"), "{}", f.text);
        assert_eq!(f.fix, "ethtool -K PEER gro on (or an XDP program on the peer)");
    }

    #[test]
    fn what_stops_xfwd_is_an_error_with_its_fix() {
        let mut p = port("veth", Some(xdp_act::BASIC | xdp_act::REDIRECT));
        p.mtu = 3000;
        p.up = false;
        let d = assess(vec![p], sys(), 1774);
        assert!(!d.can_run());
        let mtu = d.findings.iter().find(|f| f.code == "mtu-too-large").unwrap();
        assert_eq!((mtu.severity, mtu.fix.as_str()), (Severity::Error, "ip link set eth4 mtu 1774"));
        assert!(d.findings.iter().any(|f| f.code == "port-down" && f.fix == "ip link set eth4 up"));
        assert_eq!(d.findings[0].severity, Severity::Error, "worst first");
    }

    #[test]
    fn the_boards_driver_needs_generic_mode_and_one_queue() {
        // dpaa_eth advertises native XDP with redirect, no zero-copy (its xdp_features).
        let mut p = port("dpaa_eth", Some(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::NDO_XMIT));
        p.rx_vlan_offload = Some(Feature { on: false, fixed: true });
        let d = assess(vec![p], sys(), 1774);
        assert!(d.can_run());
        let q = d.findings.iter().find(|f| f.code == "queue-index-not-zero-based").unwrap();
        assert_eq!((q.severity, q.fix.as_str()), (Severity::Warn, "--xdp-mode generic --sockets per-cpu"));
        assert!(codes(&d).contains(&"attach-restarts-link") && codes(&d).contains(&"copy-mode"));
        assert_eq!(d.ports[0].queue_index, QueueIndex::HardwareQueueId);
        // Native AF_XDP is out, the XDP path's native redirect is not; the XDP path runs in
        // generic mode all the same, and says why.
        assert_eq!(d.ports[0].xdp_path, Some(true));
        let x = d.findings.iter().find(|f| f.code == "xdp-path-generic").unwrap();
        assert_eq!((x.severity, x.fix.as_str()), (Severity::Info, "--path xdp --xdp-mode generic --sockets per-cpu"));
        // A driver with zero-based queue ids has no such finding.
        let veth = port("veth", Some(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::NDO_XMIT));
        assert!(!codes(&assess(vec![veth], sys(), 1774)).contains(&"xdp-path-generic"));
    }

    #[test]
    fn per_cpu_sockets_on_the_boards_driver_want_a_kernel_with_the_shared_ring_fixes() {
        let dpaa = || port("dpaa_eth", Some(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::NDO_XMIT));
        let on = |kernel: &str| codes(&assess(vec![dpaa()], SystemFacts { kernel: kernel.into(), ..sys() }, 1774));
        assert!(on("6.6.52-lts").contains(&"per-cpu-needs-kernel"));
        assert!(on("").contains(&"per-cpu-needs-kernel"), "unknown counts as old");
        assert!(!on("6.17.0").contains(&"per-cpu-needs-kernel"));
        assert!(!on("6.18.44-fc-v669").contains(&"per-cpu-needs-kernel"));
        // Only where per-CPU sockets would be chosen.
        let veth = port("veth", Some(xdp_act::BASIC | xdp_act::REDIRECT));
        assert!(!codes(&assess(vec![veth], SystemFacts { kernel: "5.10.0".into(), ..sys() }, 1774))
            .contains(&"per-cpu-needs-kernel"));
    }

    #[test]
    fn vlan_stripping_drivers_are_told_to_keep_tags() {
        let mut p = port("ice", Some(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::XSK_ZEROCOPY));
        p.rx_vlan_offload = Some(Feature { on: true, fixed: false });
        let d = assess(vec![p.clone()], sys(), 1774);
        let f = d.findings.iter().find(|f| f.code == "rx-vlan-stripped").unwrap();
        assert_eq!(f.fix, "ethtool -K eth4 rxvlan off");
        assert!(!codes(&d).contains(&"copy-mode"));
        p.rx_vlan_offload = Some(Feature { on: false, fixed: false });
        assert!(!codes(&assess(vec![p], sys(), 1774)).contains(&"rx-vlan-stripped"));
    }

    #[test]
    fn unknown_features_are_null_not_false() {
        let d = assess(vec![port("e1000e", None)], sys(), 1774);
        assert_eq!((d.ports[0].xdp_native, d.ports[0].zero_copy, d.ports[0].xdp_path), (None, None, None));
        assert!(codes(&d).contains(&"features-unknown"));
        assert!(!d.ports[0].queue_index_known);
        let json = serde_json::to_value(&d).unwrap();
        assert!(json.pointer("/ports/0/xdp_native").unwrap().is_null());
        let no_xdp = assess(vec![port("e1000e", Some(0))], sys(), 1774);
        assert!(codes(&no_xdp).contains(&"no-native-xdp"));
    }
    #[test]
    fn a_kernel_that_refuses_live_frames_is_a_finding_with_the_other_sender() {
        let veth = || port("veth", Some(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::NDO_XMIT));
        let refused = SystemFacts {
            live_frames: Some(false),
            live_frames_said: Some("Operation not permitted (os error 1)".into()),
            ..sys()
        };
        let d = assess(vec![veth()], refused, 1774);
        let f = d.findings.iter().find(|f| f.code == "live-frames-refused").unwrap();
        assert_eq!(f.severity, Severity::Info, "xfwd itself runs: only the bench's generator cannot");
        assert!(f.text.contains("Operation not permitted") && f.text.contains("--sender xdp"), "{}", f.text);
        assert!(f.fix.starts_with("xfwd bench --sender trafgen-xdp"), "{}", f.fix);
        assert!(d.can_run());
        // Allowed, or not asked: nothing to say.
        for live in [Some(true), None] {
            let d = assess(vec![veth()], SystemFacts { live_frames: live, ..sys() }, 1774);
            assert!(!codes(&d).contains(&"live-frames-refused"), "{live:?}");
        }
    }
}
