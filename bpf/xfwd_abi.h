// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * What xfwd's XDP program (xfwd.bpf.c) and its loader (dataplane/src/io/program/xdp.rs) must agree on:
 * its limits, its config slots and their values, the stamp's layout, its counter slots, and
 * the wire numbers it reads. This file is the one place they are written: dataplane/build.rs
 * reads it and makes the Rust side's constants (`io::program::xdp::abi`, each `#define XFWD_*` whose
 * value is a number) and `XdpCounter` (from `enum xfwd_counter`), so the two cannot drift; the
 * wire numbers are checked against dataplane/src/wire/ at compile time.
 */
#ifndef XFWD_ABI_H
#define XFWD_ABI_H

#define XFWD_MAX_PORTS 64
#define XFWD_MAX_QUEUES 64
#define XFWD_MAX_LOCAL 1024
#define XFWD_MAX_STATIONS 65536

#define XFWD_MODE_BRIDGE 0
#define XFWD_MODE_ROUTER 1

#define XFWD_CONFIG_MODE 0
#define XFWD_CONFIG_STEER 1
#define XFWD_CONFIG_QUEUE 2
#define XFWD_CONFIG_STAMP 3
#define XFWD_CONFIG_KEY_LO 4
#define XFWD_CONFIG_KEY_HI 5
#define XFWD_CONFIG_MAX_FRAME 6
#define XFWD_CONFIG_PATH 7
#define XFWD_CONFIG_FLOOD 8 /* bridge, XDP path: the longest frame every port takes (their
				   * smallest max_frame) while every port takes redirected frames; 0:
				   * no flooding here */
#define XFWD_CONFIG_DIR4 9  /* router, XDP path: the slot of xfwd_dir4 whose IPv4 set is live, or
                               * XFWD_DIR4_NONE (every IPv4 frame the workers') */
#define XFWD_NR_CONFIG 10

#define XFWD_PATH_AF_XDP 0 /* every frame to be forwarded goes to a worker */
#define XFWD_PATH_XDP 1    /* the common case forwarded here (fast4(), fast6(), fast2()), the rest to workers */

/* The XDP path's tables. The IPv4 routes: DIR-24-8 (dataplane/src/l3/fib.rs) in one array of
 * XFWD_DIR_PAGE-byte pages that xfwd maps and builds in place (io/program/dir4.rs): the flat
 * table's 2^24 16-bit entries, room for XFWD_DIR4_GROUPS groups of 256 entries (the /24s that
 * hold longer prefixes), XFWD_DIR4_HOPS hops (struct xfwd_route4, 16 bytes) by the index the
 * entries name, then XFWD_DIR4_MEMBERS members of equal-cost groups (16-bit hop indices). */
#define XFWD_DIR_PAGE 4096
#define XFWD_DIR4_FLAT_PAGES 8192
#define XFWD_DIR4_GROUPS 8192
#define XFWD_DIR4_GROUP_PAGES 1024
#define XFWD_DIR4_HOPS 32768
#define XFWD_DIR4_HOP_PAGES 128
#define XFWD_DIR4_MEMBERS 65536
#define XFWD_DIR4_MEMBER_PAGES 32
#define XFWD_DIR4_PAGES 9376
#define XFWD_DIR4_SETS 2 /* xfwd_dir4's slots, one set each, made once */
#define XFWD_DIR4_NONE 2 /* XFWD_DIR4_SETS: no slot */
#define XFWD_MAX_ROUTES6 (1 << 21)
#define XFWD_MAX_NEIGH 65536 /* as built; the loader sets the router's `limits.neighbors` */
#define XFWD_HOP_GATEWAY 1 /* through a gateway: its MAC from xfwd_neigh4 (xfwd_neigh6) */
#define XFWD_HOP_ON_LINK 2 /* the destination is the neighbour: its MAC from xfwd_neigh4 (6) */
#define XFWD_HOP_GROUP 3   /* IPv4: an equal-cost group, members `gateway`.. of the set's, `mtu` of them */
/* The seed of the flow hash that picks a group's member (l3::family::ecmp_hash). */
#define XFWD_ECMP_SEED 0x65636d70

/* The stamp added to a frame for its worker: arrival time, then a key the loader draws at random
 * for each start, so that no frame from the wire can pass for a stamped one. Mirrored in
 * dataplane/src/io/program/xdp.rs (STAMP_LEN, STAMP_MAX_FRAME). */
#define XFWD_STAMP_LEN 16
/* Frames longer than this are not stamped: grown either way they would not fit a UMEM frame in
 * copy mode (2048 bytes less the 256 the kernel keeps in front), and the kernel would drop them. */
#define XFWD_STAMP_MAX_FRAME (2048 - 256 - XFWD_STAMP_LEN)

#define XFWD_STEER_QUEUE 0 /* one socket per (port, queue) */
#define XFWD_STEER_CPU 1   /* one socket per (port, CPU), all bound to one queue */

#define XFWD_LOCAL_ADDRESS 1 /* one of the box's addresses */
#define XFWD_LOCAL_BROADCAST 2 /* a connected subnet's broadcast address */

/* Wire numbers. Offsets inside a header (the EtherType at 12, the IPv4 protocol at 9, ...) are
 * those of each format's `field` module in dataplane/src/wire/. */
#define XFWD_ETH_HLEN 14           /* wire::ethernet::HEADER_LEN */
#define XFWD_ETHERTYPE_IPV4 0x0800 /* wire::ethernet::ETHERTYPE_IPV4 */
#define XFWD_ETHERTYPE_VLAN 0x8100 /* wire::ethernet::ETHERTYPE_VLAN */
#define XFWD_VLAN_TAG_LEN 4        /* wire::ethernet::VLAN_TAG_LEN */
#define XFWD_IPV4_MIN_HLEN 20      /* wire::ipv4::MIN_HEADER_LEN */
#define XFWD_IPV4_MAX_HLEN 60      /* wire::ipv4::MAX_HEADER_LEN */
#define XFWD_PROTO_ICMP 1          /* wire::ipv4::PROTO_ICMP */
#define XFWD_ICMP_ECHO_REQUEST 8   /* wire::icmp::ECHO_REQUEST */
#define XFWD_ETHERTYPE_IPV6 0x86DD /* wire::ethernet::ETHERTYPE_IPV6 */
#define XFWD_IPV6_HLEN 40          /* wire::ipv6::HEADER_LEN */
#define XFWD_NEXT_HEADER_ICMPV6 58 /* wire::ipv6::NEXT_HEADER_ICMPV6 */
#define XFWD_ICMPV6_ECHO_REQUEST 128 /* wire::icmpv6::ECHO_REQUEST */

/* Counter slots, per port. Each member's comment begins with the counter's stable name (what
 * `show stats`' `xdp:` line, the JSON and the `verdict` label of xfwd_xdp_frames_total say),
 * then a colon and what it counts; dataplane/build.rs makes the Rust side's `XdpCounter` from
 * this list, so adding one is a line here and its use. */
enum xfwd_counter {
	XFWD_REDIRECTED = 0,        /* redirected: redirected into the port's AF_XDP socket */
	XFWD_PASS_NO_SOCKET = 1,    /* pass-no-socket: no socket on that (port, queue): handed to
				     * the kernel, lost to the forwarder */
	XFWD_PASS_RESERVED = 2,     /* pass-reserved: IEEE 802.1D reserved group address: handed
				     * to the kernel */
	XFWD_PASS_RUNT = 3,         /* pass-runt: shorter than an Ethernet header: handed to the
				     * kernel */
	XFWD_PASS_KERNEL = 4,       /* pass-kernel: router mode: not for forwarding (ARP, NDP,
				     * group MACs, for the box): the kernel's */
	XFWD_DROP_TOO_LONG = 5,     /* drop-too-long: longer than an AF_XDP socket takes
				     * (XFWD_CONFIG_MAX_FRAME): dropped */
	XFWD_PRIORITY_UNTAGGED = 6, /* priority-untagged: router mode: an 802.1Q priority tag
				     * (VID 0) taken off an IPv4 or IPv6 frame (which then goes on
				     * as untagged; counted beside its verdict) */
	XFWD_FORWARDED = 7,         /* xdp-forwarded: XDP path: forwarded by the program itself
				     * (the workers never see it) */
	XFWD_DROP_NO_EGRESS = 8,    /* drop-no-egress: XDP path: on its way to its egress port,
				     * which had gone from the devmap by then (a port being set up
				     * or taken away): dropped */
	XFWD_FLOODED = 9,           /* xdp-flooded: bridge, XDP path: flooded by the program itself
				     * to every port but the ingress */
	XFWD_NR_COUNTERS = 10,
};

#endif /* XFWD_ABI_H */
