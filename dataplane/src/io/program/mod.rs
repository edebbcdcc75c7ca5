//! The XDP program: loaded, attached and counted ([`xdp`]); its XDP-path maps kept in step
//! with the workers' tables ([`fast`]); what a port's driver can do with XDP ([`netdev`]).

pub mod fast;
pub mod netdev;
pub mod xdp;
