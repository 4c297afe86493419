// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcptracer: one record per TCP connection established by connect() (C), accepted (A) and closed (X).
 *
 * All of it without kernel functions, on sock:inet_sock_set_state (sockstate.bpf.h's three programs) and the
 * accept system calls' returns:
 * - connect: CLOSE -> SYN_SENT is made by tcp_v4/v6_connect in the connecting task, which is noted as the
 *   socket's owner; the record is sent at SYN_SENT -> ESTABLISHED, when both ports are known. A connect that never
 *   gets there (refused, timed out) sends nothing, as BCC's tracer, which reports connects when they establish.
 * - accept: the handshake completes in softirq context, not in the accepting task, so the record is sent where
 *   the task is current: the return of accept()/accept4(), with the socket behind the returned descriptor
 *   (fdsock.bpf.h), as tcpaccept's tracepoint path. That task becomes the socket's owner.
 * - close: the first change that leaves ESTABLISHED or CLOSE_WAIT. To FIN_WAIT1 or LAST_ACK only close() or
 *   shutdown() goes, in the closing task, which is reported; to CLOSE it may be an abort by the owner or a reset
 *   from the peer in softirq context, so the owner noted at connect or accept is reported, and a socket with no
 *   known owner (one opened before tracing began) is not. Connections that never established send no close, as
 *   in BCC.
 * Filters (PID, UID, cgroup, container maps, network namespace, family) apply to the task reported. Records go
 * through a ring buffer; failed reservations are counted in `lost`, owners not kept for a full map in
 * `owners_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "containers.bpf.h"
#include "ringbuf.bpf.h"
#include "sockstate.bpf.h"
#include "fdsock.bpf.h"
#include "syscall_tp.bpf.h"
#include "tcptracer.h"

const volatile __u16 target_family = 0;
const volatile __u32 target_netns = 0;
CGROUP_FILTER;
CONTAINER_FILTER;

__u64 lost = 0;
__u64 owners_full = 0;

struct event _event_type = {};

/* The task a socket belongs to: its connecting or accepting task, and whether that task passed the filters. */
struct owner {
	__u32 pid;
	__u32 uid;
	__u8 wanted;
	__u8 _pad[7];
	char comm[TASK_COMM_LEN];
};

SK_HASH(owners, struct owner, MAX_SOCKETS);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline __u32 sk_netns(struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

/* The current task passes the task filters. */
static __always_inline bool current_wanted(void)
{
	__u64 id = bpf_get_current_pid_tgid();

	return tgid_wanted(id >> 32) && uid_wanted((__u32)bpf_get_current_uid_gid()) && cgroup_wanted() &&
	       container_wanted();
}

static __always_inline void owner_current(struct owner *o)
{
	o->pid = bpf_get_current_pid_tgid() >> 32;
	o->uid = (__u32)bpf_get_current_uid_gid();
	o->wanted = current_wanted();
	bpf_get_current_comm(o->comm, sizeof(o->comm));
}

static __always_inline void owner_keep(struct sock *sk, struct owner *o)
{
	if (bpf_map_update_elem(&owners, &sk, o, BPF_ANY))
		__sync_fetch_and_add(&owners_full, 1);
}

/* Sends one record of `type` for `sk`, on behalf of `o`, if the socket and the task pass the filters. */
static __always_inline void report(struct sock *sk, __u32 type, struct owner *o)
{
	struct sk_change c;
	struct event *e;
	__u32 netns;

	if (!o->wanted || !sk_change_read(sk, target_family, &c))
		return;
	netns = sk_netns(sk);
	if (target_netns && netns != target_netns)
		return;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->ts_ns = bpf_ktime_get_ns();
	e->type = type;
	e->pid = o->pid;
	e->uid = o->uid;
	e->netns = netns;
	e->family = c.family;
	e->lport = c.lport;
	e->rport = c.rport;
	sk_addrs(sk, c.family, e->laddr, e->raddr);
	__builtin_memcpy(e->comm, o->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int on_change(struct sock *sk, int oldstate, int newstate)
{
	struct owner cur = {}, *o;

	if (!sk_is_tcp(sk))
		return 0;
	if (oldstate == TCP_CLOSE && newstate == TCP_SYN_SENT) {
		owner_current(&cur);
		owner_keep(sk, &cur);
		return 0;
	}
	if (oldstate == TCP_SYN_SENT) {
		o = bpf_map_lookup_elem(&owners, &sk);
		if (!o)
			return 0;
		if (newstate == TCP_ESTABLISHED)
			report(sk, EV_CONNECT, o);
		else
			bpf_map_delete_elem(&owners, &sk);
		return 0;
	}
	if (oldstate != TCP_ESTABLISHED && oldstate != TCP_CLOSE_WAIT) {
		if (newstate == TCP_CLOSE)
			bpf_map_delete_elem(&owners, &sk);
		return 0;
	}
	if (newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK) {
		owner_current(&cur);
		report(sk, EV_CLOSE, &cur);
	} else if (newstate == TCP_CLOSE) {
		o = bpf_map_lookup_elem(&owners, &sk);
		if (o)
			report(sk, EV_CLOSE, o);
	} else {
		return 0; /* ESTABLISHED -> CLOSE_WAIT: the peer's FIN, nothing closed here yet */
	}
	bpf_map_delete_elem(&owners, &sk);
	return 0;
}

SOCK_STATE_PROGRAMS(on_change);

/* --- accept()/accept4() return: the accepting task, and the socket behind the returned descriptor --- */

static __always_inline int accept_return(long ret)
{
	struct owner cur = {};
	struct socket *sock = fd_socket(ret);
	struct sock *sk;

	if (!sock)
		return 0;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || !sk_is_tcp(sk))
		return 0;
	owner_current(&cur);
	owner_keep(sk, &cur);
	report(sk, EV_ACCEPT, &cur);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept")
int accept_exit(struct syscall_exit_ctx *args)
{
	return accept_return(args->ret);
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int accept4_exit(struct syscall_exit_ctx *args)
{
	return accept_return(args->ret);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
