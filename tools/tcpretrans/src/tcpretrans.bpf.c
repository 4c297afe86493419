// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpretrans: TCP retransmits from the tcp:tcp_retransmit_skb tracepoint.
 *
 * Attached as tp_btf where the kernel allows it, else raw_tp, else the classic tracepoint; all three hand the
 * socket and the packet to handle(), which reads family, ports and addresses from the socket (sock.bpf.h), the
 * sequence number from the packet's TCP control block, and sends one record through a ring buffer, or (-c)
 * counts the retransmit per flow in a hash map. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "maps.bpf.h"
#include "ringbuf.bpf.h"
#include "sock.bpf.h"
#include "tcpretrans.h"

/* -4 / -6: AF_INET or AF_INET6, 0 for both. */
const volatile __u16 target_family = 0;
const volatile bool count = false;

/* Retransmits not reported: the ring buffer was full. */
__u64 lost = 0;
/* Retransmits not counted: the -c map was full. */
__u64 flows_full = 0;

struct event _event_type = {};
struct flow _flow_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct flow);
	__type(value, __u64);
} flows SEC(".maps");

static __always_inline int handle(const struct sock *sk, const struct sk_buff *skb, __u8 type)
{
	__u16 family;
	struct event *e;

	if (!sk)
		return 0;
	family = sk_inet_family(sk, target_family);
	if (!family)
		return 0;

	if (count) {
		struct flow key = { .family = family, .lport = sk_lport(sk), .rport = sk_rport(sk) };

		sk_addrs(sk, family, key.saddr, key.daddr);
		counter_inc(&flows, &key, &flows_full);
		return 0;
	}

	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->family = family;
	e->lport = sk_lport(sk);
	e->rport = sk_rport(sk);
	e->state = BPF_CORE_READ(sk, __sk_common.skc_state);
	e->type = type;
	if (skb) {
		struct tcp_skb_cb *tcb = (struct tcp_skb_cb *)&skb->cb[0];

		e->seq = BPF_CORE_READ(tcb, seq);
	}
	sk_addrs(sk, family, e->saddr, e->daddr);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BTF_RAW(retransmit, tcp_retransmit_skb, const struct sock *sk, const struct sk_buff *skb)
{
	return handle(sk, skb, RETRANSMIT);
}

/* Before tcp_retransmit_skb had an event of its own (it gained an `err` field), it was one of the tcp_event_sk_skb
 * class, whose record has no type named after the event: the same two pointers lead it. */
struct trace_event_raw_tcp_event_sk_skb___class {
	const void *skbaddr;
	const void *skaddr;
} __attribute__((preserve_access_index));

SEC("tracepoint/tcp/tcp_retransmit_skb")
int retransmit_tp(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_tcp_retransmit_skb)) {
		struct trace_event_raw_tcp_retransmit_skb *args = ctx;

		return handle(args->skaddr, args->skbaddr, RETRANSMIT);
	}
	struct trace_event_raw_tcp_event_sk_skb___class *args = ctx;

	return handle(args->skaddr, args->skbaddr, RETRANSMIT);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
