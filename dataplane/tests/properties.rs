//! Property tests: the tables against naive models, on random inputs.
//!
//! - the FIB against a linear longest-prefix oracle, over random tables changed by random
//!   inserts, deletes and reloads (rebuilds); the IPv6 FIB likewise, its batch lookup too;
//! - the incremental TTL checksum update against a full recomputation;
//! - the FDB against a model map with ageing (a bounded table may refuse a new station, but
//!   never forgets a live one or answers with a wrong port).

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use xfwd_dataplane::l2::{Fdb, Learn};
use xfwd_dataplane::l3::fib::{Fib, NhIndex, Prefix};
use xfwd_dataplane::l3::fib6::{Fib6, Prefix6};
use xfwd_dataplane::time::Seconds;
use xfwd_dataplane::wire::{checksum, Ipv4Packet, MacAddr};
use xfwd_dataplane::PortId;

fn oracle(routes: &[(Prefix, NhIndex)], a: Ipv4Addr) -> Option<NhIndex> {
    routes
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p.contains(a))
        .max_by_key(|(i, (p, _))| (p.prefix_len(), *i))
        .map(|(_, (_, n))| *n)
}

#[derive(Debug, Clone)]
enum Change {
    Insert(u32, u8, u16),
    Delete(usize),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        // Addresses clustered in 10.0.0.0/12 so that prefixes nest and overlap.
        (0u32..(1 << 20), prop::sample::select(vec![8u8, 12, 16, 20, 22, 24, 24, 24, 25, 28, 30, 32]), 1u16..200)
            .prop_map(|(a, l, n)| Change::Insert(0x0a00_0000 | a << 4, l, n)),
        any::<usize>().prop_map(Change::Delete),
    ]
}

fn oracle6(routes: &[(Prefix6, NhIndex)], a: Ipv6Addr) -> Option<NhIndex> {
    routes
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p.contains(a))
        .max_by_key(|(i, (p, _))| (p.prefix_len(), *i))
        .map(|(_, (_, n))| *n)
}

/// Under 2001:db8::/32, the address bits that vary: 40 of them from bit 32 on (so that
/// prefixes nest across the direct table's edge at bit 22, the trie's levels, and the two
/// halves of the address), then the host bits of the /128s.
fn addr6(bits: u64, host: u64) -> Ipv6Addr {
    Ipv6Addr::from((0x2001_0db8u128 << 96) | (u128::from(bits & ((1 << 40) - 1)) << 56) | u128::from(host >> 8))
}

#[derive(Debug, Clone)]
enum Change6 {
    Insert(u64, u64, u8, u16),
    Delete(usize),
}

fn change6() -> impl Strategy<Value = Change6> {
    prop_oneof![
        (
            any::<u64>(),
            any::<u64>(),
            prop::sample::select(vec![
                0u8, 16, 20, 22, 23, 28, 32, 36, 40, 44, 47, 48, 48, 48, 56, 63, 64, 65, 72, 127, 128
            ]),
            1u16..200
        )
            .prop_map(|(a, h, l, n)| Change6::Insert(a, h, l, n)),
        any::<usize>().prop_map(Change6::Delete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fib_matches_the_oracle_through_inserts_deletes_and_reloads(
        changes in prop::collection::vec(change(), 1..120),
        probes in prop::collection::vec(0u32..(1 << 24), 200),
    ) {
        let mut routes: Vec<(Prefix, NhIndex)> = Vec::new();
        for (step, c) in changes.iter().enumerate() {
            match c {
                Change::Insert(a, l, n) => routes.push((Prefix::truncate(Ipv4Addr::from(*a), *l), NhIndex(*n))),
                Change::Delete(i) if !routes.is_empty() => { let i = i % routes.len(); routes.remove(i); }
                Change::Delete(_) => {}
            }
            // Reload every few changes, as SIGHUP would: the rebuilt table must agree throughout.
            if step % 7 == 0 || step + 1 == changes.len() {
                let fib = Fib::build(&routes).unwrap();
                for p in &probes {
                    let a = Ipv4Addr::from(0x0a00_0000 | p);
                    prop_assert_eq!(fib.lookup(a), oracle(&routes, a), "{}", a);
                }
            }
        }
    }

    #[test]
    fn fib6_matches_the_oracle_through_inserts_deletes_and_reloads(
        changes in prop::collection::vec(change6(), 1..120),
        probes in prop::collection::vec((any::<u64>(), any::<u64>()), 200),
    ) {
        let mut routes: Vec<(Prefix6, NhIndex)> = Vec::new();
        for (step, c) in changes.iter().enumerate() {
            match c {
                Change6::Insert(a, h, l, n) => routes.push((Prefix6::truncate(addr6(*a, *h), *l), NhIndex(*n))),
                Change6::Delete(i) if !routes.is_empty() => { let i = i % routes.len(); routes.remove(i); }
                Change6::Delete(_) => {}
            }
            if step % 7 == 0 || step + 1 == changes.len() {
                let fib = Fib6::build(&routes).unwrap();
                // Probes near the routes (sharing their top bits) as well as anywhere under
                // the /32.
                let near = routes.iter().map(|(p, _)| u128::from(p.addr()));
                let addrs: Vec<Ipv6Addr> = probes
                    .iter()
                    .zip(near.chain(std::iter::repeat(0)))
                    .map(|((a, h), r)| if r != 0 && a % 2 == 0 { Ipv6Addr::from(r ^ u128::from(*h >> (a % 64))) } else { addr6(*a, *h) })
                    .collect();
                let mut batch = vec![None; addrs.len()];
                fib.lookup_batch(&addrs, &mut batch);
                for (a, b) in addrs.iter().zip(&batch) {
                    let want = oracle6(&routes, *a);
                    prop_assert_eq!(fib.lookup(*a), want, "{}", a);
                    prop_assert_eq!(*b, want, "batch: {}", a);
                }
            }
        }
    }

    #[test]
    fn ttl_decrement_matches_a_full_checksum(header in prop::array::uniform20(any::<u8>()), ttl in 2u8..=255) {
        let mut h = header;
        h[0] = 0x45;
        h[2..4].copy_from_slice(&20u16.to_be_bytes());
        h[8] = ttl;
        h[10] = 0;
        h[11] = 0;
        let c = checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
        p.decrement_ttl();
        prop_assert!(p.checksum_ok());
        let mut z = h;
        z[10] = 0;
        z[11] = 0;
        let full = checksum::checksum(&z);
        let inc = u16::from_be_bytes([h[10], h[11]]);
        prop_assert!(inc == full || (inc, full) == (0xffff, 0) || (inc, full) == (0, 0xffff));
    }

    #[test]
    fn fdb_never_contradicts_a_model_with_ageing(
        events in prop::collection::vec((0u32..48, 0u8..4, 0u32..4), 1..400),
        ageing in 1u32..20,
    ) {
        // A small table (16 slots for 48 stations) so that refusals and reuse both happen.
        let fdb = Fdb::new(16, ageing);
        let mut model: HashMap<u32, (u8, u32)> = HashMap::new();
        let mut now = 1u32;
        for (mac_i, port, dt) in events {
            now += dt;
            let mac = MacAddr::from_u64(0x0200_0000_0000 | u64::from(mac_i));
            match fdb.learn(mac, PortId(port), Seconds(now)) {
                Learn::Full => {}
                _ => { model.insert(mac_i, (port, now)); }
            }
            // Whatever the table answers must be what the model says, and live.
            for (m, (p, seen)) in &model {
                let got = fdb.lookup(MacAddr::from_u64(0x0200_0000_0000 | u64::from(*m)), Seconds(now));
                if now - seen > ageing {
                    prop_assert_eq!(got, None, "mac {} aged out", m);
                } else {
                    // Live entries are never evicted: only empty or aged slots are reused.
                    prop_assert_eq!(got, Some(PortId(*p)), "mac {} lost or on the wrong port", m);
                }
            }
            prop_assert!(fdb.len(Seconds(now)) <= 16);
        }
    }
}
