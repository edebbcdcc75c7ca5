//! Every wire view over arbitrary bytes: constructors check, accessors never panic after.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xfwd_dataplane::wire::icmpv6::Ndp;
use xfwd_dataplane::wire::{ArpPacket, EthernetFrame, IcmpPacket, Icmpv6Packet, Ipv4Packet, Ipv6Packet};

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = EthernetFrame::new_checked(data) {
        let _ = (e.dst(), e.src(), e.ethertype(), e.dst().is_reserved_link_local());
    }
    for at in [0, 14, 18] {
        let Some(rest) = data.get(at..) else { continue };
        if let Ok(ip) = Ipv4Packet::new_checked(rest) {
            let _ = (ip.header_len(), ip.total_len(), ip.ttl(), ip.protocol(), ip.src(), ip.dst());
            let _ = (ip.dont_frag(), ip.more_frags(), ip.frag_offset(), ip.ident(), ip.checksum_ok());
            if let Ok(m) = IcmpPacket::new_checked(ip.payload()) {
                let _ = (m.msg_type(), m.code(), m.is_error(), m.checksum_ok());
            }
            let mut copy = rest.to_vec();
            if let Ok(mut ip) = Ipv4Packet::new_checked(&mut copy[..]) {
                if ip.ttl() > 1 {
                    ip.decrement_ttl();
                }
                ip.swap_addresses();
            }
        }
        if let Ok(ip) = Ipv6Packet::new_checked(rest) {
            let (src, dst) = (ip.src(), ip.dst());
            let _ = (ip.traffic_class(), ip.next_header(), ip.hop_limit(), ip.payload_len());
            if let Ok(m) = Icmpv6Packet::new_checked(ip.payload()) {
                let _ = (m.msg_type(), m.code(), m.rest(), m.is_error(), m.checksum_ok(&src, &dst));
                let _ = Ndp::parse(ip.payload(), &src, &dst, ip.hop_limit());
            }
            let mut copy = rest.to_vec();
            if let Ok(mut ip) = Ipv6Packet::new_checked(&mut copy[..]) {
                ip.decrement_hop_limit();
                ip.swap_addresses();
                if let Ok(mut m) = Icmpv6Packet::new_checked(ip.payload_mut()) {
                    m.echo_request_to_reply();
                    m.fill_checksum(&dst, &src);
                }
            }
        }
        if let Ok(a) = ArpPacket::new_checked(rest) {
            let _ = (a.op(), a.sha(), a.spa(), a.tha(), a.tpa());
        }
    }
});
