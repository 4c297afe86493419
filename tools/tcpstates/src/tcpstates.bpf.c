// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpstates: one record per TCP state change, with the time the socket spent in the state it leaves.
 *
 * sock:inet_sock_set_state as tp_btf, else raw_tp, else the classic tracepoint (the programs, the socket's family,
 * ports and the -L/-D filters are the shared state tracking of sockstate.bpf.h). The time of each socket's last
 * change is kept in `last` (removed at TCP_CLOSE); a change with none before it (the first one seen, as for a
 * socket older than the trace) has a span of 0, as in BCC. The time is kept for every TCP socket of the family
 * asked for, whatever -L and -D say, so that a change they let through always has its true span. PID and comm are
 * the task current at the change, as BCC's C-PID and C-COMM. Records go through a ring buffer; failed
 * reservations are counted in `lost`, sockets the `last` map had no room for in `last_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tcpstates.h"
#include "ringbuf.bpf.h"
#include "sockstate.bpf.h"

const volatile __u16 target_family = 0;
PORT_FILTERS;

/* State changes not reported: the ring buffer was full. */
__u64 lost = 0;
/* State changes whose time could not be kept for the next one: the map of sockets was full. */
__u64 last_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

SK_HASH(last, __u64, MAX_SOCKETS);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline int on_change(struct sock *sk, int oldstate, int newstate)
{
	struct sk_change c;
	struct event *e;
	__u64 now, *since;

	if (!sk_change_read(sk, target_family, &c))
		return 0;
	now = bpf_ktime_get_ns();
	since = bpf_map_lookup_elem(&last, &sk);

	if (lport_listed(c.lport) && rport_listed(c.rport)) {
		e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
		if (e) {
			e->ts_ns = now;
			e->skaddr = (__u64)sk;
			e->span_ns = since ? now - *since : 0;
			e->pid = bpf_get_current_pid_tgid() >> 32;
			e->family = c.family;
			e->lport = c.lport;
			e->rport = c.rport;
			e->oldstate = oldstate;
			e->newstate = newstate;
			sk_addrs(sk, c.family, e->saddr, e->daddr);
			bpf_get_current_comm(e->comm, sizeof(e->comm));
			bpf_ringbuf_submit(e, 0);
		}
	}

	if (newstate == TCP_CLOSE)
		bpf_map_delete_elem(&last, &sk);
	else if (since)
		*since = now;
	else if (bpf_map_update_elem(&last, &sk, &now, BPF_ANY))
		__sync_fetch_and_add(&last_full, 1);
	return 0;
}

SOCK_STATE_PROGRAMS(on_change)

char LICENSE[] SEC("license") = "Dual BSD/GPL";
