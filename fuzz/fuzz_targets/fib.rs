//! The XDP path's IPv4 table writer, without the kernel: a FIB changed prefix by prefix
//! (`Fib::repaint`, as kernel mode changes the workers'), published in batches with the
//! prefixes each changed (`Changes4`), and a follower that catches up now and then from the
//! chain alone (`Fib::repaint_from`, as `io::program::dir4` paints the program's set). After
//! every catch-up the follower answers as its source, and the source as a naive longest-prefix
//! match over the routes, at every address the changes touched.
#![no_main]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::l3::fib::{Fib, NhIndex, Prefix};
use xfwd_dataplane::l3::tables::Changes4;

/// The longest prefix of `routes` holding `a`, naively.
fn oracle(routes: &BTreeMap<Prefix, NhIndex>, a: Ipv4Addr) -> Option<NhIndex> {
    (0..=32u8).rev().find_map(|len| routes.get(&Prefix::truncate(a, len)).copied())
}

fuzz_target!(|data: &[u8]| {
    let mut routes: BTreeMap<Prefix, NhIndex> = BTreeMap::new();
    let mut src = Fib::build(&[]).unwrap();
    let mut follower = Fib::build(&[]).unwrap();
    // The tables' ids: the source's publications, and which the follower holds.
    let (mut published, mut held) = (1u64, 1u64);
    let mut chain: Option<Arc<Changes4>> = None;
    let mut pending: Vec<Prefix> = Vec::new();
    let mut touched: Vec<Ipv4Addr> = vec![Ipv4Addr::new(198, 18, 0, 0)];
    for op in data.chunks_exact(4) {
        match op[0] >> 6 {
            // A route set or removed. Prefixes of /8 and longer inside 198.0.0.0/8, so that
            // they nest and overlap (a /8 is 65,536 entries: every run stays quick).
            0 | 1 => {
                let addr = Ipv4Addr::from(0xc600_0000 | u32::from(op[1]) << 16 | u32::from(op[2]) << 8 | u32::from(op[3]));
                let p = Prefix::truncate(addr, 8 + (op[0] & 0x3f) % 25);
                if op[0] >> 6 == 0 {
                    routes.insert(p, NhIndex(u16::from(op[3] % 7) + 1));
                } else {
                    routes.remove(&p);
                }
                src.repaint(p, &routes, |v| *v).unwrap();
                pending.push(p);
                let last = p.broadcast();
                touched.extend([p.addr(), last, Ipv4Addr::from(u32::from(last).wrapping_add(1))]);
            }
            // A publication: the batch since the last one, chained to those before.
            2 => {
                let changes = Changes4::new(published, std::mem::take(&mut pending), chain.take());
                chain = Some(Arc::new(changes));
                published += 1;
            }
            // The follower catches up with the last publication, from the chain.
            _ => {
                let Some(c) = &chain else { continue };
                if held == published {
                    continue;
                }
                let Some(changed) = c.since(held) else {
                    // Cut (too many prefixes back): a whole copy, as the program makes.
                    follower = src.clone();
                    held = published;
                    continue;
                };
                for p in changed {
                    follower.repaint_from(p, &src).unwrap();
                }
                held = published;
                if pending.is_empty() {
                    for &a in &touched {
                        assert_eq!(follower.lookup(a), src.lookup(a), "{a}");
                    }
                }
            }
        }
    }
    for &a in &touched {
        assert_eq!(src.lookup(a), oracle(&routes, a), "{a}");
    }
});
