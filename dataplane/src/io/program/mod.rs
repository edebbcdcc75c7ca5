//! The XDP program: loaded, attached and counted ([`xdp`]); its XDP-path maps kept in step
//! with the workers' tables ([`fast`]), the IPv4 routes in the workers' own structure
//! ([`dir4`]); what a port's driver can do with XDP ([`netdev`]).

pub mod dir4;
pub mod fast;
pub mod maps;
pub mod netdev;
pub mod xdp;
