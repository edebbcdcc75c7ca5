//! What is known about drivers that the kernel's advertised features do not say: which queue
//! index the driver gives XDP, and what else breaks AF_XDP's usual assumptions. One entry per
//! driver, each with the reason; a driver not listed is assumed to follow the rules (0-based
//! queue indices, the advertised features are the truth). `xfwd doctor` reports from this
//! table; the forwarder's warnings name the way out from it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::Serialize;

/// The queue index a driver's frames carry to the XDP program (`ctx->rx_queue_index`), which
/// picks the AF_XDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueIndex {
    /// 0 … n−1, one per RX queue: one socket per queue works.
    ZeroBased,
    /// veth: the sender's TX queue (no RSS of its own) in native mode. In generic mode the
    /// sender's TX queue less one (the kernel reads the TX queue it kept as a recorded RX
    /// queue, which is stored plus one): queue 0 for TX queues 0 and 1, so on a veth of at
    /// most two queues every frame shows as queue 0, from whichever CPU sent it.
    SenderTxQueue,
    /// A hardware frame-queue id, large and different per frame queue: no socket can be bound
    /// to it in native mode; in generic mode every frame shows as queue 0, from every CPU.
    HardwareQueueId,
}

impl QueueIndex {
    /// Whether generic XDP sees every frame of a port with `rx_queues` RX queues as queue 0,
    /// from whichever CPU received it: one socket per queue then leaves all but queue 0's
    /// idle, and the sockets must be chosen per CPU instead.
    pub fn generic_queue_zero(self, rx_queues: u32) -> bool {
        match self {
            QueueIndex::HardwareQueueId => true,
            QueueIndex::SenderTxQueue => rx_queues <= 2,
            QueueIndex::ZeroBased => false,
        }
    }
}

/// One driver's known behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Quirk {
    /// The driver's usual name.
    pub driver: &'static str,
    /// Every name `ethtool -i` may give it (the module's name, which the source tree's file
    /// names do not always match: mainline builds dpaa_eth as the module `fsl_dpa`).
    pub names: &'static [&'static str],
    /// The queue index in native mode.
    pub queue_index: QueueIndex,
    /// Attaching or detaching a program restarts the interface (a link flap).
    pub attach_restarts_link: bool,
    /// VLAN tags are removed before XDP when `rx-vlan-offload` is on.
    pub strips_vlan_before_xdp: bool,
    /// Why: what the driver's source or its maintainers say.
    pub reason: &'static str,
}

/// The table. Sources are the drivers' mainline code as read for this project (see shared
/// notes); check a new kernel before relying on an entry.
pub const QUIRKS: &[Quirk] = &[
    Quirk {
        driver: "dpaa_eth",
        names: &["fsl_dpa", "dpaa_eth", "fsl_dpaa_eth"],
        queue_index: QueueIndex::HardwareQueueId,
        attach_restarts_link: true,
        strips_vlan_before_xdp: false,
        reason: "dpaa_fq_init registers each RX frame queue's XDP rxq with its hardware frame-queue id \
                 as the queue index; the receive path records no RX queue in the skb, so generic XDP \
                 sees queue 0 from every CPU's portal; no AF_XDP zero-copy; setting a program \
                 restarts the port",
    },
    Quirk {
        driver: "veth",
        names: &["veth"],
        queue_index: QueueIndex::SenderTxQueue,
        attach_restarts_link: false,
        strips_vlan_before_xdp: false,
        reason: "a frame arrives on the queue its sender transmitted it on; no zero-copy; in generic \
                 mode the program sees that queue less one (queue 0 for the first two)",
    },
    Quirk {
        driver: "dpaa2-eth",
        names: &["fsl_dpaa2_eth", "fsl-dpaa2-eth", "dpaa2-eth", "dpaa2_eth"],
        queue_index: QueueIndex::ZeroBased,
        attach_restarts_link: true,
        strips_vlan_before_xdp: false,
        reason: "0-based queues; AF_XDP zero-copy on DPNIs with at most 8 queues (Linux 6.2+); \
                 setting a program reconfigures the DPNI",
    },
    Quirk {
        driver: "mlx5_core",
        names: &["mlx5_core"],
        queue_index: QueueIndex::ZeroBased,
        attach_restarts_link: false,
        strips_vlan_before_xdp: true,
        reason: "0-based channels, zero-copy; with rx-vlan-offload on the hardware strips the tag \
                 into the descriptor before XDP",
    },
    Quirk {
        driver: "ice",
        names: &["ice"],
        queue_index: QueueIndex::ZeroBased,
        attach_restarts_link: false,
        strips_vlan_before_xdp: true,
        reason: "0-based queues, zero-copy; rx-vlan-offload strips the tag before XDP",
    },
    Quirk {
        driver: "i40e",
        names: &["i40e"],
        queue_index: QueueIndex::ZeroBased,
        attach_restarts_link: false,
        strips_vlan_before_xdp: true,
        reason: "0-based queues, zero-copy; rx-vlan-offload strips the tag before XDP",
    },
    Quirk {
        driver: "ixgbe",
        names: &["ixgbe"],
        queue_index: QueueIndex::ZeroBased,
        attach_restarts_link: true,
        strips_vlan_before_xdp: true,
        reason: "0-based queues, zero-copy; rx-vlan-offload strips the tag before XDP; setting a \
                 program resets the adapter",
    },
];

/// The entry for `driver` (a name as `ethtool -i` gives it), if it has one.
pub fn lookup(driver: &str) -> Option<&'static Quirk> {
    QUIRKS.iter().find(|q| q.names.contains(&driver))
}

/// The name of `ifname`'s driver as `ethtool -i` gives it (the `ETHTOOL_GDRVINFO` ioctl), or
/// `None` where the interface does not exist or the call fails.
pub fn driver_name(ifname: &str) -> Option<String> {
    const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
    // struct ethtool_drvinfo: cmd, then driver[32], version[32], fw_version[32], bus_info[32],
    // erom_version[32], reserved2[12], and five u32 counts: 196 bytes.
    let mut info = [0u8; 196];
    info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
    ethtool_ioctl(ifname, &mut info)?;
    let driver = &info[4..36];
    let end = driver.iter().position(|&b| b == 0).unwrap_or(driver.len());
    Some(String::from_utf8_lossy(&driver[..end]).into_owned()).filter(|d| !d.is_empty())
}

/// `SIOCETHTOOL` on `ifname` with the request at `data` (its first u32 the command).
fn ethtool_ioctl(ifname: &str, data: &mut [u8]) -> Option<()> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= req.ifr_name.len() {
        return None;
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = data.as_mut_ptr().cast();
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a socket we just opened and own alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `req` names the interface and points at `data`, which the callers size for the
    // command's answer (checked against the count they asked for) and which outlives the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    (r == 0).then_some(())
}

/// The driver's statistics of `ifname` as `ethtool -S` gives them (`ETHTOOL_GSTRINGS` and
/// `ETHTOOL_GSTATS`), in the driver's order; `None` where it has none or the calls fail.
pub fn ethtool_stats(ifname: &str) -> Option<Vec<(String, u64)>> {
    const ETHTOOL_GSSET_INFO: u32 = 0x37;
    const ETHTOOL_GSTRINGS: u32 = 0x1b;
    const ETHTOOL_GSTATS: u32 = 0x1d;
    const ETH_SS_STATS: u32 = 1;
    const ETH_GSTRING_LEN: usize = 32;
    // struct ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per set asked.
    let mut info = [0u8; 20];
    info[..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
    info[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    ethtool_ioctl(ifname, &mut info)?;
    if u64::from_ne_bytes(info[8..16].try_into().ok()?) & (1 << ETH_SS_STATS) == 0 {
        return None;
    }
    let n = u32::from_ne_bytes(info[16..20].try_into().ok()?) as usize;
    if n == 0 || n > 65_536 {
        return None;
    }
    // struct ethtool_gstrings: cmd, string_set, len, then len names of 32 bytes.
    let mut names = vec![0u8; 12 + n * ETH_GSTRING_LEN];
    names[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    names[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    names[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool_ioctl(ifname, &mut names)?;
    // struct ethtool_stats: cmd, n_stats, then n_stats u64s.
    let mut stats = vec![0u8; 8 + n * 8];
    stats[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    stats[4..8].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool_ioctl(ifname, &mut stats)?;
    let got = (u32::from_ne_bytes(stats[4..8].try_into().ok()?) as usize).min(n);
    Some(
        (0..got)
            .map(|i| {
                let raw = &names[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                let value = u64::from_ne_bytes(stats[8 + i * 8..16 + i * 8].try_into().unwrap_or([0; 8]));
                (String::from_utf8_lossy(&raw[..end]).into_owned(), value)
            })
            .collect(),
    )
}

/// Frames a veth refused to take from XDP redirects towards its peer (its
/// `tx_queue_N_xdp_xmit_errors`, summed: its peer's ring was full, or a frame too long for
/// it); `None`
/// for other drivers or where the statistics cannot be read.
pub fn veth_redirects_refused(ifname: &str) -> Option<u64> {
    let stats = ethtool_stats(ifname)?;
    let refused = stats.iter().filter(|(n, _)| n.starts_with("tx_queue_") && n.ends_with("_xdp_xmit_errors"));
    refused.map(|(_, v)| *v).reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_driver_once_and_the_board_first() {
        assert_eq!(QUIRKS[0].driver, "dpaa_eth");
        for (i, q) in QUIRKS.iter().enumerate() {
            assert!(q.names.contains(&q.driver), "{}: its own name is one of its names", q.driver);
            for n in q.names {
                assert!(QUIRKS[..i].iter().all(|o| !o.names.contains(n)), "{n} twice");
            }
            assert!(!q.reason.is_empty());
        }
        assert_eq!(lookup("fsl_dpa").map(|q| q.queue_index), Some(QueueIndex::HardwareQueueId));
        assert_eq!(lookup("e1000"), None);
    }

    #[test]
    fn a_missing_or_impossible_interface_has_no_driver() {
        // No privilege needed.
        assert_eq!(driver_name("xfwd-no-such0"), None);
        assert_eq!(driver_name(""), None);
        assert_eq!(driver_name("a-name-longer-than-ifnamsiz"), None);
        assert_eq!(ethtool_stats("xfwd-no-such0"), None);
        // `lo` has no driver statistics.
        assert_eq!(veth_redirects_refused("lo"), None);
    }
}
