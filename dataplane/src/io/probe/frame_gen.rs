//! The bench's frame generator (bpf/frame_gen.bpf.c): `BPF_PROG_TEST_RUN` in live-frames mode
//! runs a small XDP program on copies of one UDP frame and sends each out of a device (XDP_TX),
//! as a NIC driver hands its received buffers to XDP.
//!
//! Why not a packet socket (trafgen): a frame a socket sends into a veth arrives at its peer as
//! an skb with little headroom, which the peer's XDP program can only see after the kernel has
//! copied it into a page of its own (measured on the rig: that copy is the larger part of the
//! XDP path's time per frame). A frame sent this way arrives as a frame, with the full XDP
//! headroom: the XDP path runs on it as on a NIC's buffer, and the kernel builds its skb around it
//! without a copy, as a NIC driver does. The receiving port needs NAPI (an XDP program, or GRO
//! on), or veth drops the frame.
//!
//! The program writes the frame's headers whole each time (from the `gen_hdr` map), then the
//! flow's source port and the checksum: the kernel recycles a sent frame's page into a later
//! frame as the receiver left it, and a router rewrote its MACs and TTL (only the first frames
//! of each run were forwarded before it did).
//!
//! Live frames are a kernel facility that a machine may refuse: some kernels answer a live run
//! with `EPERM` even to root (a security module's policy) while plain test runs work. Whether
//! it is allowed is a fact of the machine, asked once by [`live_frames`] (one frame, out of
//! `lo`), so that a caller refuses before it builds anything and says what to use instead:
//! [`Redirect`], the hop of the other sender that gives the receiver XDP frames without live
//! frames (a packet socket's frames, redirected on by an XDP program in the sending host).

use std::net::IpAddr;

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder};
use thiserror::Error;

use crate::wire::ethernet::{self, EthernetFrame};
use crate::wire::ipv4::{self, Ipv4Packet};
use crate::wire::ipv6::{self, Ipv6Packet};
use crate::wire::{checksum, MacAddr};

/// bpf/frame_gen.bpf.c, compiled by build.rs.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/frame_gen.bpf.o"));
/// The section holding `gen_cfg`, as libbpf names its map.
const RODATA: &str = ".rodata.gen";
/// The section holding `redirect_ifindex`, as libbpf names its map.
const RODATA_REDIRECT: &str = ".rodata.redirect";
/// `BPF_F_TEST_XDP_LIVE_FRAMES`.
const LIVE_FRAMES: u32 = 1 << 1;
/// The UDP header's length.
const UDP_LEN: usize = 8;
/// The template's room for headers (`GEN_HDR6`: Ethernet, IPv6, UDP).
const HDR_ROOM: usize = 14 + 40 + UDP_LEN;

/// Why the generator could not be made or run.
#[derive(Debug, Error)]
pub enum GenError {
    /// The frame cannot be built as asked.
    #[error("frame: {0}")]
    Frame(String),
    /// libbpf refused the program.
    #[error("loading the frame generator: {0}")]
    Load(String),
    /// The kernel refused a run (a kernel without live frames (5.18), a device that is gone).
    #[error("running the frame generator: {0}")]
    Run(String),
    /// The kernel refuses live frames on this machine (`EPERM`, also to root): a fact of the
    /// machine, not a fault of the run.
    #[error("this kernel refuses live frames (BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: {0})")]
    LiveFramesRefused(String),
    /// The redirect hop could not be loaded or attached.
    #[error("the sender's XDP redirect hop: {0}")]
    Redirect(String),
}

/// Whether this kernel runs live frames for the calling thread: one frame of the generator,
/// out of `lo` of the calling thread's network namespace (which has no XDP transmit: the
/// frame is dropped there, and nothing is sent). `Ok` when allowed;
/// [`GenError::LiveFramesRefused`] when the kernel refuses them; any other error when the
/// question could not be asked (no privileges to load a program, no `lo`).
pub fn live_frames() -> Result<(), GenError> {
    let spec = UdpSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        src_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src: IpAddr::V4([198, 18, 0, 1].into()),
        dst: IpAddr::V4([198, 18, 0, 2].into()),
        sport: 1024,
        dport: 9,
        wire_len: 64,
    };
    let (frame, off) = udp_frame(&spec)?;
    FrameGen::new(frame, off, 1)?.send(ifindex("lo")?, 1)
}

/// One UDP frame's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSpec {
    /// Ethernet destination and source.
    pub dst_mac: MacAddr,
    /// See `dst_mac`.
    pub src_mac: MacAddr,
    /// IP source and destination, of one family.
    pub src: IpAddr,
    /// See `src`.
    pub dst: IpAddr,
    /// UDP ports (the source port is the first flow's).
    pub sport: u16,
    /// See `sport`.
    pub dport: u16,
    /// The frame's length on the wire with its 4-byte FCS, as RFC 2544 counts it (64: the
    /// smallest); the frame built is 4 bytes shorter, at least its headers and one byte.
    pub wire_len: usize,
}

/// The frame `spec` describes (IPv4: TTL 64, DF; IPv6: hop limit 64; UDP checksum filled; zero
/// payload), and where its UDP header starts. The headers are written by the router's own
/// emitters (`wire`).
pub fn udp_frame(spec: &UdpSpec) -> Result<(Vec<u8>, usize), GenError> {
    let ip_len = match (spec.src, spec.dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => ipv4::MIN_HEADER_LEN,
        (IpAddr::V6(_), IpAddr::V6(_)) => ipv6::HEADER_LEN,
        _ => return Err(GenError::Frame(format!("{} and {} are of two families", spec.src, spec.dst))),
    };
    let udp_off = ethernet::HEADER_LEN + ip_len;
    let len = spec.wire_len.saturating_sub(4).max(udp_off + UDP_LEN + 1);
    let too_long = || GenError::Frame(format!("{len} bytes: longer than an IP packet"));
    let udp_total = u16::try_from(len - udp_off).map_err(|_| too_long())?;
    let mut f = vec![0u8; len];
    let mut eth = EthernetFrame::new_checked(&mut f[..]).map_err(|e| GenError::Frame(format!("{e:?}")))?;
    eth.set_dst(spec.dst_mac);
    eth.set_src(spec.src_mac);
    // The UDP pseudo-header's sum (RFC 768; RFC 8200 section 8.1), unfolded.
    let pseudo = match (spec.src, spec.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            eth.set_ethertype(ethernet::ETHERTYPE_IPV4);
            let total = u16::try_from(len - ethernet::HEADER_LEN).map_err(|_| too_long())?;
            Ipv4Packet::emit(&mut f[ethernet::HEADER_LEN..], total, 0, 64, ipv4::PROTO_UDP, s, d)
                .map_err(|e| GenError::Frame(format!("{e:?}")))?
                .set_dont_frag(); // as trafgen's frames have it
            [s.octets(), d.octets()].iter().map(|a| u64::from(checksum::sum(a))).sum::<u64>()
                + u64::from(ipv4::PROTO_UDP)
                + u64::from(udp_total)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            eth.set_ethertype(ethernet::ETHERTYPE_IPV6);
            Ipv6Packet::emit(&mut f[ethernet::HEADER_LEN..], udp_total, ipv4::PROTO_UDP, 64, &s, &d)
                .map_err(|e| GenError::Frame(format!("{e:?}")))?;
            ipv6::pseudo_header_sum(&s, &d, u32::from(udp_total), ipv4::PROTO_UDP)
        }
        _ => unreachable!("checked above"),
    };
    let udp = &mut f[udp_off..];
    udp[..2].copy_from_slice(&spec.sport.to_be_bytes());
    udp[2..4].copy_from_slice(&spec.dport.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_total.to_be_bytes());
    let sum = checksum::fold(pseudo + u64::from(checksum::sum(udp)));
    // A computed 0 is sent as all ones (0 means "no checksum" in IPv4, and is invalid in IPv6).
    let c = match !sum {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    Ok((f, udp_off))
}

/// The ifindex of device `name` in the calling thread's network namespace (sysfs shows the
/// namespace it was mounted in, which a thread that entered another one does not see).
pub fn ifindex(name: &str) -> Result<u32, GenError> {
    let c = std::ffi::CString::new(name).map_err(|_| GenError::Run(format!("device name {name:?}")))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(GenError::Run(format!("no device {name}: {}", std::io::Error::last_os_error()))),
        i => Ok(i),
    }
}

/// Loads only program `name` of the object's two (each user needs one).
fn only_program(open: &mut libbpf_rs::OpenObject, name: &str) {
    for mut p in open.progs_mut() {
        let this = p.name() == name;
        p.set_autoload(this);
    }
}

/// The loaded generator: one frame, its flows.
pub struct FrameGen {
    object: Object,
    frame: Vec<u8>,
}

impl FrameGen {
    /// Loads the program for `frame` (as [`udp_frame`] built it, its UDP header at `udp_off`),
    /// giving its frames `flows` source ports from the frame's own.
    pub fn new(frame: Vec<u8>, udp_off: usize, flows: u32) -> Result<FrameGen, GenError> {
        let udp = frame
            .get(udp_off..udp_off + UDP_LEN)
            .ok_or_else(|| GenError::Frame(format!("{} bytes: no UDP header at {udp_off}", frame.len())))?;
        if udp_off != 34 && udp_off != 54 {
            return Err(GenError::Frame(format!(
                "the UDP header at {udp_off}: not after Ethernet and IPv4 (34) or IPv6 (54)"
            )));
        }
        // struct gen_cfg: flows, udp_off (u32), sport0 (host order), csum0 (as on the wire).
        let mut cfg = Vec::with_capacity(12);
        cfg.extend_from_slice(&flows.max(1).to_ne_bytes());
        cfg.extend_from_slice(&(udp_off as u32).to_ne_bytes());
        cfg.extend_from_slice(&u16::from_be_bytes([udp[0], udp[1]]).to_ne_bytes());
        cfg.extend_from_slice(&[udp[6], udp[7]]);
        // struct gen_hdr: the headers up to the UDP header's end (room for IPv6's).
        let mut hdr = frame[..udp_off + UDP_LEN].to_vec();
        hdr.resize(HDR_ROOM, 0);
        let load = |e: libbpf_rs::Error| GenError::Load(format!("{e:#}"));
        let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(load)?;
        only_program(&mut open, "gen_xdp");
        open.maps_mut()
            .find(|m| m.name() == RODATA)
            .ok_or_else(|| GenError::Load(format!("no {RODATA} section")))?
            .set_initial_value(&cfg)
            .map_err(load)?;
        let object = open.load().map_err(load)?;
        let map =
            object.maps().find(|m| m.name() == "gen_hdr").ok_or_else(|| GenError::Load("no map gen_hdr".into()))?;
        map.update(&0u32.to_ne_bytes(), &hdr, MapFlags::ANY).map_err(load)?;
        Ok(FrameGen { object, frame })
    }

    /// Sends `count` frames out of `ifindex` (of the calling thread's network namespace), from
    /// the calling CPU, and returns when the kernel has handed them to the device (or dropped
    /// those it refused: veth when its peer has no NAPI, or its ring is full).
    pub fn send(&mut self, ifindex: u32, count: u32) -> Result<(), GenError> {
        self.run(ifindex, count, None).map(|_| ())
    }

    /// Runs the program once on `buffer` (of the frame's length; what a recycled page holds)
    /// without sending it: the verdict and the frame the program made of it (each run takes the
    /// next flow). For tests.
    pub fn run_once(&mut self, ifindex: u32, buffer: &[u8]) -> Result<(u32, Vec<u8>), GenError> {
        self.run(ifindex, 1, Some(buffer))
    }

    /// One `BPF_PROG_TEST_RUN` of `repeat` frames: live (sent) without `buffer`, else once on
    /// `buffer`, giving back what the program left there.
    fn run(&mut self, ifindex: u32, repeat: u32, buffer: Option<&[u8]>) -> Result<(u32, Vec<u8>), GenError> {
        let live = buffer.is_none();
        let prog = self
            .object
            .progs_mut()
            .find(|p| p.name() == "gen_xdp")
            .ok_or_else(|| GenError::Load("no program gen_xdp".into()))?;
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex. XDP_TX sends out of the ingress device.
        let md = [0, self.frame.len() as u32, 0, ifindex, 0, 0];
        let mut ctx: Vec<u8> = md.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mut out = vec![0u8; if live { 0 } else { self.frame.len() + 256 }];
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx),
            data_in: Some(buffer.unwrap_or(&self.frame)),
            // Live frames take no output buffer.
            data_out: (!live).then_some(&mut out[..]),
            flags: if live { LIVE_FRAMES } else { 0 },
            repeat,
            ..Default::default()
        };
        let output = prog.test_run(input).map_err(|e| match e.kind() {
            libbpf_rs::ErrorKind::PermissionDenied if live => GenError::LiveFramesRefused(format!("{e:#}")),
            _ => GenError::Run(format!("{e:#}")),
        })?;
        let verdict = output.return_value;
        let len = output.data.map_or(0, |d| d.len());
        out.truncate(len);
        Ok((verdict, out))
    }
}

/// The other sender's hop, for a kernel that refuses live frames: an XDP program on a helper
/// device (a veth into which a packet socket sends) that redirects every frame out of another
/// device, whose peer then receives XDP frames, as from a NIC. The helper's own receive (veth's
/// copy of each socket buffer into a page, which no NIC has) is paid in the helper's poll.
/// Detached when dropped (a bpf_link), also when the process dies.
pub struct Redirect {
    _link: Link,
    _object: Object,
}

impl Redirect {
    /// Attaches the hop to device `from`, sending every frame it receives out of device `to`
    /// (both ifindexes of the calling thread's network namespace). `from` must take XDP in
    /// native mode (a veth does), and `to`'s peer must poll (NAPI), or it drops the frames.
    pub fn attach(from: u32, to: u32) -> Result<Redirect, GenError> {
        let fail = |e: libbpf_rs::Error| GenError::Redirect(format!("{e:#}"));
        let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(fail)?;
        only_program(&mut open, "gen_redirect");
        open.maps_mut()
            .find(|m| m.name() == RODATA_REDIRECT)
            .ok_or_else(|| GenError::Redirect(format!("no {RODATA_REDIRECT} section")))?
            .set_initial_value(&to.to_ne_bytes())
            .map_err(fail)?;
        let object = open.load().map_err(fail)?;
        let prog = object
            .progs_mut()
            .find(|p| p.name() == "gen_redirect")
            .ok_or_else(|| GenError::Redirect("no program gen_redirect".into()))?;
        let from = i32::try_from(from).map_err(|_| GenError::Redirect(format!("ifindex {from}")))?;
        let link = prog.attach_xdp(from).map_err(fail)?;
        Ok(Redirect { _link: link, _object: object })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    fn spec(src: &str, dst: &str, wire_len: usize) -> UdpSpec {
        UdpSpec {
            dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport: 1024,
            dport: 9,
            wire_len,
        }
    }

    /// The UDP checksum of `f` verified over the pseudo-header, as a receiver does.
    fn udp_ok(f: &[u8]) -> bool {
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let Some(TransportSlice::Udp(udp)) = p.transport else { panic!("not UDP") };
        let expected = match p.net {
            Some(NetSlice::Ipv4(ip)) => udp.to_header().calc_checksum_ipv4(&ip.header().to_header(), udp.payload()),
            Some(NetSlice::Ipv6(ip)) => udp.to_header().calc_checksum_ipv6(&ip.header().to_header(), udp.payload()),
            _ => panic!("not IP"),
        };
        expected.unwrap() == udp.checksum()
    }

    #[test]
    fn a_64_byte_frame_is_60_bytes_of_valid_ipv4_udp() {
        let (f, off) = udp_frame(&spec("198.18.0.1", "198.18.1.1", 64)).unwrap();
        assert_eq!((f.len(), off), (60, 34));
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &p.net else { panic!("not IPv4") };
        let h = ip.header();
        assert_eq!((h.ttl(), h.dont_fragment(), h.total_len()), (64, true, 46));
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
        assert!(udp_ok(&f));
    }

    #[test]
    fn an_ipv6_frame_has_its_mandatory_checksum_and_the_smallest_is_one_byte_of_payload() {
        let (f, off) = udp_frame(&spec("2001:2::1", "2001:2:0:1::1", 64)).unwrap();
        assert_eq!((f.len(), off), (63, 54), "headers 62 and one byte: longer than 64 - 4");
        assert!(udp_ok(&f));
        let (f, _) = udp_frame(&spec("2001:2::1", "2001:2:0:1::1", 128)).unwrap();
        assert_eq!(f.len(), 124);
        assert!(udp_ok(&f));
        let e = udp_frame(&spec("198.18.0.1", "2001:2::1", 64)).unwrap_err();
        assert!(e.to_string().contains("two families"), "{e}");
    }
}
