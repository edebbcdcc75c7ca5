//! Ports for tests, benches, examples and fuzz targets, described here once instead of as a
//! struct literal in each of them. Not part of the API (hidden from the docs): the constructors
//! parse their text and panic on a typo, which is right for a fixture and wrong anywhere else.

use core::net::IpAddr;

use super::tables::PortSpec;
use crate::wire::MacAddr;

/// eth5's MAC on the reference board as the fixtures give it.
pub const ETH5: MacAddr = MacAddr([2, 0, 0, 0, 5, 5]);
/// eth4's MAC likewise.
pub const ETH4: MacAddr = MacAddr([2, 0, 0, 0, 4, 4]);

/// Port `name` with `mac`, an MTU of 1500, no link-local address and the addresses `addrs`,
/// each written `address/length`, IPv4 and IPv6 told apart by their form.
///
/// # Panics
///
/// If an address is not written that way.
pub fn port(name: &str, mac: MacAddr, addrs: &[&str]) -> PortSpec {
    let mut spec =
        PortSpec { name: name.into(), mac, mtu: 1500, addrs: Vec::new(), addrs6: Vec::new(), link_local: None };
    for text in addrs {
        let (a, len) = text.split_once('/').unwrap_or_else(|| panic!("{text}: write address/length"));
        let len: u8 = len.parse().unwrap_or_else(|_| panic!("{text}: bad prefix length"));
        match a.parse::<IpAddr>().unwrap_or_else(|_| panic!("{text}: bad address")) {
            IpAddr::V4(v4) => spec.addrs.push((v4, len)),
            IpAddr::V6(v6) => spec.addrs6.push((v6, len)),
        }
    }
    spec
}

/// The reference router's two ports on the rig's IPv4 subnets: eth5 (198.18.10.2/24) towards
/// one side, eth4 (198.18.30.1/24) towards the other, MTU 1500 both.
pub fn reference_ports() -> Vec<PortSpec> {
    vec![port("eth5", ETH5, &["198.18.10.2/24"]), port("eth4", ETH4, &["198.18.30.1/24"])]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_go_to_their_family() {
        let p = port("eth5", ETH5, &["198.18.10.2/24", "2001:2:0:10::2/64"]);
        assert_eq!(p.addrs, [("198.18.10.2".parse().unwrap(), 24)]);
        assert_eq!(p.addrs6, [("2001:2:0:10::2".parse().unwrap(), 64)]);
        assert_eq!((p.mtu, p.link_local), (1500, None));
    }
}
