// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcplife: one record per closed TCP session, from the sock:inet_sock_set_state tracepoint.
 *
 * The tracepoint is attached as tp_btf where the kernel allows it, else raw_tp, else the classic tracepoint; all three
 * hand the same (sk, oldstate, newstate) to handle(), which reads everything else from the socket with CO-RE. As in
 * BCC, a session's birth is the time of its last state change before FIN_WAIT1 (keyed by socket), and its bytes are
 * tcp_sock's bytes_acked (TX) and bytes_received (RX) at TCP_CLOSE. Those count sequence space, so the exact payload
 * is worked out beside them: TX less bytes_acked as ESTABLISHED was reached (the active opener's acked SYN) and less
 * this end's FIN when one was queued (FIN_WAIT1 or LAST_ACK seen) and acked (snd_una reached write_seq); RX less the
 * peer's FIN when tcp_fin() took it in order (SOCK_DONE). A reset (sent or received) leaves a FIN unacked or never
 * received, and so uncounted. The owner (PID and comm) is recorded at the first state change that only a system call
 * on the socket makes: SYN_SENT (connect), FIN_WAIT1 or LAST_ACK (close/shutdown); a socket with none (an abort) gets
 * the task current at close, as in BCC. The programs, the socket's family and ports, the port filters and the
 * owner records are the state tracking tcplife shares with tcpstates and tcpconnlat (sockstate.bpf.h). Filters on
 * PID, ports and family run here; records go through a ring buffer, and failed reservations are counted in `lost`.
 * With --prometheus (`histograms_only`), sessions are added to per-service histograms instead of being sent.
 * Not a session: a passive open's child socket that goes from SYN_RECV straight to CLOSE having carried nothing.
 * When two CPUs complete the same handshake at once, both clone a child from the request (SYN_RECV, a birth here),
 * and the one that loses the race is closed at once in softirq (tcp_v4_syn_recv_sock: tcp_done()); the real child
 * goes on to ESTABLISHED. BCC prints the loser as a 0-byte session of ksoftirqd. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tcplife.h"
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "ringbuf.bpf.h"
#include "sockstate.bpf.h"
#include "timehist.bpf.h"

#define MAX_SOCKETS 16384

const volatile __u16 target_family = 0;
const volatile bool histograms_only = false;
PORT_FILTERS;

/* Sessions closed but not reported: the ring buffer was full. */
__u64 lost = 0;
/* Sessions not tracked at all: the births map was full when they started. */
__u64 births_full = 0;

/* Sessions not counted in --prometheus mode: the services map was full. */
__u64 services_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

SK_HASH(births, struct birth, MAX_SOCKETS);
/* Each socket's owner: the task of its first state change that only a system call makes. */
SK_HASH(idents, struct sk_task, MAX_SOCKETS);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct service_key);
	__type(value, struct service_hists);
} services SEC(".maps");

static const struct service_hists no_sessions;

static __always_inline void forget(struct sock *sk)
{
	bpf_map_delete_elem(&births, &sk);
	bpf_map_delete_elem(&idents, &sk);
}

/* enum sock_flags' SOCK_DONE, 1 in every kernel since 2.6 (enum sock_flags { SOCK_DEAD, SOCK_DONE, ... }): a
 * constant, not bpf_core_enum_value(), which would cost start-up a whole search of the kernel's BTF. */
#define SOCK_DONE_BIT 1

/* Kernels before skc_flags joined sock_common (6.x) kept the flags in struct sock. */
struct sock___old {
	unsigned long sk_flags;
} __attribute__((preserve_access_index));

static __always_inline unsigned long sock_flags(struct sock *sk)
{
	if (bpf_core_field_exists(sk->__sk_common.skc_flags))
		return BPF_CORE_READ(sk, __sk_common.skc_flags);
	return BPF_CORE_READ((struct sock___old *)sk, sk_flags);
}

/* Payload bytes acked (*tx) and received (*rx), from the kernel's sequence-space counters bytes_acked and
 * bytes_received, which they hold on entry (see the top of this file). */
static __always_inline void payload(struct sock *sk, const struct birth *birth, __u64 *tx, __u64 *rx)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	unsigned long flags = sock_flags(sk);

	*tx = *tx > birth->acked_base ? *tx - birth->acked_base : 0;
	if (birth->fin_sent && *tx && BPF_CORE_READ(tp, snd_una) == BPF_CORE_READ(tp, write_seq))
		(*tx)--;
	if (*rx && (flags & (1UL << SOCK_DONE_BIT)))
		(*rx)--;
}

/* --prometheus: adds the session to its service's histograms. */
static __always_inline void count_session(struct sock *sk, const struct birth *birth, __u16 family, __u16 lport,
					  __u16 rport, __u64 span_ns)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct service_key key = { .family = family, .client = birth->client };
	struct service_hists *h;
	__u64 tx = BPF_CORE_READ(tp, bytes_acked), rx = BPF_CORE_READ(tp, bytes_received);

	key.port = birth->client ? rport : lport;
	h = bpf_map_lookup_or_try_init(&services, &key, &no_sessions);
	if (!h) {
		__sync_fetch_and_add(&services_full, 1);
		return;
	}
	payload(sk, birth, &tx, &rx);
	timehist_add(&h->span, span_ns, 1000);
	timehist_add(&h->rx, rx, 1);
	timehist_add(&h->tx, tx, 1);
}

static __always_inline void report(struct sock *sk, __u16 family, __u16 lport, __u16 rport)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct birth *birth;
	struct sk_task *owner;
	struct event *e;
	__u64 now;
	__u32 pid;

	birth = bpf_map_lookup_elem(&births, &sk);
	if (!birth)
		return; /* born before we started, or filtered out */
	now = bpf_ktime_get_ns();

	owner = bpf_map_lookup_elem(&idents, &sk);
	pid = owner ? owner->pid : bpf_get_current_pid_tgid() >> 32;
	if (!tgid_wanted(pid))
		return;
	if (histograms_only) {
		count_session(sk, birth, family, lport, rport, now - birth->ts_ns);
		return;
	}

	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->ts_ns = now;
	e->span_ns = now - birth->ts_ns;
	e->rx_b = BPF_CORE_READ(tp, bytes_received);
	e->tx_b = BPF_CORE_READ(tp, bytes_acked);
	e->tx_payload = e->tx_b;
	e->rx_payload = e->rx_b;
	payload(sk, birth, &e->tx_payload, &e->rx_payload);
	e->pid = pid;
	e->cgroup_id = owner ? owner->cgroup_id : bpf_get_current_cgroup_id();
	e->lport = lport;
	e->rport = rport;
	e->family = family;
	if (owner)
		__builtin_memcpy(e->comm, owner->comm, sizeof(e->comm));
	else
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	sk_addrs(sk, family, e->saddr, e->daddr);
	bpf_ringbuf_submit(e, 0);
}

/* Keeps the birth time (every state before FIN_WAIT1, as BCC) and what payload() needs. */
static __always_inline void note_state(struct sock *sk, int newstate)
{
	struct birth fresh = {}, *birth;

	birth = bpf_map_lookup_elem(&births, &sk);
	if (newstate < TCP_FIN_WAIT1) {
		if (!birth) {
			fresh.ts_ns = bpf_ktime_get_ns();
			fresh.client = newstate == TCP_SYN_SENT;
			if (newstate == TCP_ESTABLISHED)
				fresh.acked_base = BPF_CORE_READ((struct tcp_sock *)sk, bytes_acked);
			if (bpf_map_update_elem(&births, &sk, &fresh, BPF_ANY))
				__sync_fetch_and_add(&births_full, 1);
			return;
		}
		birth->ts_ns = bpf_ktime_get_ns();
		if (newstate == TCP_ESTABLISHED)
			birth->acked_base = BPF_CORE_READ((struct tcp_sock *)sk, bytes_acked);
	} else if (birth && (newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK)) {
		birth->fin_sent = 1;
	}
}

static __always_inline int handle(struct sock *sk, int oldstate, int newstate)
{
	struct sk_change c;

	if (!sk_change_read(sk, target_family, &c))
		return 0;
	/* A port not yet known (0: a connecting socket has no local port at SYN_SENT) passes until it is. */
	if ((c.lport && !lport_listed(c.lport)) || (c.rport && !rport_listed(c.rport))) {
		forget(sk);
		return 0;
	}

	note_state(sk, newstate);
	if (newstate == TCP_SYN_SENT || newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK)
		sk_task_note(&idents, sk, BPF_NOEXIST);
	if (newstate == TCP_CLOSE) {
		struct tcp_sock *tp = (struct tcp_sock *)sk;

		if (oldstate != TCP_SYN_RECV || BPF_CORE_READ(tp, bytes_received) || BPF_CORE_READ(tp, bytes_acked))
			report(sk, c.family, c.lport, c.rport);
		forget(sk);
	}
	return 0;
}

SOCK_STATE_PROGRAMS(handle)

char LICENSE[] SEC("license") = "Dual BSD/GPL";
