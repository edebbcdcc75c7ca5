// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The kernel's own route lookup, for timing under BPF_PROG_TEST_RUN (`xfwd bench
 * --lookups`): the frame's destination looked up in the kernel's FIB of the
 * namespace the test run is made in, by bpf_fib_lookup() — what xdp-forward and
 * the kernel's XDP forwarding samples use. Nothing is sent.
 *
 * Verdict: XDP_TX when the kernel has a route (its neighbour resolved or not),
 * XDP_DROP when it has none or refuses (forwarding off), XDP_ABORTED for a frame
 * that is not IPv4 or IPv6.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10

SEC("xdp")
int fib_lookup(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct bpf_fib_lookup p = {};
	int rc;

	if ((void *)(eth + 1) > end)
		return XDP_ABORTED;
	p.ifindex = ctx->ingress_ifindex;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return XDP_ABORTED;
		p.family = AF_INET;
		p.tos = ip->tos;
		p.l4_protocol = ip->protocol;
		p.tot_len = bpf_ntohs(ip->tot_len);
		p.ipv4_src = ip->saddr;
		p.ipv4_dst = ip->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return XDP_ABORTED;
		p.family = AF_INET6;
		p.l4_protocol = ip6->nexthdr;
		p.tot_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(p.ipv6_src, &ip6->saddr, sizeof(p.ipv6_src));
		__builtin_memcpy(p.ipv6_dst, &ip6->daddr, sizeof(p.ipv6_dst));
	} else {
		return XDP_ABORTED;
	}
	rc = bpf_fib_lookup(ctx, &p, sizeof(p), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return XDP_TX;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
