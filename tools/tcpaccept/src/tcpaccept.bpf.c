// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpaccept: one record per TCP connection a process accepts.
 *
 * Where the kernel lets BPF trace its functions, the return of inet_csk_accept (fexit, reading the return value
 * with bpf_get_func_ret so that either of its signatures works; else a kretprobe, as BCC): the new socket, in the
 * accepting task. Elsewhere (no kprobes needed), the exit of the accept and accept4 system calls
 * (syscalls:sys_exit_accept/accept4): the returned descriptor is looked up in the task's file table
 * (task->files->fdt->fd[ret]->private_data is the struct socket, ->sk the new sock). Accepts made without those
 * system calls (io_uring) are seen only by the kernel-function paths. Filters on PID, family and local port run
 * here; records go through a ring buffer and failed reservations are counted in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fdsock.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "sock.bpf.h"
#include "syscall_tp.bpf.h"
#include "tcpaccept.h"

const volatile __u16 target_family = 0;
const volatile bool filter_port = false;

__u64 lost = 0;

struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u16);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline int accepted(struct sock *sk)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u16 family, lport;
	struct event *e;

	if (!sk)
		return 0;
	if (!tgid_wanted(pid))
		return 0;
	if (!sk_is_tcp(sk))
		return 0;
	family = sk_inet_family(sk, target_family);
	if (!family)
		return 0;
	lport = sk_lport(sk);
	if (filter_port && !bpf_map_lookup_elem(&ports, &lport))
		return 0;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = pid;
	e->family = family;
	e->lport = lport;
	e->rport = sk_rport(sk);
	sk_addrs(sk, family, e->laddr, e->raddr);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* --- tracepoint path: accept()/accept4() return, and the socket behind the returned descriptor --- */

static __always_inline int syscall_exit(long ret)
{
	struct socket *sock;

	if (ret < 0)
		return 0;
	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	sock = fd_socket(ret);
	if (!sock)
		return 0;
	return accepted(BPF_CORE_READ(sock, sk));
}

SEC("tracepoint/syscalls/sys_exit_accept")
int accept_exit(struct syscall_exit_ctx *args)
{
	return syscall_exit(args->ret);
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int accept4_exit(struct syscall_exit_ctx *args)
{
	return syscall_exit(args->ret);
}

/* --- kernel function paths --- */

SEC("fexit/inet_csk_accept")
int accept_fexit(__u64 *ctx)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	return accepted((struct sock *)ret);
}

SEC("kretprobe/inet_csk_accept")
int BPF_KRETPROBE(accept_kretprobe, struct sock *sk)
{
	return accepted(sk);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
