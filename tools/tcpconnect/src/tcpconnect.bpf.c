// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpconnect: one record per active TCP open (connect()), or a count per flow with -c.
 *
 * Two ways in. Where the kernel lets BPF trace its functions, the return of tcp_v4_connect/tcp_v6_connect
 * (fexit, else kprobe + kretprobe, as BCC): a return of 0 is a connect attempt, with the local port assigned.
 * Elsewhere (this needs no kprobes), sock:inet_sock_set_state: the change CLOSE -> SYN_SENT is made by
 * tcp_v4/v6_connect itself, in the connecting task, so the task (PID, UID, comm, cgroup) is current there; the
 * local port is only assigned after that change, so the record is sent at the first later moment it is known:
 * when the connect() system call returns (syscalls:sys_exit_connect, which also covers non-blocking connects to a
 * host that never answers) or at the socket's next state change (ESTABLISHED or CLOSE, for connects made
 * without connect(): TCP Fast Open's sendto, io_uring, the kernel's own). Filters run here; records go through a
 * ring buffer and failed reservations are counted in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "maps.bpf.h"
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "ringbuf.bpf.h"
#include "sock.bpf.h"
#include "tcpconnect.h"

const volatile __u16 target_family = 0;
const volatile bool filter_port = false;
CGROUP_FILTER;
const volatile bool count = false;

/* Connects not reported: the ring buffer was full. */
__u64 lost = 0;
/* Flows not counted: the flow map was full. */
__u64 flows_full = 0;

struct event _event_type = {};
struct flow _flow_type = {};
struct lookup _lookup_type = {};

/* Who started a connect, kept from SYN_SENT until the local port is known. */
struct opener {
	__u64 ts_ns;
	__u32 pid;
	__u32 uid;
	char comm[TASK_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct sock *);
	__type(value, struct opener);
} openers SEC(".maps");

/* The socket each thread is connecting (tracepoint path: for sys_exit_connect; kprobe path: for kretprobe). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct sock *);
} connecting SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u16);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, struct flow);
	__type(value, __u64);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* The filters on the current task and the socket's family and destination port. */
static __always_inline bool wanted(struct sock *sk, __u32 *pid, __u32 *uid)
{
	__u16 family, dport;

	*pid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid_wanted(*pid))
		return false;
	*uid = (__u32)bpf_get_current_uid_gid();
	if (!uid_wanted(*uid))
		return false;
	family = sk_inet_family(sk, target_family);
	if (!family)
		return false;
	dport = sk_rport(sk);
	if (filter_port && !bpf_map_lookup_elem(&ports, &dport))
		return false;
	if (!cgroup_wanted())
		return false;
	return true;
}

static __always_inline void report(struct sock *sk, struct opener *o)
{
	__u16 family = sk_family(sk);
	struct event *e;

	if (count) {
		struct flow key = {};

		key.family = family;
		key.dport = sk_rport(sk);
		sk_addrs(sk, family, key.saddr, key.daddr);
		counter_inc(&flows, &key, &flows_full);
		return;
	}
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->kind = RECORD_CONNECT;
	e->ts_ns = o->ts_ns;
	e->pid = o->pid;
	e->uid = o->uid;
	e->family = family;
	e->lport = sk_lport(sk);
	e->dport = sk_rport(sk);
	sk_addrs(sk, family, e->saddr, e->daddr);
	__builtin_memcpy(e->comm, o->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

/* The current task as the opener of a connect. */
static __always_inline bool current_opener(struct sock *sk, struct opener *o)
{
	if (!wanted(sk, &o->pid, &o->uid))
		return false;
	o->ts_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(o->comm, sizeof(o->comm));
	return true;
}

/* Sends the record of a socket waiting for its local port, once. */
static __always_inline void flush(struct sock *sk)
{
	struct opener *o = bpf_map_lookup_elem(&openers, &sk);

	if (!o)
		return;
	report(sk, o);
	bpf_map_delete_elem(&openers, &sk);
}

/* --- tracepoint path --- */

static __always_inline int set_state(struct sock *sk, int oldstate, int newstate)
{
	struct opener o = {};

	if (!sk_is_tcp(sk))
		return 0;
	if (oldstate != TCP_CLOSE || newstate != TCP_SYN_SENT) {
		flush(sk);
		return 0;
	}
	if (!current_opener(sk, &o))
		return 0;
	bpf_map_update_elem(&openers, &sk, &o, BPF_ANY);
	sk_stash(&connecting, sk);
	return 0;
}

TP_BTF_RAW(set_state, inet_sock_set_state, struct sock *sk, int oldstate, int newstate)
{
	return set_state(sk, oldstate, newstate);
}

SEC("tracepoint/sock/inet_sock_set_state")
int set_state_tp(struct trace_event_raw_inet_sock_set_state *args)
{
	return set_state((struct sock *)args->skaddr, args->oldstate, args->newstate);
}

SEC("tracepoint/syscalls/sys_exit_connect")
int connect_exit(void *ctx)
{
	struct sock *sk = sk_take(&connecting);

	if (sk)
		flush(sk);
	return 0;
}

/* --- kernel function paths --- */

static __always_inline int connect_return(struct sock *sk, int ret)
{
	struct opener o = {};

	if (ret || !current_opener(sk, &o))
		return 0;
	report(sk, &o);
	return 0;
}

SEC("fexit/tcp_v4_connect")
int BPF_PROG(v4_connect_fexit, struct sock *sk, struct sockaddr *uaddr, int addr_len, int ret)
{
	return connect_return(sk, ret);
}

SEC("fexit/tcp_v6_connect")
int BPF_PROG(v6_connect_fexit, struct sock *sk, struct sockaddr *uaddr, int addr_len, int ret)
{
	return connect_return(sk, ret);
}

SEC("kprobe/tcp_v4_connect")
int BPF_KPROBE(connect_entry, struct sock *sk)
{
	sk_stash(&connecting, sk);
	return 0;
}

SEC("kretprobe/tcp_v4_connect")
int BPF_KRETPROBE(connect_ret, int ret)
{
	struct sock *sk = sk_take(&connecting);

	if (!sk)
		return 0;
	return connect_return(sk, ret);
}

/* --- -d: the names connects were made to, from the C library's getaddrinfo() --- */

/* getaddrinfo()'s arguments each thread is inside it with: the name and where the result goes. */
struct gai_call {
	__u64 node;
	__u64 res;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct gai_call);
} looking_up SEC(".maps");

/* Lookups not reported: the ring buffer was full. */
__u64 lost_lookups = 0;

/* struct addrinfo of a 64-bit C library (glibc and musl lay it out alike). */
struct user_addrinfo {
	int ai_flags;
	int ai_family;
	int ai_socktype;
	int ai_protocol;
	__u32 ai_addrlen;
	__u64 ai_addr;
	__u64 ai_canonname;
	__u64 ai_next;
};

SEC("uprobe")
int BPF_UPROBE(getaddrinfo_entry, const char *node, const char *service, const void *hints, void **res)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct gai_call a = { .node = (__u64)node, .res = (__u64)res };

	if (node && res)
		bpf_map_update_elem(&looking_up, &tid, &a, BPF_ANY);
	return 0;
}

/* At a successful return, the name and the first addresses of the result list, as one record. Lookups are not
 * filtered: any process's lookup names an address for the connects that follow (as BCC's DNS answers do). */
SEC("uretprobe")
int BPF_URETPROBE(getaddrinfo_return, int ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct gai_call *a = bpf_map_lookup_elem(&looking_up, &tid);
	struct user_addrinfo ai;
	struct lookup *l;
	__u64 next = 0;

	if (!a)
		return 0;
	if (ret || bpf_probe_read_user(&next, sizeof(next), (void *)a->res) || !next)
		goto out;
	l = ringbuf_reserve_zeroed(&events, sizeof(*l), &lost_lookups);
	if (!l)
		goto out;
	l->kind = RECORD_LOOKUP;
	l->pid = pid_tgid >> 32;
	l->ts_ns = bpf_ktime_get_ns();
	bpf_probe_read_user_str(l->name, sizeof(l->name), (void *)a->node);
	for (int i = 0; i < MAX_LOOKUP_ADDRS && next; i++) {
		struct lookup_addr *out = &l->addrs[l->count & (MAX_LOOKUP_ADDRS - 1)];

		if (bpf_probe_read_user(&ai, sizeof(ai), (void *)next))
			break;
		next = ai.ai_next;
		/* Without hints each address comes once per socket type: keep the stream (or unspecified) one. */
		if (ai.ai_socktype != 0 && ai.ai_socktype != SOCK_STREAM)
			continue;
		if (ai.ai_family == AF_INET && ai.ai_addr) {
			/* struct sockaddr_in: the address after the family and port */
			if (bpf_probe_read_user(out->addr, 4, (void *)(ai.ai_addr + 4)))
				continue;
		} else if (ai.ai_family == AF_INET6 && ai.ai_addr) {
			/* struct sockaddr_in6: the address after the family, port and flow label */
			if (bpf_probe_read_user(out->addr, 16, (void *)(ai.ai_addr + 8)))
				continue;
		} else {
			continue;
		}
		out->family = ai.ai_family;
		l->count++;
	}
	bpf_ringbuf_submit(l, 0);
out:
	bpf_map_delete_elem(&looking_up, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
