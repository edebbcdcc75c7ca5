// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The XDP path's redirects the kernel refused, by port. The program counts a
 * frame forwarded when bpf_redirect_map() accepts the port; the redirect itself
 * happens after the program returns, and fails when the egress is down
 * (ENETDOWN), takes no redirected frames (EOPNOTSUPP) or the frame is longer
 * than it sends (EMSGSIZE). The kernel then frees the frame and fires the raw
 * tracepoint xdp_redirect_err, which this program counts, by the devmap index
 * (xfwd's port), for xfwd's devmap only (its id in refused_map). (A driver that
 * accepts the frame and then drops it, a veth whose peer's ring is full, counts
 * it in its own statistics, which io/program/fast.rs reads.) A bridge's flood in the program
 * (BPF_F_BROADCAST) is not counted: the kernel skips an egress that cannot take it without a
 * word, and a refusal of the whole flood names no port (the program gives it the index one past
 * the ports, which no port's count takes).
 *
 * xdp_redirect_err(dev, xdp_prog, tgt, err, map_type, map_id, index): the
 * tracepoint's arguments, as raw_tracepoint gives them, one u64 each.
 *
 * Maps (filled by dataplane/src/io/probe/refused.rs):
 *   refused_map    slot 0: the id of xfwd's devmap (xfwd_egress); 0 counts nothing
 *   refused_ports  per CPU, per port (0..REFUSED_MAX_PORTS): refused redirects
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define REFUSED_MAX_PORTS 64 /* XFWD_MAX_PORTS */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} refused_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, REFUSED_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u64);
} refused_ports SEC(".maps");

SEC("raw_tracepoint/xdp_redirect_err")
int refused(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0, map_id = (__u32)ctx->args[5], port = (__u32)ctx->args[6];
	__u32 *want = bpf_map_lookup_elem(&refused_map, &zero);
	__u64 *n;

	if (!want || !*want || *want != map_id)
		return 0;
	n = bpf_map_lookup_elem(&refused_ports, &port);
	if (n)
		*n += 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
