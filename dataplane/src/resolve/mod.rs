//! Neighbour resolution: how a next hop's MAC is found, for ARP (IPv4) and neighbour
//! discovery (IPv6) alike, and what happens to the frames that wait for it.
//!
//! A frame whose next hop is unresolved **enters** here from a worker, as
//! [`crate::Action::Glean`]: [`glean`] copies it into a buffer of a pool made at start and
//! queues it for the resolver thread, without allocating on the packet path. The thread
//! ([`thread`]) reads ARP and neighbour discovery frames from packet sockets (the XDP program
//! passes them to the kernel, and packet sockets see them), and **decides** with one pure
//! state machine per family ([`engine`], with [`arp`] and [`ndp`] as its two families): send a
//! request, hold the frame, answer a request, refresh or expire an entry. It is the only
//! writer of the neighbour tables the workers read ([`crate::l3::NeighborTable`]). Frames
//! **leave** through the same packet sockets once their neighbour resolves, or are answered
//! with the family's unreachable error when it does not.
//!
//! **Counted**: requests, replies, resolutions, failures and frames held or dropped, per
//! family ([`arp::ArpCounters`]); a full glean queue is counted by the worker
//! (`glean-queue-full`).
//!
//! Only [`thread`] and [`glean`] touch the kernel or other threads; [`engine`], [`arp`] and
//! [`ndp`] are pure and tested without root.

pub mod arp;
pub mod engine;
pub mod glean;
pub mod ndp;
pub mod thread;
