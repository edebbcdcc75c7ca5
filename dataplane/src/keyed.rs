//! The keyed hash of the shared tables (the FDB, the neighbour tables): which two buckets a key
//! may sit in is decided by a secret drawn when the table is made, so that nobody outside can
//! compute a set of keys that fills a victim's buckets.
//!
//! # Why keyed
//!
//! A table of 8-slot buckets with two candidate buckets per key refuses a key whose two
//! buckets are full. With a fixed, invertible mixer anyone can compute, offline, 16 MACs (or
//! addresses) whose candidates are a victim's two buckets: one frame from each per ageing
//! period keeps the victim out of the FDB for good, and all its unicast floods every port; the
//! same keeps a gateway out of the neighbour table on a large subnet. With a key the placement
//! is unknown outside the process, and such a set is no better than random keys.
//!
//! # The choice
//!
//! One 64×64→128-bit multiply by a secret odd factor after a secret XOR, folded (the high half
//! XOR the low), then folded once more by a fixed factor: two multiplies, as the fixed mixer it
//! replaces had, no table, no per-call state. SipHash (std's `RandomState`) is the textbook keyed hash and
//! several times slower per lookup, on the path of every frame; this is what fast keyed hashers
//! (aHash's fallback, foldhash) do. It is not a cryptographic MAC: it keeps placements secret
//! from someone who sees only which frames flood, which is the attack here. The BPF maps of the
//! XDP path need nothing of this: the kernel seeds each hash map's jhash at random
//! (`htab->hashrnd`, unless `BPF_F_ZERO_SEED`).
//!
//! The key comes from std's `RandomState` (its keys come from the operating system's random
//! source), so that this crate needs no unsafe call to `getrandom` for it. Under `cfg(fuzzing)`
//! the key is fixed, so that a fuzzer's findings replay.

use std::hash::BuildHasher;

/// A table's secret: the XOR and the (odd) factor of [`hash64`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key([u64; 2]);

impl std::fmt::Debug for Key {
    /// Never the secret itself: it would give the placement away in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

impl Key {
    /// A fresh secret from the operating system's random source (fixed when fuzzing).
    pub fn random() -> Key {
        if cfg!(fuzzing) {
            return Key::from_words(0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344);
        }
        let s = std::collections::hash_map::RandomState::new();
        Key::from_words(s.hash_one(0x6b65_795f_305f_u64), s.hash_one(0x6b65_795f_315f_u64))
    }

    /// A given secret, for tests and benchmarks that want one placement every time.
    pub const fn from_words(xor: u64, factor: u64) -> Key {
        Key([xor, factor | 1])
    }
}

/// The 128-bit product of `a` and `b`, its halves XORed: every bit of both reaches the
/// result's middle bits, which the tables take their buckets from.
#[inline(always)]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// `x` hashed under `key` (see the module documentation).
#[inline(always)]
pub fn hash64(x: u64, key: Key) -> u64 {
    // Keyed, then folded once more by a fixed odd constant (PCG's multiplier), so that the
    // bits of both halves of the keyed product reach the top bits of each 32-bit half.
    folded_multiply(folded_multiply(x ^ key.0[0], key.0[1]), 0x5851_f42d_4c95_7f2d)
}

/// A 128-bit key (an IPv6 address; an IPv4 one in the low 32 bits) hashed under `key`: the
/// high half first, its hash folded into the low half, so that no two keys collide before the
/// secret is applied.
#[inline(always)]
pub fn hash128(x: u128, key: Key) -> u64 {
    let hi = (x >> 64) as u64;
    let lo = x as u64;
    if hi == 0 {
        return hash64(lo, key);
    }
    hash64(lo ^ hash64(hi, key), key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_keys_place_the_same_inputs_apart_and_one_key_always_alike() {
        let (a, b) = (Key::from_words(1, 2), Key::from_words(3, 4));
        assert_eq!(hash64(42, a), hash64(42, a));
        assert_ne!(hash64(42, a), hash64(42, b));
        assert_ne!(hash128(1 << 64, a), hash128(1 << 64, b));
        // Drawn keys differ from one table to the next.
        assert_ne!(Key::random(), Key::random());
        assert_eq!(format!("{:?}", Key::random()), "Key(…)");
    }

    #[test]
    fn sequential_keys_spread_over_the_buckets() {
        // MACs of one vendor with sequential low bits, into 1024 buckets by the top 32 bits
        // (as the tables reduce): no bucket holds more than a few times its share.
        let key = Key::random();
        let mut count = vec![0u32; 1024];
        for i in 0..65_536u64 {
            let h = hash64(0x0200_5e00_0000 | i, key);
            count[(((h >> 32) * 1024) >> 32) as usize] += 1;
        }
        let max = *count.iter().max().unwrap();
        assert!(max < 64 * 3, "a bucket took {max} of 64 expected");
    }
}
