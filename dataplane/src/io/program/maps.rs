//! What the XDP program and the code that writes its maps share: the ABI made from
//! bpf/xfwd_abi.h, the errors, and the encoding of a route's hop. A leaf of `io::program`, so
//! that the loader (`xdp`) and the IPv4 table (`dir4`) both use it without using each other.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::l3::export::{FastHop, Via};

/// What the program and this loader share, made by `dataplane/build.rs` from `bpf/xfwd_abi.h`
/// (the one place it is written): its limits, config slots and values, counter slots
/// ([`abi::XdpCounter`]) and wire numbers.
pub mod abi {
    #![allow(dead_code, reason = "the header's constants, not all of which the Rust side reads")]
    include!(concat!(env!("OUT_DIR"), "/xfwd_abi.rs"));
}

/// Why the program could not be loaded or set up.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// libbpf refused the object (verifier, BTF, permissions).
    #[error("loading the XDP program: {0}")]
    Load(String),
    /// The object lacks a map or program this code expects (a build mismatch).
    #[error("the XDP object has no {0}")]
    Missing(&'static str),
    /// A map update failed.
    #[error("updating map {map}: {cause}")]
    Map {
        /// Map name.
        map: &'static str,
        /// What libbpf said.
        cause: String,
    },
    /// Too many ports or queues for the maps.
    #[error("{0}")]
    Limit(String),
    /// `BPF_PROG_TEST_RUN` refused the run.
    #[error("running the XDP program on a test frame: {0}")]
    TestRun(String),
    /// The XDP path was turned on in a program loaded without it.
    #[error("the XDP program was loaded for the AF_XDP path: load it with the XDP path to turn that on")]
    NotBuilt,
}

/// A map update's error, naming the map.
pub(super) fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> XdpError {
    move |e| XdpError::Map { map, cause: format!("{e:#}") }
}

/// An address as it stands in a packet, for the program's map keys and values.
pub trait WireAddr: Copy {
    /// The address as it stands in a packet.
    type Wire: AsRef<[u8]>;
    /// Its bytes.
    fn wire(self) -> Self::Wire;
}

impl WireAddr for Ipv4Addr {
    type Wire = [u8; 4];
    fn wire(self) -> [u8; 4] {
        self.octets()
    }
}

impl WireAddr for Ipv6Addr {
    type Wire = [u8; 16];
    fn wire(self) -> [u8; 16] {
        self.octets()
    }
}

/// `struct xfwd_route4` or `xfwd_route6` for `hop` (`None`: 0 flags, the workers'): port,
/// MTU, gateway as on the wire, flags.
pub(super) fn route_value<A: WireAddr>(hop: Option<FastHop<A>>) -> Vec<u8> {
    let width = std::mem::size_of::<A::Wire>();
    let mut value = vec![0u8; 12 + width];
    if let Some(h) = hop {
        value[..4].copy_from_slice(&u32::from(h.port.0).to_ne_bytes());
        value[4..8].copy_from_slice(&h.mtu.to_ne_bytes());
        let flags = match h.via {
            Via::Gateway(gw) => {
                value[8..8 + width].copy_from_slice(gw.wire().as_ref());
                abi::XFWD_HOP_GATEWAY
            }
            Via::OnLink => abi::XFWD_HOP_ON_LINK,
        };
        value[8 + width..].copy_from_slice(&flags.to_ne_bytes());
    }
    value
}
