// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The kernel's time in the NAPI polls of chosen ports, from three raw
 * tracepoints: softirq_entry and softirq_exit of NET_RX, and napi_poll, which
 * fires as each poll returns. A NET_RX softirq runs its polls one after the
 * other, so the time from one poll's end (or the softirq's start) to the
 * next poll's end is that poll's, plus the softirq's own loop between them.
 * A veth port polls when it has NAPI (an XDP program on it, or GRO on), and
 * everything the box does to a received frame happens in that poll on every
 * path xfwd compares: the kernel's forwarding (up to the egress veth's
 * enqueue into its peer), the XDP program with its redirect and flush, the
 * copy into an AF_XDP socket. The bench reads it to give each arm the box's
 * own time per frame, measured rather than derived by subtracting a second
 * run. (fentry/fexit on the driver's poll would time the poll alone; this
 * machine's kernel refuses tracing programs with EPERM, raw tracepoints not.)
 *
 * Maps (filled by the loader in dataplane/src/io/probe/poll_time.rs):
 *   poll_ports   (netns inode, ifindex) -> slot (0..POLL_MAX_PORTS): the
 *                ports to time; polls of any other device are not timed
 *   poll_clock   per CPU: when the softirq's last poll ended (or the softirq
 *                started), and whether a NET_RX softirq is running
 *   poll_totals  per CPU, per slot: nanoseconds, polls, frames
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define POLL_MAX_PORTS 16

/* The kernel's types, reduced to the fields read here; libbpf relocates
 * each access against the running kernel's BTF (CO-RE). */
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct napi_struct {
	struct net_device *dev;
} __attribute__((preserve_access_index));

struct poll_port {
	__u32 netns;
	__u32 ifindex;
};

struct poll_clock {
	__u64 last_ns;
	__u32 in_rx;
	__u32 pad;
};

struct poll_total {
	__u64 ns;
	__u64 polls;
	__u64 frames;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POLL_MAX_PORTS);
	__type(key, struct poll_port);
	__type(value, __u32);
} poll_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct poll_clock);
} poll_clock SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, POLL_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct poll_total);
} poll_totals SEC(".maps");

#define NET_RX_SOFTIRQ 3

/* softirq_entry(unsigned int vec_nr): a NET_RX softirq starts its polls. */
SEC("raw_tp/softirq_entry")
int poll_softirq_entry(__u64 *ctx)
{
	if ((__u32)ctx[0] != NET_RX_SOFTIRQ)
		return 0;
	__u32 zero = 0;
	struct poll_clock *clock = bpf_map_lookup_elem(&poll_clock, &zero);
	if (!clock)
		return 0;
	clock->last_ns = bpf_ktime_get_ns();
	clock->in_rx = 1;
	return 0;
}

/* softirq_exit(unsigned int vec_nr): the NET_RX softirq's polls are over. */
SEC("raw_tp/softirq_exit")
int poll_softirq_exit(__u64 *ctx)
{
	if ((__u32)ctx[0] != NET_RX_SOFTIRQ)
		return 0;
	__u32 zero = 0;
	struct poll_clock *clock = bpf_map_lookup_elem(&poll_clock, &zero);
	if (clock)
		clock->in_rx = 0;
	return 0;
}

/* napi_poll(struct napi_struct *napi, int work, int budget), right after the
 * driver's poll returned: the time since the previous poll of this softirq
 * ended (or since it started) is this poll's. */
SEC("raw_tp/napi_poll")
int poll_napi(__u64 *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0;
	struct poll_clock *clock = bpf_map_lookup_elem(&poll_clock, &zero);
	/* A poll outside a NET_RX softirq (busy polling, a NAPI thread) has no
	 * start to measure from: not timed. */
	if (!clock || !clock->in_rx)
		return 0;
	__u64 took = now - clock->last_ns;
	clock->last_ns = now;
	struct napi_struct *napi = (struct napi_struct *)ctx[0];
	struct net_device *dev = BPF_CORE_READ(napi, dev);
	struct poll_port port = {
		.netns = BPF_CORE_READ(dev, nd_net.net, ns.inum),
		.ifindex = BPF_CORE_READ(dev, ifindex),
	};
	__u32 *slot = bpf_map_lookup_elem(&poll_ports, &port);
	if (!slot)
		return 0;
	struct poll_total *total = bpf_map_lookup_elem(&poll_totals, slot);
	if (!total)
		return 0;
	total->ns += took;
	total->polls += 1;
	int work = (int)ctx[1];
	if (work > 0)
		total->frames += work;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
