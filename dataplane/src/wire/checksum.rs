//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

/// One's-complement sum of `data` as big-endian 16-bit words, folded to 16 bits (not inverted).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold(acc)
}

/// Folds a wide one's-complement accumulator into 16 bits.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for `data` (with its checksum field zeroed).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// RFC 1624 eqn. 3: the new checksum `HC'` after one 16-bit word changes from `old` to `new`:
/// `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!hc) + u64::from(!old) + u64::from(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the sum of 00 01 f2 03 f4 f5 f6 f7 is ddf2.
        assert_eq!(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
        assert_eq!(sum(&[0xff]), 0xff00, "odd length pads with zero");
    }

    #[test]
    fn incremental_update_matches_recomputation() {
        // A real IPv4 header (checksum field at 10..12), TTL/protocol word at 8..10.
        let mut h = [
            0x45, 0x00, 0x00, 0x54, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x01, 0, 0, 0xc6, 0x12, 0x00, 0x01, 0xc6, 0x12, 0x01,
            0x02,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(sum(&h), 0xffff, "a header with its checksum sums to all ones");
        let mut state = 0x1234_5678u32;
        for _ in 0..10_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let old = u16::from_be_bytes([h[8], h[9]]);
            let new = state as u16;
            let hc = u16::from_be_bytes([h[10], h[11]]);
            h[8..10].copy_from_slice(&new.to_be_bytes());
            h[10..12].copy_from_slice(&update(hc, old, new).to_be_bytes());
            let mut zeroed = h;
            zeroed[10..12].copy_from_slice(&[0, 0]);
            assert_eq!(sum(&h), 0xffff, "incremental result no longer verifies");
            // One's complement has two zeros (0x0000 and 0xffff): either may come out.
            let full = checksum(&zeroed);
            let inc = u16::from_be_bytes([h[10], h[11]]);
            assert!(
                inc == full || (inc == 0xffff && full == 0) || (inc == 0 && full == 0xffff),
                "{inc:04x} vs {full:04x}"
            );
        }
    }
}
