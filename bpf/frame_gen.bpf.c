// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * The bench's frame generator: run by BPF_PROG_TEST_RUN in live-frames mode
 * (BPF_F_TEST_XDP_LIVE_FRAMES), the kernel runs this program on copies of one
 * UDP frame and sends each out of the device the context names (XDP_TX), as
 * a NIC driver hands its received buffers to XDP: no socket, no skb, and the
 * full XDP headroom, so the receiving veth port takes it as a frame rather
 * than as an skb it must copy first.
 *
 * Each frame gets the template's headers (gen_hdr), then the next UDP source
 * port of gen_cfg.flows ports from gen_cfg.sport0 (a count per CPU) and its
 * UDP checksum updated for it (RFC 1624) when the frame has one. The loader
 * (dataplane/src/io/probe/frame_gen.rs) sets gen_cfg before load (read-only after)
 * and writes gen_hdr.
 *
 * gen_redirect is the other sender's hop, for kernels that refuse live frames:
 * attached to a helper veth in the client host, it redirects every frame a
 * packet socket (trafgen) sent into it on to the client's port, so that the
 * port's peer (the box) receives each as an XDP frame, as from a NIC, and
 * veth's copy of the socket buffer into a page is paid in the helper's poll,
 * in the client host.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The headers up to the UDP header's end: Ethernet, IPv4 or IPv6, UDP. */
#define GEN_HDR4 (14 + 20 + 8)
#define GEN_HDR6 (14 + 40 + 8)

/* One object, so that the loader writes it whole in a known layout. */
struct gen_cfg {
	__u32 flows;   /* source ports sport0 .. sport0 + flows - 1 */
	__u32 udp_off; /* where the UDP header starts: 34 (IPv4) or 54 (IPv6) */
	__u16 sport0;  /* the frame's source port, host order */
	__u16 csum0;   /* its UDP checksum as on the wire (0: none, IPv4) */
};

const volatile struct gen_cfg gen_cfg SEC(".rodata.gen") = { .flows = 1, .udp_off = 34, .sport0 = 1024 };

/* The frame's headers up to the UDP header's end (a map rather than the
 * read-only section: clang may fold a copy out of a constant's initializer). */
struct gen_hdr {
	__u8 bytes[GEN_HDR6];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_hdr);
} gen_hdr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gen_seq SEC(".maps");

/* One's-complement fold of a 32-bit sum to 16 bits. */
static __always_inline __u16 fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

SEC("xdp")
int gen_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	/* The headers written whole, every time: the kernel recycles a sent
	 * frame's page into the next frame as the receiver left it, and a
	 * receiver that forwarded it rewrote its MACs and TTL. */
	__u32 zero = 0;
	struct gen_hdr *hdr = bpf_map_lookup_elem(&gen_hdr, &zero);
	if (!hdr)
		return XDP_ABORTED;
	__u16 *udp;
	if (gen_cfg.udp_off == 34) {
		if (data + GEN_HDR4 > data_end)
			return XDP_ABORTED;
		__builtin_memcpy(data, hdr->bytes, GEN_HDR4);
		udp = data + 34;
	} else {
		if (data + GEN_HDR6 > data_end)
			return XDP_ABORTED;
		__builtin_memcpy(data, hdr->bytes, GEN_HDR6);
		udp = data + 54;
	}
	__u64 *seq = bpf_map_lookup_elem(&gen_seq, &zero);
	if (!seq)
		return XDP_ABORTED;
	__u32 flows = gen_cfg.flows ? gen_cfg.flows : 1;
	__u16 sport = gen_cfg.sport0 + (__u16)(*seq % flows);
	*seq += 1;
	__u16 old = bpf_htons(gen_cfg.sport0), new = bpf_htons(sport);
	udp[0] = new;
	if (gen_cfg.csum0) {
		/* HC' = ~(~HC + ~m + m'), from the frame's original values. */
		__u16 csum = ~fold((__u16)~gen_cfg.csum0 + (__u32)(__u16)~old + new);
		udp[3] = csum ? csum : 0xffff;
	}
	return XDP_TX;
}

/* Where gen_redirect sends every frame: the client's port (set before load). */
const volatile __u32 redirect_ifindex SEC(".rodata.redirect") = 0;

SEC("xdp")
int gen_redirect(struct xdp_md *ctx)
{
	/* XDP_REDIRECT, or XDP_ABORTED (traced) when the target is not set. */
	return bpf_redirect(redirect_ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
