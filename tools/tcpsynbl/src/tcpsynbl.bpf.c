// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpsynbl: how full listening sockets' accept queues are when a handshake completes, as log2 histograms per
 * backlog limit.
 *
 * tcp_v4_syn_recv_sock and tcp_v6_syn_recv_sock run when the final ACK of a handshake reaches a listener, to make
 * the new connection's socket; their first argument is the listener. At their entry, before the kernel checks
 * whether the accept queue has room, the queue's length (sk_ack_backlog) goes into the histogram of the
 * listener's limit (sk_max_ack_backlog, the listen() backlog as the kernel capped it). So a handshake refused for
 * a full queue is counted too, at the limit (plus one), as BCC counts it. No tracepoint fires at that point: the
 * child socket's first state change (inet_sock_set_state, LISTEN -> SYN_RECV) comes only after the check has let
 * it through, so the refusals, the very events this tool is for, would be missing. Hence kernel functions only:
 * fentry, else kprobes. Histograms are cumulative and never deleted; user space prints differences. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "bits.bpf.h"
#include "tcpsynbl.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BACKLOGS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct hist);
} hists SEC(".maps");

/* Handshakes not counted because `hists` was full (user space reports them). */
__u64 hists_full = 0;

static const struct hist empty_hist;

static __always_inline int record(struct sock *listener)
{
	__u64 limit = BPF_CORE_READ(listener, sk_max_ack_backlog);
	__u64 queued = BPF_CORE_READ(listener, sk_ack_backlog);
	__u64 slot = log2l(queued);
	struct hist *h;

	h = bpf_map_lookup_elem(&hists, &limit);
	if (!h) {
		bpf_map_update_elem(&hists, &limit, &empty_hist, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &limit);
		if (!h) {
			__sync_fetch_and_add(&hists_full, 1);
			return 0;
		}
	}
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_ns, queued);
	return 0;
}

SEC("fentry/tcp_v4_syn_recv_sock")
int BPF_PROG(v4_fentry, struct sock *sk)
{
	return record(sk);
}

SEC("fentry/tcp_v6_syn_recv_sock")
int BPF_PROG(v6_fentry, struct sock *sk)
{
	return record(sk);
}

SEC("kprobe/tcp_v4_syn_recv_sock")
int BPF_KPROBE(v4_kprobe, struct sock *sk)
{
	return record(sk);
}

SEC("kprobe/tcp_v6_syn_recv_sock")
int BPF_KPROBE(v6_kprobe, struct sock *sk)
{
	return record(sk);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
