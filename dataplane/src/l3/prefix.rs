//! IP prefixes of both families: an address and a length with the host bits zero, what routes,
//! subnets and the configuration's `[[route]]` tables are keyed by.
//!
//! One type, [`IpPrefix`], serves both families: its logic (the mask, parsing, containment,
//! order) is the same for 32 and 128 bits, so it is written once over [`PrefixAddr`], which
//! gives only what differs: the address as an integer, the bit width and how the family is
//! named when text is not a prefix. [`Prefix`] and [`Prefix6`] name its two instances, and are
//! what the rest of the tree uses. The address is kept as its integer, so that prefixes order
//! by (address, length) as integers (a route map's range over the prefixes inside another
//! relies on it), and hash and copy as two integers.

use core::fmt;
use core::hash::Hash;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::{BitAnd, BitOr, Not, Shl};
use core::str::FromStr;

mod sealed {
    /// Keeps [`super::PrefixAddr`] to the two address types this module implements it for.
    pub trait Sealed {}
}

/// An IP address as a prefix sees it (implemented for [`Ipv4Addr`] and [`Ipv6Addr`] only):
/// its bits as one integer, most significant first, and what names the family in a message.
pub trait PrefixAddr: sealed::Sealed + Copy + Eq + Ord + Hash + fmt::Debug + fmt::Display + FromStr {
    /// The address as an integer (`u32`, `u128`).
    type Bits: Copy
        + Eq
        + Ord
        + Hash
        + fmt::Debug
        + BitAnd<Output = Self::Bits>
        + BitOr<Output = Self::Bits>
        + Not<Output = Self::Bits>
        + Shl<u32, Output = Self::Bits>;
    /// Bits in an address: the longest prefix.
    const WIDTH: u8;
    /// The integer with no bit set.
    const ZERO: Self::Bits;
    /// The integer with every bit set.
    const ONES: Self::Bits;
    /// The family, as a message names it (`IPv4`).
    const FAMILY: &'static str;
    /// How a prefix of the family is written, with an example (for the message that says
    /// text is not one).
    const FORM: &'static str;
    /// The address as an integer.
    fn to_bits(self) -> Self::Bits;
    /// The address an integer stands for.
    fn from_bits(bits: Self::Bits) -> Self;
}

/// Implements [`PrefixAddr`] for an address type over the integer of its width.
macro_rules! prefix_addr {
    ($addr:ty, $bits:ty, $family:literal, $form:literal) => {
        impl sealed::Sealed for $addr {}

        impl PrefixAddr for $addr {
            type Bits = $bits;
            const WIDTH: u8 = <$bits>::BITS as u8;
            const ZERO: $bits = 0;
            const ONES: $bits = <$bits>::MAX;
            const FAMILY: &'static str = $family;
            const FORM: &'static str = $form;
            #[inline]
            fn to_bits(self) -> $bits {
                <$bits>::from(self)
            }
            #[inline]
            fn from_bits(bits: $bits) -> Self {
                <$addr>::from(bits)
            }
        }
    };
}

prefix_addr!(Ipv4Addr, u32, "IPv4", "a.b.c.d/len, e.g. 10.0.0.0/8");
prefix_addr!(Ipv6Addr, u128, "IPv6", "addr/len, e.g. 2001:db8::/32");

/// An IP prefix: address and length, host bits zero. Ordered by address, then length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPrefix<A: PrefixAddr> {
    /// The network address's bits (the FIBs build from them directly).
    pub(super) addr: A::Bits,
    /// The prefix length, at most `A::WIDTH`.
    pub(super) len: u8,
}

/// An IPv4 prefix.
pub type Prefix = IpPrefix<Ipv4Addr>;
/// An IPv6 prefix.
pub type Prefix6 = IpPrefix<Ipv6Addr>;

/// Why text is not a prefix of family `A`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpPrefixError<A: PrefixAddr> {
    /// Not the family's `addr/len`.
    #[error("`{0}` is not an {family} prefix (write it as {form})", family = A::FAMILY, form = A::FORM)]
    Syntax(String),
    /// Length above the address's width.
    #[error("prefix length {0} is above {width}", width = A::WIDTH)]
    Length(u8),
    /// Bits set past the prefix length.
    #[error("{text} has host bits set; did you mean {fixed}?")]
    HostBits {
        /// As written.
        text: String,
        /// With the host bits cleared.
        fixed: IpPrefix<A>,
    },
}

/// Why text is not an IPv4 prefix.
pub type PrefixError = IpPrefixError<Ipv4Addr>;
/// Why text is not an IPv6 prefix.
pub type Prefix6Error = IpPrefixError<Ipv6Addr>;

/// The network bits of a `len`-bit prefix (`len` at most the width).
#[inline]
fn mask<A: PrefixAddr>(len: u8) -> A::Bits {
    if len == 0 {
        A::ZERO
    } else {
        A::ONES << (u32::from(A::WIDTH) - u32::from(len))
    }
}

impl<A: PrefixAddr> IpPrefix<A> {
    /// `addr/len`, refusing host bits.
    pub fn new(addr: A, len: u8) -> Result<Self, IpPrefixError<A>> {
        if len > A::WIDTH {
            return Err(IpPrefixError::Length(len));
        }
        let a = addr.to_bits();
        if a & !mask::<A>(len) != A::ZERO {
            return Err(IpPrefixError::HostBits {
                text: format!("{addr}/{len}"),
                fixed: IpPrefix { addr: a & mask::<A>(len), len },
            });
        }
        Ok(IpPrefix { addr: a, len })
    }

    /// `addr/len` with the host bits cleared (a length past the width is the width).
    pub fn truncate(addr: A, len: u8) -> Self {
        let len = len.min(A::WIDTH);
        IpPrefix { addr: addr.to_bits() & mask::<A>(len), len }
    }

    /// The network address.
    pub fn addr(&self) -> A {
        A::from_bits(self.addr)
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True for the default route (0.0.0.0/0, ::/0).
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    /// Whether `a` falls inside the prefix.
    #[inline]
    pub fn contains(&self, a: A) -> bool {
        a.to_bits() & mask::<A>(self.len) == self.addr
    }

    /// Whether the two prefixes share any address.
    pub fn overlaps(&self, other: &Self) -> bool {
        let l = self.len.min(other.len);
        self.addr & mask::<A>(l) == other.addr & mask::<A>(l)
    }

    /// The network bits as an integer (the address bits the prefix fixes).
    #[inline]
    pub(super) fn mask(&self) -> A::Bits {
        mask::<A>(self.len)
    }
}

impl IpPrefix<Ipv4Addr> {
    /// The subnet's broadcast address (all host bits set).
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.addr | !self.mask())
    }
}

impl<A: PrefixAddr> fmt::Display for IpPrefix<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len)
    }
}

impl<A: PrefixAddr> FromStr for IpPrefix<A> {
    type Err = IpPrefixError<A>;
    /// `addr/len`; the length is written in one to three digits, with no sign.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || IpPrefixError::Syntax(s.to_owned());
        let (a, l) = s.split_once('/').ok_or_else(syntax)?;
        let addr: A = a.parse().map_err(|_| syntax())?;
        if l.is_empty() || l.len() > 3 || !l.bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax());
        }
        let len: u8 = l.parse().map_err(|_| syntax())?;
        IpPrefix::new(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `s` parsed as a prefix of family `A` and written back, or the error's message.
    fn parsed<A: PrefixAddr>(s: &str) -> String {
        s.parse::<IpPrefix<A>>().map_or_else(|e| e.to_string(), |p| p.to_string())
    }

    fn prefix<A: PrefixAddr>(s: &str) -> IpPrefix<A> {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    fn addr<A: PrefixAddr>(s: &str) -> A {
        s.parse().unwrap_or_else(|_| panic!("{s} is not an address"))
    }

    /// Checks `(prefix, address, whether it contains it)` and `(prefix, prefix, whether they
    /// overlap)`, each pair of prefixes both ways round.
    fn check_relations<A: PrefixAddr>(contains: &[(&str, &str, bool)], overlaps: &[(&str, &str, bool)]) {
        for &(p, a, want) in contains {
            assert_eq!(prefix::<A>(p).contains(addr(a)), want, "{p} contains {a}");
        }
        for &(p, q, want) in overlaps {
            let (p, q) = (prefix::<A>(p), prefix::<A>(q));
            assert_eq!((p.overlaps(&q), q.overlaps(&p)), (want, want), "{p} overlaps {q}");
        }
    }

    /// `texts` parsed, sorted and written back.
    fn sorted<A: PrefixAddr>(texts: &[&str]) -> Vec<String> {
        let mut v: Vec<IpPrefix<A>> = texts.iter().map(|s| prefix(s)).collect();
        v.sort();
        v.iter().map(|p| p.to_string()).collect()
    }

    /// Stands in a `(text, message)` case for "not a prefix of the family", whose message
    /// names the family and shows the form.
    const SYNTAX: &str = "";

    /// Checks that each text parses as a prefix of family `A` written back as the message, or
    /// fails with it; `syntax` is what the family's syntax message says after the text.
    fn check_parses<A: PrefixAddr>(syntax: &str, cases: &[(&str, &str)]) {
        for &(text, want) in cases {
            let want = if want == SYNTAX { format!("`{text}` {syntax}") } else { want.into() };
            assert_eq!(parsed::<A>(text), want);
        }
    }

    #[test]
    fn prefixes_parse_and_say_why_text_is_not_one() {
        check_parses::<Ipv4Addr>(
            "is not an IPv4 prefix (write it as a.b.c.d/len, e.g. 10.0.0.0/8)",
            &[
                ("10.0.0.0/8", "10.0.0.0/8"),
                ("0.0.0.0/0", "0.0.0.0/0"),
                ("198.18.0.1/32", "198.18.0.1/32"),
                ("10.0.0.1/8", "10.0.0.1/8 has host bits set; did you mean 10.0.0.0/8?"),
                ("10.0.0.0/33", "prefix length 33 is above 32"),
                ("10.0.0.0", SYNTAX),
                ("10.0.0/8", SYNTAX),
                ("10.0.0.0/+8", SYNTAX),
                ("10.0.0.0/256", SYNTAX),
                ("2001:db8::/32", SYNTAX),
            ],
        );
        check_parses::<Ipv6Addr>(
            "is not an IPv6 prefix (write it as addr/len, e.g. 2001:db8::/32)",
            &[
                ("2001:db8::/32", "2001:db8::/32"),
                ("::/0", "::/0"),
                ("2001:db8::1/32", "2001:db8::1/32 has host bits set; did you mean 2001:db8::/32?"),
                ("2001:db8::/129", "prefix length 129 is above 128"),
                ("2001:db8::", SYNTAX),
                ("2001:db8::/x", SYNTAX),
                ("2001:db8::/+3", SYNTAX),
                ("2001:db8::/1234", SYNTAX),
                ("10.0.0.0/8", SYNTAX),
            ],
        );
        for bad in ["", "/", "10.0.0.0/", "10.0.0.0/x", "10.0.0.0/0008", "10.0.0.0 /8", "10.0.0.0/8/8"] {
            assert!(matches!(bad.parse::<Prefix>(), Err(PrefixError::Syntax(_))), "{bad}");
            assert!(matches!(bad.replace("10.0.0.0", "2001:db8::").parse::<Prefix6>(), Err(Prefix6Error::Syntax(_))));
        }
        assert_eq!(
            "2001:db8::1/32".parse::<Prefix6>(),
            Err(Prefix6Error::HostBits { text: "2001:db8::1/32".into(), fixed: prefix("2001:db8::/32") })
        );
        assert_eq!(Prefix::new(addr("10.0.0.0"), 33), Err(PrefixError::Length(33)));
    }

    #[test]
    fn prefixes_keep_their_fields_and_truncate_to_their_width() {
        let p = prefix::<Ipv4Addr>("198.18.0.0/15");
        assert_eq!((p.addr(), p.prefix_len(), p.is_default()), (addr("198.18.0.0"), 15, false));
        assert!(prefix::<Ipv4Addr>("0.0.0.0/0").is_default() && prefix::<Ipv6Addr>("::/0").is_default());
        assert_eq!(Prefix::truncate(addr("10.1.2.3"), 40).to_string(), "10.1.2.3/32");
        assert_eq!(Prefix::truncate(addr("10.1.2.3"), 0).to_string(), "0.0.0.0/0");
        assert_eq!(Prefix6::truncate(addr("2001:db8::1"), 32).to_string(), "2001:db8::/32");
        assert_eq!(Prefix6::truncate(addr("2001:db8::1"), 200).to_string(), "2001:db8::1/128");
        assert_eq!(!prefix::<Ipv6Addr>("2001:db8::/32").mask(), u128::MAX >> 32);
    }

    #[test]
    fn prefixes_contain_and_overlap() {
        check_relations::<Ipv4Addr>(
            &[("10.0.0.0/8", "10.255.0.1", true), ("10.0.0.0/8", "11.0.0.1", false), ("0.0.0.0/0", "1.2.3.4", true)],
            &[
                ("10.0.0.0/8", "10.1.0.0/16", true),
                ("10.0.0.0/16", "10.1.0.0/16", false),
                ("0.0.0.0/0", "9.0.0.0/8", true),
            ],
        );
        check_relations::<Ipv6Addr>(
            &[
                ("2001:db8::/32", "2001:db8:ffff::1", true),
                ("2001:db8::/32", "2001:db9::1", false),
                ("::/0", "ff02::1", true),
            ],
            &[
                ("2001:db8::/32", "2001:db8:1::/48", true),
                ("2001:db8::/48", "2001:db8:1::/48", false),
                ("::/0", "fe80::/10", true),
            ],
        );
    }

    #[test]
    fn ipv4_prefixes_have_a_broadcast_address() {
        for (p, want) in
            [("198.18.0.0/24", "198.18.0.255"), ("198.18.0.1/32", "198.18.0.1"), ("0.0.0.0/0", "255.255.255.255")]
        {
            assert_eq!(prefix::<Ipv4Addr>(p).broadcast(), addr::<Ipv4Addr>(want), "{p}");
        }
    }

    #[test]
    fn prefixes_order_by_address_then_length() {
        assert_eq!(
            sorted::<Ipv4Addr>(&["10.1.0.0/16", "10.0.0.0/16", "10.0.0.0/8", "9.0.0.0/8", "0.0.0.0/0"]),
            ["0.0.0.0/0", "9.0.0.0/8", "10.0.0.0/8", "10.0.0.0/16", "10.1.0.0/16"]
        );
        assert_eq!(
            sorted::<Ipv6Addr>(&["2001:db8:1::/48", "2001:db8::/48", "2001:db8::/32", "::/0"]),
            ["::/0", "2001:db8::/32", "2001:db8::/48", "2001:db8:1::/48"]
        );
    }
}
