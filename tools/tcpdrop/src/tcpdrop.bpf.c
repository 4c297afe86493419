// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpdrop: packets the kernel drops, from skb:kfree_skb with its drop reason.
 *
 * The tracepoint is attached as tp_btf where the kernel allows it, else raw_tp, else the classic tracepoint; all
 * three hand (skb, location, reason) to handle(). Reasons up to NOT_SPECIFIED are left out as in BCC (frees that
 * are not drops, and plain kfree_skb() calls), unless --reasons names NOT_SPECIFIED. Kernels whose tracepoint has no reason (before 5.17) use a kprobe on tcp_drop(sk, skb) instead,
 * where it exists (it is gone since 5.19). Addresses, ports and flags come from the packet's own IP and TCP
 * headers (a packet for a closed port has no socket), the state from its socket when it has one. Each drop goes
 * through a ring buffer with a kernel stack id, or (-s) is counted per reason and location in a hash map. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "maps.bpf.h"
#include "ringbuf.bpf.h"
#include "tcpdrop.h"

#define IPPROTO_TCP_ 6

const volatile bool all_protocols = false;
const volatile __u8 target_ipver = 0;
const volatile bool filter_reasons = false;
const volatile bool summary = false;
/* --netns-id / --pid-netns: the network namespace's inode number, 0 for all. */
const volatile __u32 target_netns = 0;

/* Drops not reported: the ring buffer was full. */
__u64 lost = 0;
/* Drops not counted: the -s map was full. */
__u64 summary_full = 0;

struct event _event_type = {};
struct summary_key _summary_key_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
	__uint(max_entries, MAX_STACKS);
} stacks SEC(".maps");

/* --reasons: the reasons to keep (value unused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_REASONS);
	__type(key, __u32);
	__type(value, __u8);
} reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SUMMARY);
	__type(key, struct summary_key);
	__type(value, __u64);
} counts SEC(".maps");

/* Reads the IP and TCP (or UDP: same port layout) headers into e; false if the packet has no IP header. */
static __always_inline bool read_headers(struct sk_buff *skb, struct event *e)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u8 first, *l4;
	__u16 ports[2];

	if (!head || nh == (__u16)~0U)
		return false;
	if (bpf_probe_read_kernel(&first, 1, head + nh))
		return false;
	if ((first >> 4) == 4) {
		struct iphdr *ip = (void *)(head + nh);

		e->ipver = 4;
		e->protocol = BPF_CORE_READ(ip, protocol);
		bpf_probe_read_kernel(e->saddr, 4, &ip->saddr);
		bpf_probe_read_kernel(e->daddr, 4, &ip->daddr);
		l4 = head + nh + (first & 0xf) * 4;
	} else if ((first >> 4) == 6) {
		struct ipv6hdr *ip6 = (void *)(head + nh);

		e->ipver = 6;
		e->protocol = BPF_CORE_READ(ip6, nexthdr);
		bpf_probe_read_kernel(e->saddr, 16, &ip6->saddr);
		bpf_probe_read_kernel(e->daddr, 16, &ip6->daddr);
		l4 = head + nh + sizeof(struct ipv6hdr);
	} else {
		return false;
	}
	if (e->protocol == IPPROTO_TCP_ || e->protocol == IPPROTO_UDP) {
		if (!bpf_probe_read_kernel(ports, sizeof(ports), l4)) {
			e->sport = bpf_ntohs(ports[0]);
			e->dport = bpf_ntohs(ports[1]);
		}
		if (e->protocol == IPPROTO_TCP_)
			bpf_probe_read_kernel(&e->tcpflags, 1, l4 + 13);
	}
	return true;
}

/* Reasons at or below NOT_SPECIFIED are frees that are not drops (NOT_DROPPED_YET, CONSUMED) or plain kfree_skb()
 * calls, which BCC leaves out too; --reasons may still ask for NOT_SPECIFIED. */
static __always_inline bool not_a_drop(__u32 reason)
{
	if (!bpf_core_enum_value_exists(enum skb_drop_reason, SKB_DROP_REASON_NOT_SPECIFIED))
		return reason == 0;
	return reason < bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_NOT_SPECIFIED) ||
	       (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_NOT_SPECIFIED) &&
		!filter_reasons);
}

static __always_inline int handle(void *ctx, struct sk_buff *skb, __u64 location, __u32 reason, bool has_reason,
				  struct sock *sk)
{
	struct event ev = {}, *e;

	if (has_reason) {
		if (not_a_drop(reason))
			return 0;
		if (filter_reasons && !bpf_map_lookup_elem(&reasons, &reason))
			return 0;
	}
	if (!read_headers(skb, &ev))
		return 0;
	if (!all_protocols && ev.protocol != IPPROTO_TCP_)
		return 0;
	if (target_ipver && ev.ipver != target_ipver)
		return 0;
	if (!sk)
		sk = BPF_CORE_READ(skb, sk);
	if (target_netns) {
		__u32 inum = sk ? BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum)
				: BPF_CORE_READ(skb, dev, nd_net.net, ns.inum);

		if (inum != target_netns)
			return 0;
	}

	if (summary) {
		struct summary_key key = { .location = location, .reason = reason };

		counter_inc(&counts, &key, &summary_full);
		return 0;
	}

	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	__builtin_memcpy(e, &ev, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->location = location;
	e->reason = reason;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->state = sk ? BPF_CORE_READ(sk, __sk_common.skc_state) : 0;
	e->stack_id = bpf_get_stackid(ctx, &stacks, 0);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BTF_RAW(kfree_skb, kfree_skb, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	return handle(ctx, skb, (__u64)location, reason, true, NULL);
}

SEC("tracepoint/skb/kfree_skb")
int kfree_skb_tp(struct trace_event_raw_kfree_skb *args)
{
	return handle(args, args->skbaddr, (__u64)args->location, args->reason, true, NULL);
}

/* Kernels whose kfree_skb has no reason: tcp_drop(sk, skb), no reason given. */
SEC("kprobe/tcp_drop")
int BPF_KPROBE(tcp_drop_kprobe, struct sock *sk, struct sk_buff *skb)
{
	return handle(ctx, skb, PT_REGS_IP(ctx), 0, false, sk);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
