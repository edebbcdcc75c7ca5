// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * xfwd's XDP program: classify, then redirect into the AF_XDP socket of (port, queue), hand
 * the frame to the kernel, or (the XDP path, when on) forward the common case itself: routes,
 * neighbours, MTU and TTL for the router (fast4(), fast6()), stations and floods for the bridge
 * (fast2()). Every frame it does not forward goes to the workers, which decide the rest.
 *
 * Maps (filled by the loader in dataplane/src/io/program/xdp.rs before attaching):
 *   xfwd_config    u32s: [XFWD_CONFIG_MODE] the mode (XFWD_MODE_BRIDGE or XFWD_MODE_ROUTER),
 *                  [XFWD_CONFIG_STEER] how a socket is chosen (XFWD_STEER_*), [XFWD_CONFIG_QUEUE]
 *                  the queue every socket binds under XFWD_STEER_CPU, [XFWD_CONFIG_STAMP]
 *                  1 to stamp every redirected frame with its arrival time (stamp()),
 *                  [XFWD_CONFIG_KEY_LO], [XFWD_CONFIG_KEY_HI] the stamp's key,
 *                  [XFWD_CONFIG_MAX_FRAME] the longest frame an AF_XDP socket takes (0: no limit)
 *   xfwd_ports     ifindex -> port index (0..XFWD_MAX_PORTS)
 *   xfwd_local     router mode: the box's IPv4 addresses (network order) -> XFWD_LOCAL_*
 *   xfwd_local6    router mode: the box's IPv6 addresses (16 bytes as on the wire) -> XFWD_LOCAL_*
 *   xfwd_xsks      XSKMAP, key = port * XFWD_MAX_QUEUES + slot, where the slot is the rx
 *                  queue (XFWD_STEER_QUEUE) or the receiving CPU modulo XFWD_MAX_QUEUES
 *                  (XFWD_STEER_CPU: drivers that give every frame one queue from every CPU)
 *   xfwd_counters  per-CPU u64, key = port * XFWD_NR_COUNTERS + counter
 *   xfwd_missed_queue  per-CPU u32 per port: 1 + the highest queue index seen with no socket
 *   xfwd_dir4      router mode, XDP path: two slots, each an IPv4 table, DIR-24-8 in one
 *                  mappable array of pages (dir4_lookup()); XFWD_CONFIG_DIR4 names the live one
 *   xfwd_neigh4    router mode, XDP path: IPv4 neighbour (network order) and port -> MAC
 *   xfwd_fib6      router mode, XDP path: one slot holding the IPv6 routes, an LPM trie of
 *                  prefix -> struct xfwd_route6 (0 flags: not here), swapped whole on reloads
 *   xfwd_neigh6    router mode, XDP path: IPv6 neighbour (address) and port -> MAC
 *   xfwd_port_macs XDP path: port index -> its MAC (router), and whether it can send
 *   xfwd_egress    XDP path: DEVMAP, port index -> ifindex
 *   xfwd_fdb       bridge mode, XDP path: station MAC -> its port and when the program last
 *                  saw a frame from it there (written by the program, read back for ageing)
 *
 * Bridge mode redirects every frame but the IEEE 802.1D link-local groups. Router mode
 * redirects IPv4 and IPv6 unicast to be forwarded and ICMP (ICMPv6) echo requests to the box's
 * own addresses; everything else (ARP, neighbour discovery and other IPv6 to link-local or
 * multicast addresses, VLAN-tagged, group MACs, other traffic for the box) is the kernel's, so
 * the box's own management keeps working. An 802.1Q priority tag (VID 0) on IPv4 or IPv6 is
 * taken off first, so that such a frame is routed as the untagged frame it stands for, as the
 * kernel does. With the XDP path on ([XFWD_CONFIG_PATH] XFWD_PATH_XDP), router mode forwards
 * the common case of IPv4 and IPv6 here (fast4(), fast6()) and redirects only the exceptions
 * to the workers;
 * bridge mode forwards frames between known stations and floods from known ones
 * (fast2()). A frame longer than a socket takes is dropped and counted (the kernel would drop
 * it on the way into the socket, counted only as the socket's rx_dropped).
 *
 * The constants shared with the loader (limits, config slots, counter slots, wire numbers) are
 * in xfwd_abi.h, which the Rust side is made from.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "xfwd_abi.h"

/* Written by the loader before the program is loaded (XdpProgram::load's path): whether this
 * instance carries the XDP path at all. The verifier reads a frozen read-only value as a
 * constant and removes the branches it rules out, so with 0 (the AF_XDP path) the program
 * runs no instruction of the XDP path, not even the look-up that asks whether it is on. */
const volatile __u32 xfwd_fast_built SEC(".rodata.xfwd") = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XFWD_NR_CONFIG);
	__type(key, __u32);
	__type(value, __u32);
} xfwd_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XFWD_MAX_LOCAL);
	__type(key, __u32);
	__type(value, __u32);
} xfwd_local SEC(".maps");

/* An IPv6 address as it stands in the packet. */
struct xfwd_in6 {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XFWD_MAX_LOCAL);
	__type(key, struct xfwd_in6);
	__type(value, __u32);
} xfwd_local6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XFWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} xfwd_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XFWD_MAX_PORTS * XFWD_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xfwd_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	/* one extra row for frames on an interface that is not a port */
	__uint(max_entries, (XFWD_MAX_PORTS + 1) * XFWD_NR_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} xfwd_counters SEC(".maps");

/* Per port, 1 + the highest queue index a frame arrived on with no socket there (0: none yet),
 * so that a driver numbering its queues from something other than 0 (dpaa_eth: hardware
 * frame-queue ids) is named with the index it uses. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XFWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} xfwd_missed_queue SEC(".maps");

/* A route the program forwards along: its egress port, the MTU a packet may have there (the
 * route's, else the port's), the gateway (network order) and how the next MAC is found
 * (XFWD_HOP_*; 0: not here, the workers decide). A gateway's MAC is looked up in xfwd_neigh4
 * for each frame, so that a neighbour change is one write there. Mirrored in io/program/xdp.rs
 * (`route_value`). */
struct xfwd_route4 {
	__u32 port;
	__u32 mtu;
	__u32 gateway;
	__u32 flags;
};

/* A family's routes, a trie (`inner`) the loader makes and fills aside and then puts in the
 * one slot of `outer`: a reload swaps the whole table in one write, so no frame sees half of
 * one. The trie's key and value are given by size, not type: BTF reaches an inner map's types
 * only through pointers, as declarations, whose size libbpf cannot tell. */
#define XFWD_FIB(outer, inner, max, key_type, val_type)                 \
	struct inner {                                                  \
		__uint(type, BPF_MAP_TYPE_LPM_TRIE);                    \
		__uint(max_entries, max);                               \
		__uint(map_flags, BPF_F_NO_PREALLOC);                   \
		__uint(key_size, sizeof(key_type));                     \
		__uint(value_size, sizeof(val_type));                   \
	};                                                              \
	struct {                                                        \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);               \
		__uint(max_entries, 1);                                 \
		__type(key, __u32);                                     \
		__array(values, struct inner);                          \
	} outer SEC(".maps")

/* The IPv4 routes (router mode, XDP path): the workers' DIR-24-8 (l3::fib) built by xfwd in a
 * set's mapped pages (io/program/dir4.rs): XFWD_DIR4_FLAT_PAGES of the flat table, indexed by
 * the address's top 24 bits; XFWD_DIR4_GROUP_PAGES of groups, 256 entries each, for the /24s
 * that hold longer prefixes (an entry with its top bit set names one); then the hops that
 * entries name (0: no route). A change is made in the set not in the slot, which then takes
 * it in one write, so no frame sees half of one. */
struct xfwd_dir4_set {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XFWD_DIR4_PAGES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, XFWD_DIR_PAGE);
};

/* Both sets, each in its slot from the first table on; which one the program reads is
 * XFWD_CONFIG_DIR4, a plain array write, so that a change is live at once (a slot's own update
 * waits for an RCU grace period, some 10 ms here: xfwd takes that wait after switching, before
 * it writes the set switched from). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, XFWD_DIR4_SETS);
	__type(key, __u32);
	__array(values, struct xfwd_dir4_set);
} xfwd_dir4 SEC(".maps");

/* A page of a set, as entries or as hops. */
struct xfwd_dir4_entries {
	__u16 e[XFWD_DIR_PAGE / 2];
};

struct xfwd_dir4_hops {
	struct xfwd_route4 h[XFWD_DIR_PAGE / sizeof(struct xfwd_route4)];
};

#define XFWD_DIR4_HOPS_AT (XFWD_DIR4_FLAT_PAGES + XFWD_DIR4_GROUP_PAGES)
#define XFWD_DIR4_MEMBERS_AT (XFWD_DIR4_HOPS_AT + XFWD_DIR4_HOP_PAGES)

_Static_assert(XFWD_DIR4_FLAT_PAGES * XFWD_DIR_PAGE == (1 << 24) * 2, "the flat table's pages");
_Static_assert(XFWD_DIR4_GROUP_PAGES * XFWD_DIR_PAGE == XFWD_DIR4_GROUPS * 256 * 2, "the groups' pages");
_Static_assert(XFWD_DIR4_HOP_PAGES * XFWD_DIR_PAGE == XFWD_DIR4_HOPS * sizeof(struct xfwd_route4), "the hops' pages");
_Static_assert(XFWD_DIR4_MEMBER_PAGES * XFWD_DIR_PAGE == XFWD_DIR4_MEMBERS * 2, "the members' pages");
_Static_assert(XFWD_DIR4_NONE == XFWD_DIR4_SETS, "no set: past the slots");
_Static_assert(XFWD_DIR4_PAGES == XFWD_DIR4_MEMBERS_AT + XFWD_DIR4_MEMBER_PAGES, "a set's pages");

static __always_inline struct xfwd_route4 *dir4_hop(void *set, __u32 e);

/* The hop of the longest prefix holding `daddr` (network order) in IPv4 set `set`, as
 * l3::fib::Fib::lookup finds it, a page at a time; NULL: no route. */
static __always_inline struct xfwd_route4 *dir4_lookup(void *set, __u32 daddr)
{
	__u32 a = bpf_ntohl(daddr), i = a >> 8, page = i / (XFWD_DIR_PAGE / 2);
	struct xfwd_dir4_entries *p = bpf_map_lookup_elem(set, &page);
	__u16 e;

	if (!p)
		return NULL;
	e = p->e[i % (XFWD_DIR_PAGE / 2)];
	if (e & 0x8000) {
		i = ((__u32)(e & 0x7fff) << 8) | (a & 0xff);
		page = XFWD_DIR4_FLAT_PAGES + i / (XFWD_DIR_PAGE / 2);
		p = bpf_map_lookup_elem(set, &page);
		if (!p)
			return NULL;
		e = p->e[i % (XFWD_DIR_PAGE / 2)];
	}
	if (!e)
		return NULL;
	return dir4_hop(set, e);
}

/* Hop `e` of IPv4 set `set`; NULL: beyond the set. */
static __always_inline struct xfwd_route4 *dir4_hop(void *set, __u32 e)
{
	__u32 page = XFWD_DIR4_HOPS_AT + e / (XFWD_DIR_PAGE / sizeof(struct xfwd_route4));
	struct xfwd_dir4_hops *h;

	if (e >= XFWD_DIR4_HOPS)
		return NULL;
	h = bpf_map_lookup_elem(set, &page);
	if (!h)
		return NULL;
	return &h->h[e % (XFWD_DIR_PAGE / sizeof(struct xfwd_route4))];
}

/* One round of the flow hash (aqm::flow::FlowKey::hash). */
static __always_inline __u64 flow_round(__u64 h, __u64 x)
{
	h = (h ^ x) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/* An IPv4 address's bytes as a little-endian load reads them (FlowKey::hash's words). */
static __always_inline __u64 le_word(__u32 wire)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return wire;
#else
	return __builtin_bswap32(wire);
#endif
}

/* The member of IPv4 equal-cost group `g` (XFWD_HOP_GROUP) in set `set` that the frame's flow
 * takes, as the workers pick it (l3::family::ecmp_pick over aqm::flow::flow_key): the
 * addresses, the protocol and, for TCP and UDP outside fragments, the ports, hashed with
 * XFWD_ECMP_SEED, modulo the members. `ip` is a 20-byte header of a packet of `total` bytes,
 * all within the frame. NULL: beyond the set. */
static __always_inline struct xfwd_route4 *dir4_member(void *set, const struct xfwd_route4 *g,
							const unsigned char *ip, const unsigned char *data_end,
							__u32 total)
{
	__u32 saddr, daddr, len = g->mtu, i, page;
	__u64 h = XFWD_ECMP_SEED ^ 0x243f6a8885a308d3ULL, ports = 0;
	struct xfwd_dir4_entries *m;
	int fragment = (ip[6] & 0x20) || (ip[6] & 0x1f) || ip[7];

	if (!len || g->gateway >= XFWD_DIR4_MEMBERS || len > XFWD_DIR4_MEMBERS - g->gateway)
		return NULL;
	if (!fragment && (ip[9] == 6 || ip[9] == 17) && total >= XFWD_IPV4_MIN_HLEN + 4 &&
	    ip + XFWD_IPV4_MIN_HLEN + 4 <= data_end)
		ports = ((__u64)ip[20] << 56) | ((__u64)ip[21] << 48) | ((__u64)ip[22] << 40) | ((__u64)ip[23] << 32);
	__builtin_memcpy(&saddr, ip + 12, 4);
	__builtin_memcpy(&daddr, ip + 16, 4);
	h = flow_round(h, le_word(saddr));
	h = flow_round(h, 0);
	h = flow_round(h, le_word(daddr));
	h = flow_round(h, 0);
	/* Ports, VLAN (none here), protocol, and the key's kind (IPv4). */
	h = flow_round(h, ports | ((__u64)ip[9] << 8) | 1);
	h *= 0xbf58476d1ce4e5b9ULL;
	i = g->gateway + (__u32)(h >> 32) % len;
	page = XFWD_DIR4_MEMBERS_AT + i / (XFWD_DIR_PAGE / 2);
	m = bpf_map_lookup_elem(set, &page);
	if (!m)
		return NULL;
	return dir4_hop(set, m->e[i % (XFWD_DIR_PAGE / 2)]);
}

struct xfwd_neigh {
	__u32 port;
	__u8 mac[6];
	__u16 pad;
};

/* A neighbour as the workers key it (l3::neighbors): an address on a port, the port the route
 * leaves by. The same address on two ports is two neighbours, as in the kernel's table, so a
 * host on one port claiming another port's gateway makes an entry of its own port only.
 * Mirrored in io/program/xdp.rs (`neighbor_key`). */
struct xfwd_neigh4_key {
	__u32 addr;
	__u32 port;
};

/* The neighbour maps are not preallocated: a preallocated hash map reuses a replaced element
 * at once, so a frame reading an entry while it was replaced could read another neighbour's
 * port or MAC. Allocated, a replaced element is freed only after every program that may hold
 * it has returned (RCU), and the program copies the value once (struct xfwd_neigh n = *neigh)
 * before it reads either field. Neighbour writes are rare; their allocation costs nothing on
 * the frames' path. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XFWD_MAX_NEIGH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct xfwd_neigh4_key);
	__type(value, struct xfwd_neigh);
} xfwd_neigh4 SEC(".maps");

/* The IPv6 routes, as the IPv4 ones above: an LPM trie keyed by prefix length and address (as
 * on the wire), swapped whole into xfwd_fib6's one slot on reloads (XFWD_FIB above). */
struct xfwd_lpm6 {
	__u32 prefixlen;
	__u8 addr[16];
};

/* As struct xfwd_route4, with an IPv6 gateway. Mirrored in io/program/xdp.rs (`route_value`). */
struct xfwd_route6 {
	__u32 port;
	__u32 mtu;
	__u8 gateway[16];
	__u32 flags;
};

XFWD_FIB(xfwd_fib6, xfwd_fib6_trie, XFWD_MAX_ROUTES6, struct xfwd_lpm6, struct xfwd_route6);

/* An IPv6 neighbour as xfwd_neigh4_key: the address on the port the route leaves by (which
 * for a link-local one is also what names it). Mirrored in io/program/xdp.rs (`neighbor_key`). */
struct xfwd_neigh6_key {
	__u8 addr[16];
	__u32 port;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XFWD_MAX_NEIGH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* as xfwd_neigh4's */
	__type(key, struct xfwd_neigh6_key);
	__type(value, struct xfwd_neigh);
} xfwd_neigh6 SEC(".maps");

/* A port's MAC, 1 in `ready` once its xfwd_egress entry is set and while its driver takes
 * redirected frames, 1 in `isolated` for a bridge port set isolated (l2::PortPolicy: it
 * reaches no other isolated port), the longest frame it sends (its MTU, an Ethernet header
 * and a VLAN tag: what the kernel lets through a redirect; io::frame_max) and its interface
 * (for the router's check of its MTU as it is now, over_mtu()). Mirrored in io/program/xdp.rs. */
struct xfwd_port_mac {
	__u8 mac[6];
	__u8 ready;
	__u8 isolated;
	__u32 max_frame;
	__u32 ifindex;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XFWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct xfwd_port_mac);
} xfwd_port_macs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, XFWD_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} xfwd_egress SEC(".maps");

/* The bridge's stations (XDP path), mirrored from the workers' FDB: a MAC, padded to 8 bytes,
 * -> its port and the last time (bpf_ktime_get_coarse_ns: CLOCK_MONOTONIC_COARSE) the
 * program forwarded a frame from it
 * there, refreshed at most once a second so that a steady flow writes no shared line. Mirrored
 * in io/program/xdp.rs (`station_value`). */
struct xfwd_mac_key {
	__u8 mac[6];
	__u16 pad;
};

struct xfwd_station {
	__u32 port;
	__u32 pad;
	__u64 seen_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, XFWD_MAX_STATIONS);
	__type(key, struct xfwd_mac_key);
	__type(value, struct xfwd_station);
} xfwd_fdb SEC(".maps");

static __always_inline void missed(__u32 port, __u32 queue)
{
	__u32 *highest = bpf_map_lookup_elem(&xfwd_missed_queue, &port);

	if (highest && queue + 1 > *highest)
		*highest = queue + 1; /* per-CPU slot: no other writer */
}

static __always_inline void count(__u32 port, __u32 counter)
{
	__u32 key = port * XFWD_NR_COUNTERS + counter;
	__u64 *value = bpf_map_lookup_elem(&xfwd_counters, &key);

	if (value)
		*value += 1; /* per-CPU slot: no other writer */
}

/* Adds the frame's arrival time (CLOCK_MONOTONIC, ns) and the stamp key to a frame bound for the
 * AF_XDP socket at `key`, when stamping is on: at its end where it can grow there (free for the
 * worker to take off), else in front (the worker moves the frame down over it). Not in the
 * metadata area: the worker's view of a UMEM frame starts at the frame's first byte. A frame that
 * is too long, or can grow neither way, goes unstamped, which the worker counts. */
static __always_inline void stamp(struct xdp_md *ctx, __u32 key)
{
	__u32 k = XFWD_CONFIG_STAMP;
	__u32 *on = bpf_map_lookup_elem(&xfwd_config, &k);

	if (!on || !*on || !bpf_map_lookup_elem(&xfwd_xsks, &key))
		return; /* off, or no socket: the kernel gets the frame as it came */
	k = XFWD_CONFIG_KEY_LO;
	__u32 *lo = bpf_map_lookup_elem(&xfwd_config, &k);
	k = XFWD_CONFIG_KEY_HI;
	__u32 *hi = bpf_map_lookup_elem(&xfwd_config, &k);

	if (!lo || !hi || ctx->data_end - ctx->data > XFWD_STAMP_MAX_FRAME)
		return;
	__u64 words[2] = { bpf_ktime_get_ns(), ((__u64)*hi << 32) | *lo };

	if (!bpf_xdp_adjust_tail(ctx, XFWD_STAMP_LEN)) {
		unsigned char *data = (unsigned char *)(long)ctx->data;
		unsigned char *data_end = (unsigned char *)(long)ctx->data_end;
		__u32 off = (__u32)(data_end - data - XFWD_STAMP_LEN) & 0x3fff;
		unsigned char *at = data + off;

		if (at + XFWD_STAMP_LEN <= data_end)
			__builtin_memcpy(at, words, XFWD_STAMP_LEN);
		return;
	}
	if (!bpf_xdp_adjust_head(ctx, -XFWD_STAMP_LEN)) {
		unsigned char *data = (unsigned char *)(long)ctx->data;
		unsigned char *data_end = (unsigned char *)(long)ctx->data_end;

		if (data + XFWD_STAMP_LEN <= data_end)
			__builtin_memcpy(data, words, XFWD_STAMP_LEN);
	}
}

static __always_inline int is_ip_type(const unsigned char *type)
{
	return (type[0] == (XFWD_ETHERTYPE_IPV4 >> 8) && type[1] == (XFWD_ETHERTYPE_IPV4 & 0xff)) ||
	       (type[0] == (XFWD_ETHERTYPE_IPV6 >> 8) && type[1] == (XFWD_ETHERTYPE_IPV6 & 0xff));
}

/* Router mode: takes an 802.1Q priority tag (VID 0, any priority) off an IPv4 or IPv6 frame, by
 * moving the MACs over it, so the frame reads as the untagged one it stands for (IEEE 802.1Q
 * 9.6: VID 0 means "no VLAN"; the kernel's receive path clears such a tag too). The priority is
 * not kept: xfwd does not map it to an egress priority, as the kernel without VLAN devices does
 * not. Returns 1 when it took one off. */
static __always_inline int untag_priority(struct xdp_md *ctx)
{
	unsigned char *data = (unsigned char *)(long)ctx->data;
	unsigned char *data_end = (unsigned char *)(long)ctx->data_end;
	unsigned char macs[12];

	if (data + XFWD_ETH_HLEN + XFWD_VLAN_TAG_LEN > data_end)
		return 0;
	if (data[12] != (XFWD_ETHERTYPE_VLAN >> 8) || data[13] != (XFWD_ETHERTYPE_VLAN & 0xff) ||
	    (data[14] & 0x0f) || data[15] || !is_ip_type(data + 16))
		return 0;
	/* A frame of at least 18 bytes: moving its head 4 bytes on cannot fail (the helper keeps
	 * an Ethernet header), so the MACs are moved first. */
	__builtin_memcpy(macs, data, 12);
	__builtin_memcpy(data + XFWD_VLAN_TAG_LEN, macs, 12);
	return bpf_xdp_adjust_head(ctx, XFWD_VLAN_TAG_LEN) == 0;
}

/* Router mode, IPv6: yes for unicast to a global address that is not the box's, and for echo
 * requests (no extension header before the ICMPv6 one) to the box's addresses. No for
 * multicast destinations (neighbour discovery to solicited-node groups, MLD, routing
 * protocols), link-local ones (the kernel owns the box's link-local addresses and answers
 * neighbour discovery for them; xfwd reads it through packet sockets), and anything else to
 * the box's addresses (unicast neighbour solicitations included). */
static __always_inline int router_wants6(const unsigned char *data, const unsigned char *data_end)
{
	const unsigned char *ip = data + XFWD_ETH_HLEN;
	struct xfwd_in6 daddr;

	if (ip + XFWD_IPV6_HLEN > data_end)
		return 0; /* truncated: the kernel counts it */
	if (ip[24] == 0xff)
		return 0; /* multicast */
	if (ip[24] == 0xfe && (ip[25] & 0xc0) == 0x80)
		return 0; /* link-local fe80::/10 (tables::is_link_local6) */
	__builtin_memcpy(daddr.b, ip + 24, 16);
	if (!bpf_map_lookup_elem(&xfwd_local6, &daddr))
		return 1; /* to be routed */
	if (ip + XFWD_IPV6_HLEN + 1 > data_end)
		return 0; /* for the box, and no ICMPv6 type to read */
	return ip[6] == XFWD_NEXT_HEADER_ICMPV6 && ip[XFWD_IPV6_HLEN] == XFWD_ICMPV6_ECHO_REQUEST;
}

/* Router mode: does the worker want this frame? Yes for IPv4 to a unicast MAC that is not for
 * the box, and for unfragmented ICMP echo requests to the box's addresses (answered by xfwd);
 * IPv6 as router_wants6() says. No for everything the kernel should see: ARP (the kernel
 * answers for its addresses; xfwd reads ARP through packet sockets), VLAN tags, group MACs
 * (DHCP, routing protocols), any other traffic to the box's addresses, and broadcasts to its
 * subnets. */
static __always_inline int router_wants(const unsigned char *data, const unsigned char *data_end)
{
	const unsigned char *ip = data + XFWD_ETH_HLEN;
	__u32 daddr, *local;
	__u32 ihl;

	if (data[0] & 1)
		return 0; /* broadcast or multicast MAC (MacAddr::is_multicast) */
	if (data[12] == (XFWD_ETHERTYPE_IPV6 >> 8) && data[13] == (XFWD_ETHERTYPE_IPV6 & 0xff))
		return router_wants6(data, data_end);
	if (data[12] != (XFWD_ETHERTYPE_IPV4 >> 8) || data[13] != (XFWD_ETHERTYPE_IPV4 & 0xff))
		return 0; /* neither IPv4 nor IPv6 */
	if (ip + XFWD_IPV4_MIN_HLEN > data_end)
		return 0; /* truncated: the kernel counts it */
	__builtin_memcpy(&daddr, ip + 16, 4);
	local = bpf_map_lookup_elem(&xfwd_local, &daddr);
	if (!local)
		return 1; /* to be routed */
	if (*local != XFWD_LOCAL_ADDRESS)
		return 0; /* subnet broadcast */
	/* For the box: only unfragmented ICMP echo requests are xfwd's. */
	if (ip[9] != XFWD_PROTO_ICMP || (ip[6] & 0x3f) || ip[7])
		return 0;
	ihl = (ip[0] & 0x0f) * 4;
	if (ihl < XFWD_IPV4_MIN_HLEN || ihl > XFWD_IPV4_MAX_HLEN)
		return 0;
	if (ip + ihl + 1 > data_end)
		return 0;
	return ip[ihl] == XFWD_ICMP_ECHO_REQUEST;
}

/* Whether the 6 bytes at `a` and `b` are equal. */
static __always_inline int same_mac(const unsigned char *a, const unsigned char *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

/* Whether the frame at `data` (its header bounds-checked) is to `port`'s own MAC: a router
 * forwards only what is sent to it. */
static __always_inline int to_port_mac(const unsigned char *data, __u32 port)
{
	struct xfwd_port_mac *p = bpf_map_lookup_elem(&xfwd_port_macs, &port);

	return p && same_mac(data, p->mac);
}

/* XDP path: redirects the frame through xfwd_egress (`flags` 0: to `port`; a broadcast: to
 * every port but the ingress) and counts it as `counter`, or, when the entry is gone (a port
 * being set up or taken away), drops and counts it. */
static __always_inline int send(__u32 in_port, __u32 port, __u64 flags, __u32 counter)
{
	if (bpf_redirect_map(&xfwd_egress, port, flags) != XDP_REDIRECT) {
		count(in_port, XFWD_DROP_NO_EGRESS);
		return XDP_DROP;
	}
	count(in_port, counter);
	return XDP_REDIRECT;
}

/* Whether an IP packet of `len` bytes is longer than the MTU interface `ifindex` has at this
 * moment. The routes carry the MTU their tables were built with, which an `ip link set … mtu`
 * makes stale until xfwd has followed it: meanwhile the devmap would drop a frame longer than
 * the new MTU (EMSGSIZE) after the program counted it forwarded, with no ICMP error back and
 * path-MTU discovery black-holed. Such a frame goes to the workers instead. */
static __always_inline int over_mtu(struct xdp_md *ctx, __u32 ifindex, __u32 len)
{
	__u32 mtu_len = len; /* as the packet's L3 length; the helper adds the link header */

	return bpf_check_mtu(ctx, ifindex, &mtu_len, 0, 0) != BPF_MTU_CHK_RET_SUCCESS;
}

/* Decrements the TTL of the IPv4 header at `ip` with its checksum updated (RFC 1624). */
static __always_inline void decrement_ttl(unsigned char *ip)
{
	__u16 old = ((__u16)ip[8] << 8) | ip[9], new;
	__u32 sum;

	ip[8] -= 1;
	new = ((__u16)ip[8] << 8) | ip[9];
	sum = (__u16)~(((__u16)ip[10] << 8) | ip[11]);
	sum += (__u16)~old;
	sum += new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (__u16)~sum;
	ip[10] = sum >> 8;
	ip[11] = sum & 0xff;
}

/* The routers' common tail (fast4, fast6), after the route and the next hop's MAC `n` are
 * found: a packet of `total` bytes no longer than the route's `mtu` and the port's MTU as it
 * is now, out of a port whose egress is ready, gets the next hop's MAC and the port's, is
 * trimmed of bytes past the packet beyond Ethernet's minimum, and is redirected; anything else
 * returns -1 untouched (the workers' ICMP errors). The TTL (`family` 4) or hop limit (6) is
 * lowered only once every check has passed, so that a frame handed to the workers is as it
 * arrived. */
static __always_inline int route_out(struct xdp_md *ctx, unsigned char *data, unsigned char *data_end,
				     __u32 in_port, __u32 port, __u32 mtu, __u32 total,
				     const struct xfwd_neigh *n, int family)
{
	struct xfwd_port_mac *out;
	__u32 len;

	if (total > mtu)
		return -1; /* too big: Fragmentation Needed / Packet Too Big, or dropped */
	out = bpf_map_lookup_elem(&xfwd_port_macs, &port);
	if (!out || !out->ready)
		return -1;
	if (over_mtu(ctx, out->ifindex, total))
		return -1; /* too big for the port's MTU as it is now: the workers' */
	if (family == 4)
		decrement_ttl(data + XFWD_ETH_HLEN);
	else
		data[XFWD_ETH_HLEN + 7] -= 1; /* the hop limit: IPv6 has no header checksum */
	/* The MACs (l3::family::send). */
	__builtin_memcpy(data, n->mac, 6);
	__builtin_memcpy(data + 6, out->mac, 6);
	len = XFWD_ETH_HLEN + total;
	if (len < 60)
		len = 60; /* wire::ethernet::MIN_FRAME_LEN */
	if ((__u32)(data_end - data) > len)
		bpf_xdp_adjust_tail(ctx, (int)len - (int)(data_end - data));
	return send(in_port, port, 0, XFWD_FORWARDED);
}

/* Router mode, XDP path: forwards an IPv4 frame that is the common case, as the workers would
 * (l3::family::route): to the ingress port's MAC; a 20-byte header with a good checksum; a
 * TTL above 1; neither address one the workers screen (0/8, 127/8, 224/3, 169.254/16, the
 * box's own as source); a route whose next hop is a gateway with a known MAC or on link with
 * the destination's MAC known, on the same port; no longer than the next hop's MTU. Then the
 * TTL is decremented with the checksum updated (RFC 1624), the MACs rewritten, bytes past the
 * packet beyond Ethernet's minimum trimmed, and the frame redirected to its egress port.
 * Anything else returns -1, untouched, for the workers: ICMP errors, gleaning, the box's own
 * traffic, every drop with its reason stay in one implementation. */
static __always_inline int fast4(struct xdp_md *ctx, __u32 in_port)
{
	unsigned char *data = (unsigned char *)(long)ctx->data;
	unsigned char *data_end = (unsigned char *)(long)ctx->data_end;
	unsigned char *ip = data + XFWD_ETH_HLEN;
	struct xfwd_neigh4_key next = {};
	struct xfwd_neigh *neigh, n;
	struct xfwd_route4 *hop;
	void *fib;
	__u32 daddr, saddr, sum = 0, total, port, dir4_slot = XFWD_CONFIG_DIR4, *live;

	if (ip + XFWD_IPV4_MIN_HLEN > data_end)
		return -1;
	if (data[12] != (XFWD_ETHERTYPE_IPV4 >> 8) || data[13] != (XFWD_ETHERTYPE_IPV4 & 0xff) || ip[0] != 0x45)
		return -1; /* not IPv4, or with options */
	if (!to_port_mac(data, in_port))
		return -1; /* not to the port's MAC */
#pragma unroll
	for (int i = 0; i < XFWD_IPV4_MIN_HLEN; i += 2)
		sum += ((__u32)ip[i] << 8) | ip[i + 1];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	if (sum != 0xffff)
		return -1; /* bad header checksum */
	total = ((__u32)ip[2] << 8) | ip[3];
	if (total < XFWD_IPV4_MIN_HLEN || (__u32)(data_end - data) < XFWD_ETH_HLEN + total)
		return -1; /* shorter than its header, or truncated */
	if (ip[8] <= 1)
		return -1; /* TTL runs out here: Time Exceeded */
	if (ip[12] == 0 || ip[12] == 127 || ip[12] >= 224 || ip[16] == 0 || ip[16] == 127 || ip[16] >= 224 ||
	    (ip[16] == 169 && ip[17] == 254))
		return -1; /* martians, class E, link-local: as the workers' settings say */
	__builtin_memcpy(&saddr, ip + 12, 4);
	__builtin_memcpy(&daddr, ip + 16, 4);
	if (bpf_map_lookup_elem(&xfwd_local, &saddr))
		return -1; /* from one of the box's addresses */
	live = bpf_map_lookup_elem(&xfwd_config, &dir4_slot);
	if (!live)
		return -1;
	fib = bpf_map_lookup_elem(&xfwd_dir4, live);
	if (!fib)
		return -1; /* no table loaded (yet), or none the program can hold */
	hop = dir4_lookup(fib, daddr);
	if (!hop)
		return -1; /* no route: Net Unreachable */
	if (hop->flags == XFWD_HOP_GROUP) {
		hop = dir4_member(fib, hop, ip, data_end, total);
		if (!hop)
			return -1;
	}
	port = hop->port;
	if (hop->flags == XFWD_HOP_GATEWAY)
		next.addr = hop->gateway;
	else if (hop->flags == XFWD_HOP_ON_LINK)
		next.addr = daddr;
	else
		return -1; /* local, broadcast, special, IPv6 gateway, a group in a group */
	next.port = port;
	neigh = bpf_map_lookup_elem(&xfwd_neigh4, &next);
	if (!neigh)
		return -1; /* unresolved on the route's port: gleaned */
	n = *neigh; /* once: the MAC of one entry */
	return route_out(ctx, data, data_end, in_port, port, hop->mtu, total, &n, 4);
}

/* Whether the first 10 bytes at `a` are zero: ::/80, which holds the unspecified and loopback
 * addresses and the IPv4-mapped ones (::ffff:0:0/96). */
static __always_inline int low80(const unsigned char *a)
{
	return !(a[0] | a[1] | a[2] | a[3] | a[4] | a[5] | a[6] | a[7] | a[8] | a[9]);
}

/* Router mode, XDP path: forwards an IPv6 frame that is the common case, as the workers would
 * (l3::router6): to the ingress port's MAC; version 6 with a payload length that is not 0 (a
 * jumbogram's) and fits the frame; a hop limit above 1; a source that is neither multicast,
 * link-local (its packets may not leave their link) nor in ::/80 (unspecified, loopback,
 * IPv4-mapped), a destination not in ::/80 (router_wants6() left out multicast and
 * link-local ones); a route whose next hop is a gateway or on link with its MAC known on the
 * route's port (keyed with that port, as the workers key it); no longer
 * than the next hop's MTU. Then the hop limit is decremented (IPv6 has no header checksum),
 * the MACs rewritten, padding past Ethernet's minimum trimmed, and the frame redirected.
 * Hop-by-hop options are forwarded unexamined, as the workers do (RFC 8200 section 4.3).
 * Anything else returns -1, untouched, for the workers: ICMPv6 errors (Packet Too Big among
 * them), neighbour discovery for unresolved next hops and every drop stay theirs. */
static __always_inline int fast6(struct xdp_md *ctx, __u32 in_port)
{
	unsigned char *data = (unsigned char *)(long)ctx->data;
	unsigned char *data_end = (unsigned char *)(long)ctx->data_end;
	unsigned char *ip = data + XFWD_ETH_HLEN;
	struct xfwd_neigh6_key next = {};
	struct xfwd_neigh *neigh, n;
	struct xfwd_route6 *hop;
	struct xfwd_lpm6 key;
	void *fib;
	__u32 total, port, zero = 0;

	if (ip + XFWD_IPV6_HLEN > data_end)
		return -1;
	if ((ip[0] >> 4) != 6)
		return -1;
	if (!to_port_mac(data, in_port))
		return -1; /* not to the port's MAC */
	total = ((__u32)ip[4] << 8) | ip[5];
	if (!total)
		return -1; /* a jumbogram, or nothing: the workers' */
	total += XFWD_IPV6_HLEN;
	if ((__u32)(data_end - data) < XFWD_ETH_HLEN + total)
		return -1; /* truncated */
	if (ip[7] <= 1)
		return -1; /* the hop limit runs out here: Time Exceeded */
	if (ip[8] == 0xff || (ip[8] == 0xfe && (ip[9] & 0xc0) == 0x80) || low80(ip + 8) || low80(ip + 24))
		return -1; /* martian source or destination, or a link-local source */
	key.prefixlen = 128;
	__builtin_memcpy(key.addr, ip + 24, 16);
	fib = bpf_map_lookup_elem(&xfwd_fib6, &zero);
	if (!fib)
		return -1; /* no table loaded yet */
	hop = bpf_map_lookup_elem(fib, &key);
	if (!hop)
		return -1; /* no route: Destination Unreachable */
	port = hop->port;
	if (hop->flags == XFWD_HOP_GATEWAY)
		__builtin_memcpy(next.addr, hop->gateway, 16);
	else if (hop->flags == XFWD_HOP_ON_LINK)
		__builtin_memcpy(next.addr, ip + 24, 16);
	else
		return -1; /* local, special, equal-cost group */
	next.port = port;
	neigh = bpf_map_lookup_elem(&xfwd_neigh6, &next);
	if (!neigh)
		return -1; /* unresolved on the route's port: neighbour discovery */
	n = *neigh; /* once: the MAC of one entry */
	return route_out(ctx, data, data_end, in_port, port, hop->mtu, total, &n, 6);
}

/* Bridge mode, XDP path: forwards a frame from a station known on this port (l2::bridge::
 * decide) to the known port of its destination, or floods it to every other port when the
 * destination is unknown or a group and every port takes redirected frames. Anything else
 * returns -1, untouched, for the workers: a source they must learn or move, a group source,
 * a destination behind the ingress port (dropped there as same-segment), an egress not ready,
 * known unicast between two isolated ports (dropped there as isolated). The loader turns
 * flooding here off (XFWD_CONFIG_FLOOD 0) where a port's settings make a flood's ports other
 * than all but the ingress, and a port that does not learn never has stations of its own
 * here but its static ones: the workers apply those settings.
 * The 802.1D link-local groups never get here (the kernel's, above). */
static __always_inline int fast2(struct xdp_md *ctx, __u32 in_port)
{
	const unsigned char *data = (const unsigned char *)(long)ctx->data;
	const unsigned char *data_end = (const unsigned char *)(long)ctx->data_end;
	__u32 len = (__u32)(data_end - data);
	struct xfwd_mac_key key = {};
	struct xfwd_station *src, *dst;
	struct xfwd_port_mac *out, *in;
	__u32 slot = XFWD_CONFIG_FLOOD;
	__u32 *flood, port;
	__u64 now;

	if (data + XFWD_ETH_HLEN > data_end)
		return -1;
	if (data[6] & 1)
		return -1; /* a group source: dropped by the workers */
	__builtin_memcpy(key.mac, data + 6, 6);
	src = bpf_map_lookup_elem(&xfwd_fdb, &key);
	if (!src || src->port != in_port)
		return -1; /* to learn, or moved: the workers learn it */
	now = bpf_ktime_get_coarse_ns();
	if (now - src->seen_ns > 1000000000ULL)
		src->seen_ns = now;
	if (!(data[0] & 1)) {
		__builtin_memcpy(key.mac, data, 6);
		dst = bpf_map_lookup_elem(&xfwd_fdb, &key);
		if (dst) {
			port = dst->port;
			if (port == in_port || port >= XFWD_MAX_PORTS)
				return -1; /* the segment has it: the workers count the drop */
			out = bpf_map_lookup_elem(&xfwd_port_macs, &port);
			if (!out || !out->ready || len > out->max_frame)
				return -1; /* not ready, or too long for it: the workers count the drop */
			if (out->isolated) {
				in = bpf_map_lookup_elem(&xfwd_port_macs, &in_port);
				if (!in || in->isolated)
					return -1; /* isolated to isolated: the workers count the drop */
			}
			return send(in_port, port, 0, XFWD_FORWARDED);
		}
	}
	flood = bpf_map_lookup_elem(&xfwd_config, &slot);
	if (!flood || len > *flood)
		return -1; /* a port takes no redirects, or this frame is too long for one */
	/* The key of a broadcast redirect is not looked up; one past the ports keeps a refusal of
	 * the whole flood from being charged to port 0 (bpf/refused.bpf.c counts ports only). */
	return send(in_port, XFWD_MAX_PORTS, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS, XFWD_FLOODED);
}

/* Whether the program forwards the common case itself: built in (xfwd_fast_built) and turned
 * on (XFWD_CONFIG_PATH, once the tables are written). */
static __always_inline int fast_on(void)
{
	__u32 slot_key = XFWD_CONFIG_PATH;
	__u32 *path;

	if (!xfwd_fast_built)
		return 0;
	path = bpf_map_lookup_elem(&xfwd_config, &slot_key);
	return path && *path == XFWD_PATH_XDP;
}

SEC("xdp")
int xfwd_xdp(struct xdp_md *ctx)
{
	const unsigned char *data = (const unsigned char *)(long)ctx->data;
	const unsigned char *data_end = (const unsigned char *)(long)ctx->data_end;
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 *max_frame;
	__u32 *port = bpf_map_lookup_elem(&xfwd_ports, &ifindex);
	__u32 key;
	long verdict;

	if (!port) {
		/* Attached to an interface the loader did not register, or a
		 * frame raced the set-up: not ours to touch. */
		count(XFWD_MAX_PORTS, XFWD_PASS_NO_SOCKET);
		return XDP_PASS;
	}
	if (*port >= XFWD_MAX_PORTS)
		return XDP_PASS; /* cannot happen: the loader bounds it; keeps the verifier sure */

	if (data + XFWD_ETH_HLEN > data_end) {
		/* Not even an Ethernet header: the kernel counts and drops it. */
		count(*port, XFWD_PASS_RUNT);
		return XDP_PASS;
	}

	__u32 slot_key = XFWD_CONFIG_MODE;
	__u32 *mode = bpf_map_lookup_elem(&xfwd_config, &slot_key);

	if (mode && *mode == XFWD_MODE_ROUTER) {
		if (untag_priority(ctx))
			count(*port, XFWD_PRIORITY_UNTAGGED);
		/* The helper, where called, left the old packet pointers invalid. */
		data = (const unsigned char *)(long)ctx->data;
		data_end = (const unsigned char *)(long)ctx->data_end;
		if (data + XFWD_ETH_HLEN > data_end)
			return XDP_PASS; /* cannot happen (checked above); keeps the verifier sure */
		if (!router_wants(data, data_end)) {
			count(*port, XFWD_PASS_KERNEL);
			return XDP_PASS; /* the kernel's: see router_wants() */
		}
		if (fast_on()) {
			int fast = data[12] == (XFWD_ETHERTYPE_IPV6 >> 8) && data[13] == (XFWD_ETHERTYPE_IPV6 & 0xff) ?
					   fast6(ctx, *port) :
					   fast4(ctx, *port);

			if (fast >= 0)
				return fast;
		}
	} else if (data[0] == 0x01 && data[1] == 0x80 && data[2] == 0xC2 && data[3] == 0x00 &&
		   data[4] == 0x00 && data[5] >= 0x01 && data[5] <= 0x0F) {
		/* 01:80:C2:00:00:01..0F are link-local (PAUSE, LACP, 802.1X, LLDP,
		 * ...; MacAddr::is_reserved_link_local in wire/ethernet.rs): a
		 * bridge must never forward them; the kernel's own agents
		 * may want them. 01:80:C2:00:00:00 (STP BPDUs) is forwarded like a
		 * Linux bridge with STP off does, so switches around the box still
		 * see a loop. */
		count(*port, XFWD_PASS_RESERVED);
		return XDP_PASS;
	} else {
		if (fast_on()) {
			int fast = fast2(ctx, *port);

			if (fast >= 0)
				return fast;
		}
	}

	slot_key = XFWD_CONFIG_STEER;
	__u32 *steer = bpf_map_lookup_elem(&xfwd_config, &slot_key);
	__u32 slot;

	if (steer && *steer == XFWD_STEER_CPU) {
		slot_key = XFWD_CONFIG_QUEUE;
		__u32 *bound = bpf_map_lookup_elem(&xfwd_config, &slot_key);

		if (!bound || ctx->rx_queue_index != *bound) {
			/* Every socket is bound to one queue: a frame on another
			 * could not enter any of them. */
			count(*port, XFWD_PASS_NO_SOCKET);
			missed(*port, ctx->rx_queue_index);
			return XDP_PASS;
		}
		/* The socket of the worker that serves this CPU: frames from
		 * several CPUs at once each go to their own socket, and the
		 * kernel serialises the shared fill ring (generic receive
		 * holds the buffer pool's lock). */
		slot = bpf_get_smp_processor_id() % XFWD_MAX_QUEUES;
	} else if (ctx->rx_queue_index >= XFWD_MAX_QUEUES) {
		/* Queue ids beyond the map (some drivers number queues by
		 * hardware id): counted so the loss is visible, kernel keeps it. */
		count(*port, XFWD_PASS_NO_SOCKET);
		missed(*port, ctx->rx_queue_index);
		return XDP_PASS;
	} else {
		slot = ctx->rx_queue_index;
	}

	slot_key = XFWD_CONFIG_MAX_FRAME;
	max_frame = bpf_map_lookup_elem(&xfwd_config, &slot_key);
	if (max_frame && *max_frame && ctx->data_end - ctx->data > *max_frame) {
		/* It cannot enter a socket (the port's MTU is above what xfwd carries; warned). */
		count(*port, XFWD_DROP_TOO_LONG);
		return XDP_DROP;
	}

	key = *port * XFWD_MAX_QUEUES + slot;
	stamp(ctx, key);
	/* The flags' low bits are the verdict when the key has no socket. */
	verdict = bpf_redirect_map(&xfwd_xsks, key, XDP_PASS);
	if (verdict == XDP_REDIRECT) {
		/* Into the worker's RX ring; a full ring is counted by the
		 * kernel as the socket's rx_dropped / rx_ring_full. */
		count(*port, XFWD_REDIRECTED);
		return XDP_REDIRECT;
	}
	/* No socket on this (port, slot): the worker never sees it. Either
	 * the port has more queues than xfwd runs workers (warned at start)
	 * or the driver numbers queues unexpectedly; xfwd warns when this
	 * counter moves. */
	count(*port, XFWD_PASS_NO_SOCKET);
	missed(*port, ctx->rx_queue_index);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
