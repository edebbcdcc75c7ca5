//! The facts `xfwd doctor` reads about a port and the system, and the pure parsers of the text
//! they come as (ethtool's output, /proc files, `ip -j`). Reading is in the `gather_*` functions of [`super`];
//! everything here is tested on fixtures without root.

use serde::Serialize;

use xfwd_dataplane::io::program::netdev::{DevFeatures, Napi, Queue};

/// `ethtool -i`: the driver and its versions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DriverInfo {
    /// Driver name (`veth`, `dpaa_eth`, `mlx5_core`, …).
    pub driver: String,
    /// Driver version, where it reports one.
    pub version: Option<String>,
    /// Firmware version, where there is one.
    pub firmware: Option<String>,
    /// Bus address (PCI, or the SoC's device), where there is one.
    pub bus: Option<String>,
}

/// Reads `ethtool -i NAME`; `None` without a `driver:` line.
pub fn parse_ethtool_i(text: &str) -> Option<DriverInfo> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    Some(DriverInfo {
        driver: field("driver")?,
        version: field("version"),
        firmware: field("firmware-version"),
        bus: field("bus-info"),
    })
}

/// One column of `ethtool -l`: channel counts (`None` where it says n/a).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ChannelSet {
    /// RX-only channels.
    pub rx: Option<u32>,
    /// TX-only channels.
    pub tx: Option<u32>,
    /// Other channels.
    pub other: Option<u32>,
    /// Combined (RX and TX) channels.
    pub combined: Option<u32>,
}

impl ChannelSet {
    /// The receive queues these channels make: combined plus RX-only.
    pub fn rx_queues(&self) -> Option<u32> {
        match (self.combined, self.rx) {
            (None, None) => None,
            (c, r) => Some(c.unwrap_or(0) + r.unwrap_or(0)),
        }
    }
}

/// `ethtool -l`: the most the driver allows and what is set now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Channels {
    /// "Pre-set maximums".
    pub max: ChannelSet,
    /// "Current hardware settings".
    pub current: ChannelSet,
}

/// Reads `ethtool -l NAME`; `None` when it has neither section (the driver does not say).
pub fn parse_ethtool_l(text: &str) -> Option<Channels> {
    let mut ch = Channels::default();
    let mut which: Option<&mut ChannelSet> = None;
    let (mut saw_max, mut saw_current) = (false, false);
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("Pre-set maximums") {
            saw_max = true;
            which = Some(&mut ch.max);
            continue;
        }
        if l.starts_with("Current hardware settings") {
            saw_current = true;
            which = Some(&mut ch.current);
            continue;
        }
        let (Some(set), Some((key, value))) = (which.as_deref_mut(), l.split_once(':')) else {
            continue;
        };
        let v = value.trim().parse().ok();
        match key.trim() {
            "RX" => set.rx = v,
            "TX" => set.tx = v,
            "Other" => set.other = v,
            "Combined" => set.combined = v,
            _ => {}
        }
    }
    (saw_max || saw_current).then_some(ch)
}

/// One feature of `ethtool -k`: on or off, and whether the driver lets it change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Feature {
    /// On.
    pub on: bool,
    /// `[fixed]`: cannot be changed.
    pub fixed: bool,
}

/// Reads one feature (`rx-vlan-offload`, …) from `ethtool -k NAME`.
pub fn parse_ethtool_k(text: &str, feature: &str) -> Option<Feature> {
    let rest = text.lines().find_map(|l| l.trim().strip_prefix(feature)?.strip_prefix(':'))?;
    let rest = rest.trim();
    Some(Feature { on: rest.starts_with("on"), fixed: rest.contains("[fixed]") })
}

/// One line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqLine {
    /// The interrupt number.
    pub irq: u32,
    /// Interrupts taken per CPU so far.
    pub per_cpu: Vec<u64>,
    /// The handler's name (the last column): `eth4-rx-0`, `mlx5_comp3@pci:…`, `QMan portal 1`.
    pub name: String,
}

/// Reads /proc/interrupts: the numbered lines (not NMI, LOC, …).
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().filter(|c| c.starts_with("CPU")).count());
    lines
        .filter_map(|l| {
            let (num, rest) = l.trim_start().split_once(':')?;
            let irq = num.trim().parse().ok()?;
            let mut words = rest.split_whitespace();
            let per_cpu: Vec<u64> = words.by_ref().take(cpus).map(|w| w.parse().unwrap_or(0)).collect();
            // After the counts: the chip, the hardware IRQ and trigger, then the handler's name
            // (which may hold spaces, as `QMan portal 1`). The name is what follows the last
            // column that names the trigger (`-edge`, `-level`, `Edge`, `Level`), else the last word.
            let tail: Vec<&str> = words.collect();
            let at = tail.iter().rposition(|w| {
                let w = w.to_ascii_lowercase();
                w.ends_with("-edge") || w.ends_with("-level") || w == "edge" || w == "level"
            });
            let name = match at {
                Some(i) if i + 1 < tail.len() => tail[i + 1..].join(" "),
                _ => tail.last().map_or_else(String::new, |s| (*s).to_owned()),
            };
            Some(IrqLine { irq, per_cpu, name })
        })
        .collect()
}

/// Whether an interrupt's handler name belongs to interface `ifname`: the name is the
/// interface's own (`eth4`), or it appears in it as a word between `-`, `@`, `:` or spaces
/// (`eth4-rx-0`, `ice-eth4-TxRx-3`, `eth4-TxRx-0`).
pub fn irq_belongs_to(name: &str, ifname: &str) -> bool {
    name == ifname || name.split(['-', '@', ':', ' ']).any(|w| w == ifname)
}

/// /proc/meminfo's huge-page lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HugePages {
    /// Reserved huge pages.
    pub total: u64,
    /// Of those, free.
    pub free: u64,
    /// Their size, KiB.
    pub size_kib: u64,
}

/// Reads /proc/meminfo.
pub fn parse_meminfo(text: &str) -> HugePages {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    HugePages { total: field("HugePages_Total"), free: field("HugePages_Free"), size_kib: field("Hugepagesize") }
}

/// What `ip -d -j link show dev NAME` adds to sysfs: the MTU range and an attached program.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkDetail {
    /// The largest MTU the driver takes.
    pub max_mtu: Option<u32>,
    /// An XDP program already attached: its mode (`xdp`, `xdpgeneric`, …) and id.
    pub xdp_attached: Option<(String, u64)>,
}

/// Reads `ip -d -j link show dev NAME`.
pub fn parse_ip_link_json(text: &str) -> Option<LinkDetail> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let link = v.as_array()?.first()?;
    let max_mtu = link.get("max_mtu").and_then(|m| m.as_u64()).map(|m| m as u32);
    let xdp_attached = link.get("xdp").and_then(|x| {
        let mode = x.get("mode").map(|m| match m.as_u64() {
            Some(1) => "xdp".to_owned(),
            Some(2) => "xdpgeneric".to_owned(),
            Some(3) => "xdpoffload".to_owned(),
            Some(4) => "xdpmulti".to_owned(),
            _ => m.as_str().unwrap_or("xdp").to_owned(),
        })?;
        let id = x.pointer("/prog/id").and_then(|i| i.as_u64()).unwrap_or(0);
        Some((mode, id))
    });
    Some(LinkDetail { max_mtu, xdp_attached })
}

/// An interrupt of a port's queue and the CPUs it may run on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Irq {
    /// The interrupt number.
    pub irq: u32,
    /// Its handler's name.
    pub name: String,
    /// `smp_affinity_list`: where it may run.
    pub cpus: Vec<usize>,
    /// `effective_affinity_list`, where the kernel has it: where it runs.
    pub effective: Option<Vec<usize>>,
}

/// Everything read about one port.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PortFacts {
    /// Interface name.
    pub name: String,
    /// Interface index.
    pub ifindex: u32,
    /// The driver, from `ethtool -i`.
    pub driver: Option<DriverInfo>,
    /// RX queues (sysfs).
    pub rx_queues: u32,
    /// TX queues (sysfs).
    pub tx_queues: u32,
    /// `ethtool -l`, where the driver answers.
    pub channels: Option<Channels>,
    /// MTU.
    pub mtu: u32,
    /// Largest MTU and an attached program, from `ip -d -j link`.
    pub link: Option<LinkDetail>,
    /// Administratively up.
    pub up: bool,
    /// Carrier.
    pub carrier: bool,
    /// What the kernel advertises (netdev netlink), `None` where it could not tell.
    pub features: Option<DevFeatures>,
    /// Queues with their NAPI instances (Linux 6.8+).
    pub queues: Option<Vec<Queue>>,
    /// NAPI instances with their IRQs (Linux 6.8+).
    pub napis: Option<Vec<Napi>>,
    /// `rx-vlan-offload` (tags stripped before XDP sees the frame).
    pub rx_vlan_offload: Option<Feature>,
    /// The port's interrupts.
    pub irqs: Vec<Irq>,
    /// `napi_defer_hard_irqs` and `gro_flush_timeout` (busy polling's companions).
    pub napi_defer_hard_irqs: Option<u64>,
    /// See `napi_defer_hard_irqs`.
    pub gro_flush_timeout: Option<u64>,
}

/// What is read about the machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SystemFacts {
    /// Online CPUs.
    pub cpus: usize,
    /// CPUs isolated from the scheduler (`isolcpus`).
    pub isolated: Vec<usize>,
    /// irqbalance runs (it may move the ports' interrupts under the workers).
    pub irqbalance: bool,
    /// `net.core.busy_poll` and `busy_read`, µs.
    pub busy_poll: Option<u64>,
    /// See `busy_poll`.
    pub busy_read: Option<u64>,
    /// Reserved huge pages.
    pub huge_pages: HugePages,
    /// `uname -r`.
    pub kernel: String,
    /// Whether the kernel runs `BPF_PROG_TEST_RUN` with live frames, which `xfwd bench
    /// --sender xdp` sends with (`null`: it could not be asked, e.g. without privileges).
    pub live_frames: Option<bool>,
    /// What the kernel answered when it refused them, or why it could not be asked.
    pub live_frames_said: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_as_this_machine_answers() {
        let i = "driver: veth\nversion: 1.0\nfirmware-version: \nexpansion-rom-version: \nbus-info: \nsupports-statistics: yes\n";
        assert_eq!(
            parse_ethtool_i(i),
            Some(DriverInfo { driver: "veth".into(), version: Some("1.0".into()), firmware: None, bus: None })
        );
        let l = "Channel parameters for eth4:\nPre-set maximums:\nRX:\t\t2\nTX:\t\t2\nOther:\t\tn/a\nCombined:\tn/a\nCurrent hardware settings:\nRX:\t\t1\nTX:\t\t1\nOther:\t\tn/a\nCombined:\tn/a\n";
        let ch = parse_ethtool_l(l).unwrap();
        assert_eq!(ch.max, ChannelSet { rx: Some(2), tx: Some(2), other: None, combined: None });
        assert_eq!(ch.current.rx_queues(), Some(1));
        assert_eq!(parse_ethtool_l("netlink error: Operation not supported\n"), None);
        let k = "rx-vlan-offload: on\ntx-vlan-offload: on\nrx-vlan-filter: off [fixed]\n";
        assert_eq!(parse_ethtool_k(k, "rx-vlan-offload"), Some(Feature { on: true, fixed: false }));
        assert_eq!(parse_ethtool_k(k, "rx-vlan-filter"), Some(Feature { on: false, fixed: true }));
        assert_eq!(parse_ethtool_k(k, "rx-gro-hw"), None);
    }

    #[test]
    fn interrupt_names_with_spaces_and_per_cpu_counts() {
        let t = "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 41:     123456          7  GICv3 127 Level     QMan portal 1\n 98:         10         20  PCI-MSIX-0000:01:00.0 1-edge      ice-eth4-TxRx-0\nNMI:          0          0   Non-maskable interrupts\n";
        let l = parse_interrupts(t);
        assert_eq!(l.len(), 3);
        assert_eq!((l[0].irq, l[0].name.as_str()), (24, "ACPI:Ged"));
        assert_eq!((l[1].irq, l[1].per_cpu.clone(), l[1].name.as_str()), (41, vec![123456, 7], "QMan portal 1"));
        assert!(irq_belongs_to(&l[2].name, "eth4"));
        assert!(!irq_belongs_to(&l[2].name, "eth40") && !irq_belongs_to(&l[1].name, "eth4"));
        assert!(irq_belongs_to("eth4-rx-0", "eth4") && irq_belongs_to("mlx5_comp3@pci:0000:01:00.0", "mlx5_comp3"));
    }

    #[test]
    fn meminfo_and_ip_link() {
        let m = "MemTotal: 1 kB\nHugePages_Total:      16\nHugePages_Free:       8\nHugepagesize:       2048 kB\n";
        assert_eq!(parse_meminfo(m), HugePages { total: 16, free: 8, size_kib: 2048 });
        let j = r#"[{"ifindex":6,"ifname":"eth4","mtu":1500,"min_mtu":68,"max_mtu":65535,"xdp":{"mode":1,"prog":{"id":42,"name":"xfwd"}}}]"#;
        assert_eq!(
            parse_ip_link_json(j),
            Some(LinkDetail { max_mtu: Some(65535), xdp_attached: Some(("xdp".into(), 42)) })
        );
        let j = r#"[{"ifindex":6,"ifname":"eth4","mtu":1500}]"#;
        assert_eq!(parse_ip_link_json(j), Some(LinkDetail { max_mtu: None, xdp_attached: None }));
    }
}
