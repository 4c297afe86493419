// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* bindsnoop: one record per bind() on an IPv4 or IPv6 socket, with its result, protocol and options.
 *
 * A bind is followed from its start to its result, per thread:
 * - tracepoint path (no kprobes needed): syscalls:sys_enter_bind finds the struct socket behind the descriptor
 *   (fdsock.bpf.h) and copies the address asked for from user memory; syscalls:sys_exit_bind has the result.
 *   Binds made without the system call (io_uring, kernel sockets) are seen only by the kernel-function paths.
 * - fexit of inet_bind and inet6_bind (the socket, the kernel's copy of the address and the result at once);
 * - kprobe/kretprobe of the same functions, as BCC.
 * At the result, the socket is read with CO-RE: a successful bind reports the address and port the socket now
 * holds, a failed one (kept only with -E) the address and port asked for. Options are the socket's state when
 * the call ends: IP_FREEBIND, IP_TRANSPARENT and IP_BIND_ADDRESS_NO_PORT (bits of inet_flags since 6.6, bit
 * fields of inet_sock before), SO_REUSEADDR and SO_REUSEPORT (sock_common bit fields). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "containers.bpf.h"
#include "fdsock.bpf.h"
#include "maps.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "sock.bpf.h"
#include "syscall_tp.bpf.h"
#include "bindsnoop.h"

const volatile bool ignore_errors = true;
const volatile bool filter_port = false;
const volatile bool count_mode = false;

CGROUP_FILTER;
CONTAINER_FILTER;

__u64 lost = 0;
/* Binds not followed because `inflight` was full, and pairs --count could not add. */
__u64 inflight_full = 0;
__u64 counts_full = 0;

struct event _event_type = {};
struct count_key _count_key_type = {};

/* What a bind asked for, kept from its start to its result. */
struct bind_start {
	struct socket *sock;
	__u8 addr[16];
	__u16 family;
	__u16 port;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct bind_start);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u16);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_COUNTS);
	__type(key, struct count_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* inet_sock's option bits: bit fields before 6.6, bits of inet_flags after (enum values from BTF). */
struct inet_sock___old {
	__u8 freebind : 1;
	__u8 transparent : 1;
	__u8 bind_address_no_port : 1;
};

struct inet_sock___flags {
	unsigned long inet_flags;
};

enum inet_flags_bits___x {
	INET_FLAGS_FREEBIND___x = 11,
	INET_FLAGS_TRANSPARENT___x = 15,
	INET_FLAGS_BIND_ADDRESS_NO_PORT___x = 18,
};

static __always_inline __u8 inet_options(struct sock *sk)
{
	__u8 opts = 0;

	if (bpf_core_field_exists(struct inet_sock___old, freebind)) {
		struct inet_sock___old *old = (void *)sk;

		if (BPF_CORE_READ_BITFIELD_PROBED(old, freebind))
			opts |= OPT_FREEBIND;
		if (BPF_CORE_READ_BITFIELD_PROBED(old, transparent))
			opts |= OPT_TRANSPARENT;
		if (BPF_CORE_READ_BITFIELD_PROBED(old, bind_address_no_port))
			opts |= OPT_BIND_ADDRESS_NO_PORT;
	} else {
		unsigned long flags = BPF_CORE_READ((struct inet_sock___flags *)sk, inet_flags);

		if (flags & (1UL << INET_FLAGS_FREEBIND___x))
			opts |= OPT_FREEBIND;
		if (flags & (1UL << INET_FLAGS_TRANSPARENT___x))
			opts |= OPT_TRANSPARENT;
		if (flags & (1UL << INET_FLAGS_BIND_ADDRESS_NO_PORT___x))
			opts |= OPT_BIND_ADDRESS_NO_PORT;
	}
	if (BPF_CORE_READ_BITFIELD_PROBED(sk, __sk_common.skc_reuse))
		opts |= OPT_REUSEADDR;
	if (BPF_CORE_READ_BITFIELD_PROBED(sk, __sk_common.skc_reuseport))
		opts |= OPT_REUSEPORT;
	return opts;
}

/* The current task passes -p, -u, -c, --cgroupmap and --mntnsmap. */
static __always_inline bool task_wanted(void)
{
	return tgid_wanted(bpf_get_current_pid_tgid() >> 32) && current_uid_wanted() && cgroup_wanted() &&
	       container_wanted();
}

/* Keeps a bind's socket and requested address (a struct sockaddr at `uaddr`, `len` bytes, in user memory for the
 * system call, in kernel memory for the kernel functions) until its result. */
static __always_inline void bind_started(struct socket *sock, const void *uaddr, long len, bool user)
{
	struct bind_start start = {};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sock *sk;
	__u16 need;

	if (!sock)
		return;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || !sk_inet_family(sk, 0))
		return;
	start.sock = sock;
	/* sa_family, then the port (both struct sockaddr_in and sockaddr_in6), then the address at 4 or 8. */
	if (uaddr && len >= 4) {
		__u8 head[4] = {};

		if (user)
			bpf_probe_read_user(head, sizeof(head), uaddr);
		else
			bpf_probe_read_kernel(head, sizeof(head), uaddr);
		start.family = head[0] | (head[1] << 8);
		start.port = (head[2] << 8) | head[3];
		need = start.family == AF_INET6 ? 24 : 8;
		if ((start.family == AF_INET || start.family == AF_INET6) && len >= need) {
			const void *a = uaddr + (start.family == AF_INET6 ? 8 : 4);
			__u32 n = start.family == AF_INET6 ? 16 : 4;

			if (user)
				bpf_probe_read_user(start.addr, n, a);
			else
				bpf_probe_read_kernel(start.addr, n, a);
		}
	}
	if (bpf_map_update_elem(&inflight, &tid, &start, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
}

/* Reports the result `ret` of the bind that `start` began. */
static __always_inline void bind_done(struct bind_start *start, long ret)
{
	struct socket *sock = start->sock; /* a plain read: bind_start is ours, not the kernel's */
	struct sock *sk = BPF_CORE_READ(sock, sk);
	__u8 addr[16] = {};
	__u16 family, port;
	struct event *e;

	if (ret != 0 && ignore_errors)
		return;
	if (!sk)
		return;
	family = sk_family(sk);
	if (ret == 0) {
		port = sk_lport(sk);
		if (family == AF_INET)
			bpf_core_read(addr, 4, &sk->__sk_common.skc_rcv_saddr);
		else if (family == AF_INET6)
			bpf_core_read(addr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
	} else {
		port = start->port;
		if (start->family == family)
			__builtin_memcpy(addr, start->addr, 16);
	}
	if (filter_port && !bpf_map_lookup_elem(&ports, &port))
		return;
	if (count_mode) {
		struct count_key key = {};

		__builtin_memcpy(key.addr, addr, 16);
		key.family = family;
		key.port = port;
		counter_add(&counts, &key, 1, &counts_full);
		return;
	}
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->ts_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->ret = ret;
	e->bound_dev_if = BPF_CORE_READ(sk, __sk_common.skc_bound_dev_if);
	e->family = family;
	e->port = port;
	e->protocol = BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	e->opts = inet_options(sk);
	__builtin_memcpy(e->addr, addr, 16);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

/* The result of the current thread's bind, if its start was kept. */
static __always_inline void bind_returned(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct bind_start *start = bpf_map_lookup_elem(&inflight, &tid);

	if (!start)
		return;
	bind_done(start, ret);
	bpf_map_delete_elem(&inflight, &tid);
}

/* --- tracepoint path: the bind system call --- */

SEC("tracepoint/syscalls/sys_enter_bind")
int bind_enter(struct syscall_enter_ctx *ctx)
{
	if (!task_wanted())
		return 0;
	bind_started(fd_socket(ctx->args[0]), (const void *)ctx->args[1], (long)(int)ctx->args[2], true);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_bind")
int bind_exit(struct syscall_exit_ctx *ctx)
{
	bind_returned(ctx->ret);
	return 0;
}

/* --- kernel function paths: inet_bind and inet6_bind (struct socket *, struct sockaddr *, int) --- */

static __always_inline int fexit_bind(struct socket *sock, const void *uaddr, int len, int ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct bind_start *start;

	if (!task_wanted())
		return 0;
	bind_started(sock, uaddr, len, false);
	start = bpf_map_lookup_elem(&inflight, &tid);
	if (!start)
		return 0;
	bind_done(start, ret);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("fexit/inet_bind")
int BPF_PROG(inet_bind_fexit, struct socket *sock, void *uaddr, int len, int ret)
{
	return fexit_bind(sock, uaddr, len, ret);
}

SEC("fexit/inet6_bind")
int BPF_PROG(inet6_bind_fexit, struct socket *sock, void *uaddr, int len, int ret)
{
	return fexit_bind(sock, uaddr, len, ret);
}

static __always_inline int kprobe_bind(struct socket *sock, const void *uaddr, int len)
{
	if (task_wanted())
		bind_started(sock, uaddr, len, false);
	return 0;
}

SEC("kprobe/inet_bind")
int BPF_KPROBE(inet_bind_kprobe, struct socket *sock, void *uaddr, int len)
{
	return kprobe_bind(sock, uaddr, len);
}

SEC("kprobe/inet6_bind")
int BPF_KPROBE(inet6_bind_kprobe, struct socket *sock, void *uaddr, int len)
{
	return kprobe_bind(sock, uaddr, len);
}

SEC("kretprobe/inet_bind")
int BPF_KRETPROBE(inet_bind_kretprobe, int ret)
{
	bind_returned(ret);
	return 0;
}

SEC("kretprobe/inet6_bind")
int BPF_KRETPROBE(inet6_bind_kretprobe, int ret)
{
	bind_returned(ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
