//! What the kernel advertises about a device's XDP and AF_XDP support, its queues and their
//! NAPI instances: the `netdev` generic-netlink family (Linux 6.3+ for the device, 6.8+ for
//! queues and NAPI). Read-only: only `*_GET` requests are sent. `xfwd doctor` reads it for its
//! report; the XDP path (`--path xdp`, [`super::fast`]) for whether each egress takes the
//! frames the program redirects to it (`ndo-xmit`): a driver without it refuses them, and the
//! kernel drops them where the program cannot count them. A veth has it only while its peer
//! runs NAPI (GRO on, or an XDP program there), and gains or loses it when the peer changes.
//!
//! The messages are small and few (one request per port and kind), so they are written and
//! read here by hand rather than through a netlink crate: [`Attrs`] walks the attributes of an
//! answer, and is what the unit tests feed with constructed bytes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::Serialize;

// Generic netlink's controller, to find the `netdev` family's id (linux/genetlink.h).
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

// The netdev family (linux/netdev.h).
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_CMD_QUEUE_GET: u8 = 10;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;
const NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: u16 = 5;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_IRQ: u16 = 3;
const NETDEV_A_NAPI_PID: u16 = 4;
const NETDEV_A_QUEUE_ID: u16 = 1;
const NETDEV_A_QUEUE_IFINDEX: u16 = 2;
const NETDEV_A_QUEUE_TYPE: u16 = 3;
const NETDEV_A_QUEUE_NAPI_ID: u16 = 4;
const NETDEV_QUEUE_TYPE_RX: u32 = 0;

/// `netdev_xdp_act` bits of `xdp-features`.
pub mod xdp_act {
    /// XDP_ABORTED, DROP, PASS and TX in the driver (native XDP).
    pub const BASIC: u64 = 1;
    /// XDP_REDIRECT in the driver (what an XSKMAP redirect needs).
    pub const REDIRECT: u64 = 2;
    /// The driver transmits redirected frames (`ndo_xdp_xmit`).
    pub const NDO_XMIT: u64 = 4;
    /// AF_XDP zero-copy.
    pub const XSK_ZEROCOPY: u64 = 8;
    /// Offload to the NIC.
    pub const HW_OFFLOAD: u64 = 16;
    /// Multi-buffer frames on receive.
    pub const RX_SG: u64 = 32;
    /// Multi-buffer frames through `ndo_xdp_xmit`.
    pub const NDO_XMIT_SG: u64 = 64;
}

/// What `netdev dev-get` says of one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DevFeatures {
    /// `xdp-features` (bits of [`xdp_act`]).
    pub xdp_features: u64,
    /// Largest multi-buffer frame in zero-copy mode, in buffers.
    pub xdp_zc_max_segs: Option<u32>,
    /// `xdp-rx-metadata-features` (timestamp 1, hash 2, VLAN tag 4).
    pub xdp_rx_metadata: Option<u64>,
    /// `xsk-features` (TX timestamp 1, TX checksum 2).
    pub xsk_features: Option<u64>,
}

impl DevFeatures {
    /// Native XDP (the driver runs the program).
    pub fn native(&self) -> bool {
        self.xdp_features & xdp_act::BASIC != 0
    }
    /// XDP_REDIRECT from the driver (an XSKMAP redirect in native mode).
    pub fn redirect(&self) -> bool {
        self.xdp_features & xdp_act::REDIRECT != 0
    }
    /// AF_XDP zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.xdp_features & xdp_act::XSK_ZEROCOPY != 0
    }
    /// Multi-buffer frames on receive.
    pub fn rx_sg(&self) -> bool {
        self.xdp_features & xdp_act::RX_SG != 0
    }
    /// Takes frames an XDP program redirects to it (`ndo_xdp_xmit`): an egress of the XDP
    /// path.
    pub fn takes_redirects(&self) -> bool {
        self.xdp_features & xdp_act::NDO_XMIT != 0
    }
    /// `xdp-features` by the kernel's names (as `ynl` prints them), joined by `,`; `none` when
    /// no bit is set.
    pub fn xdp_names(&self) -> String {
        const NAMES: [&str; 7] =
            ["basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"];
        let set: Vec<&str> =
            NAMES.iter().enumerate().filter(|(i, _)| self.xdp_features & (1 << i) != 0).map(|(_, n)| *n).collect();
        if set.is_empty() {
            "none".to_owned()
        } else {
            set.join(",")
        }
    }
}

/// One queue as `netdev queue-get` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Queue {
    /// Queue id.
    pub id: u32,
    /// Receive (true) or transmit queue.
    pub rx: bool,
    /// The NAPI instance serving it, where the driver says.
    pub napi_id: Option<u32>,
}

/// One NAPI instance as `netdev napi-get` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Napi {
    /// NAPI id.
    pub id: u32,
    /// Its interrupt, where the driver says.
    pub irq: Option<u32>,
    /// Its kernel thread, when threaded.
    pub pid: Option<u32>,
}

/// The attributes of a netlink message body: (type, payload) in order.
#[derive(Debug, Clone, Copy)]
pub struct Attrs<'a>(pub &'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let b = self.0;
        if b.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
        // The top two bits of the type are flags (nested, byte order).
        let kind = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff;
        if len < 4 || len > b.len() {
            self.0 = &[];
            return None;
        }
        let payload = &b[4..len];
        self.0 = &b[len.next_multiple_of(4).min(b.len())..];
        Some((kind, payload))
    }
}

fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(..4)?.try_into().ok()?))
}

fn u64_of(p: &[u8]) -> Option<u64> {
    match p.len() {
        4 => u32_of(p).map(u64::from),
        8 => Some(u64::from_ne_bytes(p.try_into().ok()?)),
        _ => None,
    }
}

/// Reads a `dev-get` answer's attributes.
pub fn parse_dev(attrs: Attrs) -> DevFeatures {
    let mut d = DevFeatures::default();
    for (kind, p) in attrs {
        match kind {
            NETDEV_A_DEV_XDP_FEATURES => d.xdp_features = u64_of(p).unwrap_or(0),
            NETDEV_A_DEV_XDP_ZC_MAX_SEGS => d.xdp_zc_max_segs = u32_of(p),
            NETDEV_A_DEV_XDP_RX_METADATA_FEATURES => d.xdp_rx_metadata = u64_of(p),
            NETDEV_A_DEV_XSK_FEATURES => d.xsk_features = u64_of(p),
            _ => {}
        }
    }
    d
}

/// The u32 attributes `kinds` of an answer, in that order (`None`: absent).
fn u32s<const N: usize>(attrs: Attrs, kinds: [u16; N]) -> [Option<u32>; N] {
    let mut found = [None; N];
    for (k, p) in attrs {
        if let Some(i) = kinds.iter().position(|&w| w == k) {
            found[i] = u32_of(p);
        }
    }
    found
}

/// Reads a `queue-get` answer's attributes, if it is about `ifindex`.
pub fn parse_queue(attrs: Attrs, ifindex: u32) -> Option<Queue> {
    let kinds = [NETDEV_A_QUEUE_ID, NETDEV_A_QUEUE_IFINDEX, NETDEV_A_QUEUE_TYPE, NETDEV_A_QUEUE_NAPI_ID];
    let [id, dev, kind, napi_id] = u32s(attrs, kinds);
    (dev == Some(ifindex)).then_some(Queue { id: id?, rx: kind? == NETDEV_QUEUE_TYPE_RX, napi_id })
}

/// Reads a `napi-get` answer's attributes, if it is about `ifindex`.
pub fn parse_napi(attrs: Attrs, ifindex: u32) -> Option<Napi> {
    let [id, dev, irq, pid] =
        u32s(attrs, [NETDEV_A_NAPI_ID, NETDEV_A_NAPI_IFINDEX, NETDEV_A_NAPI_IRQ, NETDEV_A_NAPI_PID]);
    (dev == Some(ifindex)).then_some(Napi { id: id?, irq, pid })
}

/// A generic-netlink socket talking to the `netdev` family.
#[derive(Debug)]
pub struct Netdev {
    fd: OwnedFd,
    family: u16,
    seq: u32,
}

const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;

fn push_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

impl Netdev {
    /// Opens the socket and finds the family; `None` where the kernel has no `netdev` family.
    pub fn open() -> io::Result<Option<Netdev>> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a socket we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let tv = libc::timeval { tv_sec: 2, tv_usec: 0 };
        // A receive timeout, so a netlink answer that never comes cannot hang the caller.
        let _ = crate::sys::set_opt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, tv);
        let mut nl = Netdev { fd, family: GENL_ID_CTRL, seq: 0 };
        let mut name = b"netdev".to_vec();
        name.push(0);
        let answers = match nl.request(CTRL_CMD_GETFAMILY, false, &[(CTRL_ATTR_FAMILY_NAME, name)]) {
            Ok(a) => a,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        let id = answers
            .iter()
            .flat_map(|a| Attrs(a))
            .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, p)| Some(u16::from_ne_bytes(p.get(..2)?.try_into().ok()?)));
        Ok(id.map(|family| Netdev { family, ..nl }))
    }

    /// `dev-get` for one device.
    pub fn dev(&mut self, ifindex: u32) -> io::Result<DevFeatures> {
        let a = self.request(NETDEV_CMD_DEV_GET, false, &[(NETDEV_A_DEV_IFINDEX, ifindex.to_ne_bytes().to_vec())])?;
        Ok(a.first().map(|b| parse_dev(Attrs(b))).unwrap_or_default())
    }

    /// `queue-get` dumped for one device (Linux 6.8+; an older kernel answers EOPNOTSUPP).
    pub fn queues(&mut self, ifindex: u32) -> io::Result<Vec<Queue>> {
        let a =
            self.request(NETDEV_CMD_QUEUE_GET, true, &[(NETDEV_A_QUEUE_IFINDEX, ifindex.to_ne_bytes().to_vec())])?;
        Ok(a.iter().filter_map(|b| parse_queue(Attrs(b), ifindex)).collect())
    }

    /// `napi-get` dumped for one device (Linux 6.8+).
    pub fn napis(&mut self, ifindex: u32) -> io::Result<Vec<Napi>> {
        let a = self.request(NETDEV_CMD_NAPI_GET, true, &[(NETDEV_A_NAPI_IFINDEX, ifindex.to_ne_bytes().to_vec())])?;
        Ok(a.iter().filter_map(|b| parse_napi(Attrs(b), ifindex)).collect())
    }

    /// Sends one request and returns the attribute bytes of every answer (one, or many for a
    /// dump), or the kernel's error.
    fn request(&mut self, cmd: u8, dump: bool, attrs: &[(u16, Vec<u8>)]) -> io::Result<Vec<Vec<u8>>> {
        self.seq += 1;
        let mut msg = vec![0u8; NLMSG_HDRLEN];
        msg.extend_from_slice(&[cmd, 1, 0, 0]);
        for (k, p) in attrs {
            push_attr(&mut msg, *k, p);
        }
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK | if dump { libc::NLM_F_DUMP } else { 0 }) as u16;
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&self.family.to_ne_bytes());
        msg[6..8].copy_from_slice(&flags.to_ne_bytes());
        msg[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        // SAFETY: `msg` is a valid buffer of its length; the socket is ours; the kernel is the
        // default destination of an unconnected netlink socket.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut rest = &buf[..n as usize];
            while rest.len() >= NLMSG_HDRLEN {
                let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap_or_default()) as usize;
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                let seq = u32::from_ne_bytes(rest[8..12].try_into().unwrap_or_default());
                if len < NLMSG_HDRLEN || len > rest.len() {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "truncated netlink answer"));
                }
                let body = &rest[NLMSG_HDRLEN..len];
                let next = &rest[len.next_multiple_of(4).min(rest.len())..];
                if seq != self.seq {
                    // A late answer to an earlier request that timed out: not this one's.
                    rest = next;
                    continue;
                }
                match kind as i32 {
                    libc::NLMSG_DONE => return Ok(out),
                    libc::NLMSG_ERROR => {
                        let code = body.get(..4).map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap_or_default()));
                        if code != 0 {
                            return Err(io::Error::from_raw_os_error(-code));
                        }
                        // The acknowledgement that ends a request that was not a dump.
                        return Ok(out);
                    }
                    // Other control messages (NOOP, OVERRUN) carry no answer.
                    k if k < libc::NLMSG_MIN_TYPE => {}
                    _ => out.push(body.get(GENL_HDRLEN..).unwrap_or_default().to_vec()),
                }
                rest = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(list: &[(u16, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (k, p) in list {
            push_attr(&mut b, *k, p);
        }
        b
    }

    #[test]
    fn dev_attributes_are_read_whatever_their_order_and_width() {
        // As the kernel answers for a zero-copy NIC: xdp-features as u64, others u32/u64.
        let b = attrs(&[
            (NETDEV_A_DEV_IFINDEX, &7u32.to_ne_bytes()),
            (NETDEV_A_DEV_XSK_FEATURES, &2u64.to_ne_bytes()),
            (NETDEV_A_DEV_XDP_FEATURES, &(xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::XSK_ZEROCOPY).to_ne_bytes()),
            (NETDEV_A_DEV_XDP_ZC_MAX_SEGS, &1u32.to_ne_bytes()),
            (99, b"ignored"),
        ]);
        let d = parse_dev(Attrs(&b));
        assert!(d.native() && d.redirect() && d.zero_copy() && !d.rx_sg());
        assert_eq!((d.xdp_zc_max_segs, d.xsk_features, d.xdp_rx_metadata), (Some(1), Some(2), None));
        // A device without native XDP advertises 0.
        let d = parse_dev(Attrs(&attrs(&[(NETDEV_A_DEV_XDP_FEATURES, &0u64.to_ne_bytes())])));
        assert!(!d.native() && !d.zero_copy());
    }

    #[test]
    fn queues_and_napis_of_other_devices_are_left_out() {
        let q = attrs(&[
            (NETDEV_A_QUEUE_ID, &3u32.to_ne_bytes()),
            (NETDEV_A_QUEUE_IFINDEX, &7u32.to_ne_bytes()),
            (NETDEV_A_QUEUE_TYPE, &NETDEV_QUEUE_TYPE_RX.to_ne_bytes()),
            (NETDEV_A_QUEUE_NAPI_ID, &8195u32.to_ne_bytes()),
        ]);
        assert_eq!(parse_queue(Attrs(&q), 7), Some(Queue { id: 3, rx: true, napi_id: Some(8195) }));
        assert_eq!(parse_queue(Attrs(&q), 8), None);
        let n = attrs(&[
            (NETDEV_A_NAPI_IFINDEX, &7u32.to_ne_bytes()),
            (NETDEV_A_NAPI_ID, &8195u32.to_ne_bytes()),
            (NETDEV_A_NAPI_IRQ, &41u32.to_ne_bytes()),
        ]);
        assert_eq!(parse_napi(Attrs(&n), 7), Some(Napi { id: 8195, irq: Some(41), pid: None }));
    }

    #[test]
    fn features_print_by_the_kernel_s_names_and_ndo_xmit_makes_an_egress() {
        let d = |bits| DevFeatures { xdp_features: bits, ..Default::default() };
        assert_eq!(d(0).xdp_names(), "none");
        let veth = xdp_act::BASIC | xdp_act::REDIRECT | xdp_act::RX_SG;
        assert_eq!(d(veth).xdp_names(), "basic,redirect,rx-sg");
        assert!(!d(veth).takes_redirects());
        assert!(d(veth | xdp_act::NDO_XMIT).takes_redirects());
    }

    #[test]
    fn the_kernel_answers_for_loopback_and_refuses_an_interface_that_is_not_there() {
        // Unprivileged and in any namespace: `lo` is ifindex 1 and runs no native XDP.
        let Some(mut nl) = Netdev::open().unwrap() else {
            return; // before Linux 6.3
        };
        let lo = nl.dev(1).unwrap();
        assert!(!lo.native() && !lo.takes_redirects(), "{}", lo.xdp_names());
        assert_eq!(nl.dev(u32::MAX).unwrap_err().raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn broken_attributes_end_the_walk_without_panicking() {
        // Length 2 (< header), then a length past the end.
        assert_eq!(Attrs(&[2, 0, 1, 0, 9, 9]).count(), 0);
        assert_eq!(Attrs(&[40, 0, 1, 0, 1, 2, 3, 4]).count(), 0);
        // A good attribute followed by a truncated one.
        let mut b = attrs(&[(1, &5u32.to_ne_bytes())]);
        b.extend_from_slice(&[8, 0]);
        assert_eq!(Attrs(&b).collect::<Vec<_>>(), vec![(1, &5u32.to_ne_bytes()[..])]);
    }
}
