// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* solisten: one record per listen() on a TCP socket, with its backlog, address, port, network namespace and
 * result.
 *
 * A listen is followed from its start to its result, per thread:
 * - tracepoint path (no kprobes needed): syscalls:sys_enter_listen finds the struct socket behind the descriptor
 *   (fdsock.bpf.h) and keeps the backlog asked for; syscalls:sys_exit_listen has the result. Only TCP sockets of
 *   the IPv4 and IPv6 families are kept, the ones whose listen is inet_listen. The backlog is capped at the
 *   namespace's somaxconn, as __sys_listen does before it calls inet_listen.
 * - fexit of inet_listen (the socket, the backlog as passed on, the result);
 * - kprobe/kretprobe of inet_listen, as BCC and libbpf-tools.
 * At the result the socket is read with CO-RE, so a socket that listens unbound shows the port it got. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fdsock.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "sock.bpf.h"
#include "syscall_tp.bpf.h"
#include "solisten.h"

const volatile __u64 target_netns = 0;

__u64 lost = 0;
/* Listens not followed because `inflight` was full. */
__u64 inflight_full = 0;

struct event _event_type = {};

struct listen_start {
	struct socket *sock;
	__s32 backlog;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct listen_start);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline __u64 sk_netns(struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

/* Keeps a listen's socket and backlog until its result; `sys` marks the system call's view (the backlog before
 * the kernel's cap, and any socket: only TCP over IPv4/IPv6 is kept). */
static __always_inline void listen_started(struct socket *sock, int backlog, bool sys)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct listen_start start = {};
	struct sock *sk;

	if (!sock || !tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || !sk_inet_family(sk, 0))
		return;
	if (sys) {
		int somaxconn;

		if (!sk_is_tcp(sk))
			return;
		somaxconn = BPF_CORE_READ(sk, __sk_common.skc_net.net, core.sysctl_somaxconn);
		if ((unsigned int)backlog > (unsigned int)somaxconn)
			backlog = somaxconn;
	}
	if (target_netns && sk_netns(sk) != target_netns)
		return;
	start.sock = sock;
	start.backlog = backlog;
	if (bpf_map_update_elem(&inflight, &tid, &start, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
}

static __always_inline void listen_done(struct listen_start *start, long ret)
{
	struct socket *sock = start->sock; /* a plain read: listen_start is ours, not the kernel's */
	struct sock *sk = BPF_CORE_READ(sock, sk);
	struct event *e;

	if (!sk)
		return;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->ts_ns = bpf_ktime_get_ns();
	e->netns = sk_netns(sk);
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->ret = ret;
	e->backlog = start->backlog;
	e->family = sk_family(sk);
	e->type = BPF_CORE_READ(sock, type);
	e->port = sk_lport(sk);
	if (e->family == AF_INET)
		bpf_core_read(e->addr, 4, &sk->__sk_common.skc_rcv_saddr);
	else
		bpf_core_read(e->addr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void listen_returned(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct listen_start *start = bpf_map_lookup_elem(&inflight, &tid);

	if (!start)
		return;
	listen_done(start, ret);
	bpf_map_delete_elem(&inflight, &tid);
}

/* --- tracepoint path: the listen system call --- */

SEC("tracepoint/syscalls/sys_enter_listen")
int listen_enter(struct syscall_enter_ctx *ctx)
{
	listen_started(fd_socket(ctx->args[0]), (int)ctx->args[1], true);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_listen")
int listen_exit(struct syscall_exit_ctx *ctx)
{
	listen_returned(ctx->ret);
	return 0;
}

/* --- kernel function paths: inet_listen(struct socket *, int backlog) --- */

SEC("fexit/inet_listen")
int BPF_PROG(inet_listen_fexit, struct socket *sock, int backlog, int ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct listen_start *start;

	listen_started(sock, backlog, false);
	start = bpf_map_lookup_elem(&inflight, &tid);
	if (!start)
		return 0;
	listen_done(start, ret);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("kprobe/inet_listen")
int BPF_KPROBE(inet_listen_kprobe, struct socket *sock, int backlog)
{
	listen_started(sock, backlog, false);
	return 0;
}

SEC("kretprobe/inet_listen")
int BPF_KRETPROBE(inet_listen_kretprobe, int ret)
{
	listen_returned(ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
