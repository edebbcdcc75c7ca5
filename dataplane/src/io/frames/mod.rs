//! Where frames go: the UMEMs and the workers' sockets ([`xsk`]), the ring boundary
//! ([`ring`]) and the workers that move frames between the rings ([`worker`]). The frame
//! ownership rule of [`crate::io`] holds for all three.

pub mod ring;
pub mod worker;
pub mod xsk;
