// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcppktlat: how long received TCP data waits in a socket before a task reads it.
 *
 * Three TCP tracepoints, each as tp_btf, else raw_tp (the TP_BTF_RAW pairs):
 *  - tcp:tcp_probe runs at the start of tcp_rcv_established() for every segment an established socket receives;
 *    a segment carrying data (longer than its TCP header) stores the time in `arrivals`, keyed by the socket, in
 *    place of any earlier one: the clock runs from the last segment that came in before the read. The port
 *    filters (-l, -r) apply here, so other sockets are never stored.
 *  - tcp:tcp_rcv_space_adjust runs in the reading task each time recvmsg() has copied data to user space: if the
 *    socket has a time stored, the wait ends, the entry is removed and (past the -p/-t filters and the threshold)
 *    one record goes through the ring buffer. Later copies of the same read find nothing stored: one record per
 *    pick-up of newly arrived data.
 *  - tcp:tcp_destroy_sock removes the entry of a socket closed with data unread, so a later socket at the same
 *    address does not inherit it.
 * libbpf-tools hooks the same three tracepoints. Sockets the map had no room for are counted in `arrivals_full`,
 * records the ring buffer had no room for in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "sock.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "tcppktlat.h"

const volatile __u16 target_lport = 0;
const volatile __u16 target_rport = 0;
/* The threshold, if not 0: waits of this many microseconds or fewer are not reported (libbpf-tools' rule; without
 * one, libbpf-tools also drops waits under a microsecond, which are shown here). */
const volatile __u64 min_us = 0;

/* Records not sent: the ring buffer was full. */
__u64 lost = 0;
/* Arrivals not timed: `arrivals` was full. */
__u64 arrivals_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SOCKETS);
	__type(key, struct sock *);
	__type(value, __u64);
} arrivals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* The payload of a segment at tcp_rcv_established(), where skb->data points at the TCP header: its length minus
 * the header's (doff counts 32-bit words). */
static __always_inline __u32 payload_len(const struct sk_buff *skb)
{
	struct tcphdr *th = (struct tcphdr *)BPF_CORE_READ(skb, data);
	__u32 hdr = BPF_CORE_READ_BITFIELD_PROBED(th, doff) * 4;
	__u32 len = BPF_CORE_READ(skb, len);

	return len > hdr ? len - hdr : 0;
}

TP_BTF_RAW(tcp_probe, tcp_probe, struct sock *sk, const struct sk_buff *skb)
{
	__u64 now;

	if (target_lport && sk_lport(sk) != target_lport)
		return 0;
	if (target_rport && sk_rport(sk) != target_rport)
		return 0;
	if (!payload_len(skb))
		return 0;
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&arrivals, &sk, &now, BPF_ANY))
		__sync_fetch_and_add(&arrivals_full, 1);
	return 0;
}

TP_BTF_RAW(tcp_rcv_space_adjust, tcp_rcv_space_adjust, struct sock *sk)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 *arrived, delta;
	struct event *e;
	__u16 family;

	arrived = bpf_map_lookup_elem(&arrivals, &sk);
	if (!arrived)
		return 0;
	delta = bpf_ktime_get_ns() - *arrived;
	if (!current_ids_wanted(pid_tgid) || (min_us && delta / 1000 <= min_us))
		goto done;
	family = sk_family(sk);
	if (family != AF_INET && family != AF_INET6)
		goto done;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		goto done;
	e->delta_ns = delta;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->family = family;
	e->lport = sk_lport(sk);
	e->rport = sk_rport(sk);
	sk_addrs(sk, family, e->saddr, e->daddr);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
done:
	bpf_map_delete_elem(&arrivals, &sk);
	return 0;
}

TP_BTF_RAW(tcp_destroy_sock, tcp_destroy_sock, struct sock *sk)
{
	bpf_map_delete_elem(&arrivals, &sk);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
