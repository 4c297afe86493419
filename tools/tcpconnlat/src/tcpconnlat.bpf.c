// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpconnlat: the latency of each active TCP open, from its SYN to the handshake's completion.
 *
 * sock:inet_sock_set_state as tp_btf, else raw_tp, else the classic tracepoint (the programs and the socket's
 * family and ports are the shared state tracking of sockstate.bpf.h). tcp_v4_connect()/tcp_v6_connect() make the
 * change CLOSE -> SYN_SENT themselves, in the connecting task, just before the SYN is sent: the task and the time
 * are kept in `openers` (with the -p filter applied there). The socket's next change ends the connect: to
 * ESTABLISHED when the SYN-ACK came in (a record, if the latency reaches the -m threshold), or to CLOSE on a reset,
 * a timeout or an abort (no record: the connection was never made). BCC measures the same span with kprobes on
 * tcp_v4_connect and tcp_rcv_state_process. Records go through a ring buffer; failed reservations are counted in
 * `lost`, connects the `openers` map had no room for in `openers_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tcpconnlat.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "sockstate.bpf.h"

const volatile __u16 target_family = 0;
/* The threshold: connects faster than this many microseconds are not reported. */
const volatile __u64 min_us = 0;

/* Connects not reported: the ring buffer was full. */
__u64 lost = 0;
/* Connects not timed: the map of connects in progress was full. */
__u64 openers_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

SK_HASH(openers, struct sk_task, MAX_SOCKETS);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline void report(struct sock *sk, struct sk_change *c, struct sk_task *o)
{
	__u64 now = bpf_ktime_get_ns();
	struct event *e;

	if ((now - o->ts_ns) / 1000 < min_us)
		return;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->ts_ns = now;
	e->lat_ns = now - o->ts_ns;
	e->pid = o->pid;
	e->family = c->family;
	e->lport = c->lport;
	e->rport = c->rport;
	sk_addrs(sk, c->family, e->saddr, e->daddr);
	__builtin_memcpy(e->comm, o->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int on_change(struct sock *sk, int oldstate, int newstate)
{
	struct sk_change c;
	struct sk_task *o;

	if (!sk_change_read(sk, target_family, &c))
		return 0;
	if (oldstate == TCP_CLOSE && newstate == TCP_SYN_SENT) {
		if (tgid_wanted(bpf_get_current_pid_tgid() >> 32) && sk_task_note(&openers, sk, BPF_ANY))
			__sync_fetch_and_add(&openers_full, 1);
		return 0;
	}
	o = bpf_map_lookup_elem(&openers, &sk);
	if (!o)
		return 0;
	if (oldstate == TCP_SYN_SENT && newstate == TCP_ESTABLISHED)
		report(sk, &c, o);
	bpf_map_delete_elem(&openers, &sk);
	return 0;
}

SOCK_STATE_PROGRAMS(on_change)

char LICENSE[] SEC("license") = "Dual BSD/GPL";
