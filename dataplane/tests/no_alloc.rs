//! The packet path allocates nothing: the bridge and router decisions (forwarding through a
//! cached or an uncached gateway, answering with an ICMP error, gleaning) and a worker's glean
//! hand-off, run under an allocator that counts the calling thread's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use xfwd_dataplane::action::SCRATCH_LEN;
use xfwd_dataplane::l2::{self, Fdb};
use xfwd_dataplane::l3::tables::scope6;
use xfwd_dataplane::l3::testing::{port, reference_ports};
use xfwd_dataplane::l3::{self, NeighborTable, NeighborTable6, PortSpec, RouteTarget, RouterState, RouterTables};
use xfwd_dataplane::resolve::glean;
use xfwd_dataplane::time::Seconds;
use xfwd_dataplane::wire::MacAddr;
use xfwd_dataplane::{Action, PortId};

thread_local! {
    /// Allocations (and reallocations) made by this thread so far.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting per thread (tests run on threads of their own).
struct Counting;

// SAFETY: every call is passed on unchanged to the system allocator; counting only touches a
// thread-local `Cell` with a const initialiser, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `realloc` is passed on as it is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the allocations it made on this thread.
fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (r, ALLOCATIONS.with(Cell::get) - before)
}

const H1: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);
const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x22]);
const ETH5: MacAddr = MacAddr([2, 0, 0, 0, 5, 5]);
const ETH4: MacAddr = MacAddr([2, 0, 0, 0, 4, 4]);

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A UDP frame from H1 into eth5 (port 0), padded into a UMEM-like buffer.
fn udp(dst: &str, ttl: u8) -> ([u8; 128], usize) {
    let mut v = Vec::new();
    etherparse::PacketBuilder::ethernet2(H1.0, ETH5.0)
        .ipv4(ip("198.18.10.1").octets(), ip(dst).octets(), ttl)
        .udp(4000, 9)
        .write(&mut v, &[0x5a; 18])
        .unwrap();
    let mut f = [0u8; 128];
    f[..v.len()].copy_from_slice(&v);
    (f, v.len())
}

fn router() -> (RouterTables, NeighborTable) {
    let ports = reference_ports();
    let routes = [
        ("198.19.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.2"))),
        ("198.20.0.0/16".parse().unwrap(), RouteTarget::via(ip("198.18.30.3"))),
    ];
    let t = RouterTables::build(ports, &routes).unwrap();
    let n = NeighborTable::new(64);
    n.insert(ip("198.18.30.2"), GW, PortId(1), false).unwrap();
    n.insert(ip("198.18.10.1"), H1, PortId(0), false).unwrap();
    (t, n)
}

#[test]
fn the_router_decision_allocates_nothing_cached_uncached_answering_or_gleaning() {
    let (t, n) = router();
    let n6 = NeighborTable6::new6(8);
    let mut scratch = [0u8; SCRATCH_LEN];
    let mut run = |state: &mut RouterState, dst: &str, ttl: u8| {
        let (mut f, len) = udp(dst, ttl);
        allocations(|| l3::decide::<l3::V4>(&mut f[..len], PortId(0), &t, &n, &n6, state, 1_000, &mut scratch))
    };
    let mut fitted = RouterState::new(0, 10);
    fitted.fit(&t);
    // A gateway's first packet fills the cache, later ones read it.
    for _ in 0..3 {
        assert_eq!(run(&mut fitted, "198.19.1.1", 64), (Action::Forward(PortId(1)), 0));
    }
    // A state not yet fitted to these tables (a reload the worker has not taken in yet).
    let mut unfitted = RouterState::new(0, 10);
    assert_eq!(run(&mut unfitted, "198.19.1.1", 64), (Action::Forward(PortId(1)), 0));
    // An ICMP error built in the scratch buffer; an unresolved gateway gleaned.
    let (a, allocated) = run(&mut fitted, "198.19.1.1", 1);
    assert!(matches!(a, Action::Reply { .. }), "{a:?}");
    assert_eq!(allocated, 0);
    let (a, allocated) = run(&mut fitted, "198.20.1.1", 64);
    assert!(matches!(a, Action::Glean { .. }), "{a:?}");
    assert_eq!(allocated, 0);
}

#[test]
fn the_kernels_route_types_and_equal_cost_paths_allocate_nothing() {
    use xfwd_dataplane::l3::{Mirrored4, Path, RouteKind, Special};
    let (t, n) = router();
    let route = |p: &str, kind, paths: Vec<Path<IpAddr>>| Mirrored4 {
        prefix: p.parse().unwrap(),
        kind,
        paths,
        mtu: 0,
        protocol: 12,
        local_table: false,
    };
    let via = |gw: &str| Path { gw: Some(IpAddr::V4(ip(gw))), port: Some(PortId(1)), weight: 1 };
    let ll: Ipv6Addr = "fe80::9".parse().unwrap();
    let routes = vec![
        // Through an IPv6 gateway (RFC 5549).
        route(
            "198.19.3.0/24",
            RouteKind::Unicast,
            vec![Path { gw: Some(IpAddr::V6(ll)), port: Some(PortId(1)), weight: 1 }],
        ),
        route("198.18.10.0/24", RouteKind::Unicast, vec![Path { gw: None, port: Some(PortId(0)), weight: 1 }]),
        route("198.19.0.0/16", RouteKind::Unicast, vec![via("198.18.30.2"), via("198.18.30.3")]),
        route("198.19.1.0/24", RouteKind::Special(Special::Prohibit), Vec::new()),
        route("198.19.2.0/24", RouteKind::Special(Special::Blackhole), Vec::new()),
    ];
    let t = RouterTables::build_mirrored(t.ports.clone(), &routes, &[], xfwd_dataplane::l3::fib::no_advice).unwrap();
    n.insert(ip("198.18.30.3"), GW, PortId(1), false).unwrap();
    let n6 = NeighborTable6::new6(8);
    n6.insert(scope6(ll, PortId(1)), GW, PortId(1), false).unwrap();
    let mut state = RouterState::new(0, 10);
    state.fit(&t);
    let mut scratch = [0u8; SCRATCH_LEN];
    for dst in ["198.19.9.9", "198.19.1.1", "198.19.2.2", "198.19.3.3", "198.19.3.3"] {
        let (mut f, len) = udp(dst, 64);
        let (a, allocated) = allocations(|| {
            l3::decide::<l3::V4>(&mut f[..len], PortId(0), &t, &n, &n6, &mut state, 1_000, &mut scratch)
        });
        assert_eq!(allocated, 0, "{dst}: {a:?}");
        if dst == "198.19.3.3" {
            assert_eq!(a, Action::Forward(PortId(1)), "through the IPv6 gateway");
        }
    }
}

#[test]
fn the_bridge_decision_allocates_nothing_learning_or_forwarding() {
    let fdb = Fdb::new(4096, 300);
    let pol = l2::Policies::uniform(2);
    let (a, _) = udp("198.19.1.1", 64);
    let mut b = a;
    b[0..6].copy_from_slice(&H1.0);
    b[6..12].copy_from_slice(&GW.0);
    let (_, allocated) = allocations(|| {
        for s in 0..100 {
            l2::decide(&a[..60], PortId(0), &fdb, Seconds(s), &pol);
            l2::decide(&b[..60], PortId(1), &fdb, Seconds(s), &pol);
        }
    });
    assert_eq!(allocated, 0);
    assert_eq!(l2::decide(&b[..60], PortId(1), &fdb, Seconds(100), &pol).action, Action::Forward(PortId(0)));
}

#[test]
fn a_worker_hands_a_gleaned_frame_over_without_allocating() {
    let (tx, rx) = glean::channel(1, 2048);
    let (f, len) = udp("198.20.1.1", 63);
    for _ in 0..3 {
        let (queued, allocated) = allocations(|| tx.send(&f[..len], PortId(0), PortId(1), ip("198.18.30.3").into()));
        assert!(queued);
        assert_eq!(allocated, 0);
        let mut got = 0;
        rx.drain(|g| {
            assert_eq!(g.frame, &f[..len]);
            got += 1;
        });
        assert_eq!(got, 1);
    }
}

#[test]
fn the_ipv6_router_decision_allocates_nothing_forwarding_answering_or_gleaning() {
    use std::net::Ipv6Addr;
    use xfwd_dataplane::l3::fib::no_advice;
    use xfwd_dataplane::l3::tables::RouteTarget6;
    let ip6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let port = |name: &str, mac, a: &str| PortSpec { link_local: Some(ip6("fe80::1")), ..port(name, mac, &[a]) };
    let ports = vec![port("eth5", ETH5, "2001:2:0:10::2/64"), port("eth4", ETH4, "2001:2:0:30::1/64")];
    let statics = [("2001:2:0:1000::/52".parse().unwrap(), RouteTarget6::Via { gw: ip6("2001:2:0:30::2"), dev: None })];
    let t = RouterTables::build_dual(ports, &[], &statics, no_advice).unwrap();
    let n = l3::NeighborTable6::new6(64);
    let n4 = l3::NeighborTable::new(8);
    n.insert(l3::Key6::global(ip6("2001:2:0:30::2")), GW, PortId(1), true).unwrap();
    n.insert(l3::Key6::global(ip6("2001:2:0:10::1")), H1, PortId(0), true).unwrap();
    let mut st = RouterState::new(0, 10);
    st.fit(&t);
    let mut scratch = [0u8; SCRATCH_LEN];
    let mut run = |dst: &str, hops: u8| {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2(H1.0, ETH5.0)
            .ipv6(ip6("2001:2:0:10::1").octets(), ip6(dst).octets(), hops)
            .udp(4000, 9)
            .write(&mut f, &[0x5a; 18])
            .unwrap();
        allocations(|| l3::decide::<l3::V6>(&mut f, PortId(0), &t, &n4, &n, &mut st, 1_000, &mut scratch))
    };
    assert_eq!(run("2001:2:0:1000::7", 64), (Action::Forward(PortId(1)), 0));
    let (a, allocated) = run("2001:2:0:1000::7", 1);
    assert!(matches!(a, Action::Reply { .. }), "{a:?}");
    assert_eq!(allocated, 0);
    let (a, allocated) = run("2001:2:0:30::99", 64);
    assert!(matches!(a, Action::Glean { .. }), "{a:?}");
    assert_eq!(allocated, 0);
}
