// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* TCP state tracking on sock:inet_sock_set_state, the part tcplife, tcpstates and tcpconnlat share.
 *
 *	static __always_inline int on_change(struct sock *sk, int oldstate, int newstate) { ... }
 *	SOCK_STATE_PROGRAMS(on_change);
 *
 * defines the three programs of the attach ladder tp_btf > raw_tp > tracepoint (`set_state_btf`, `set_state_raw`,
 * `set_state_tp`), each handing the changed socket and its old and new state to the handler; user space keeps the
 * one of the mechanism chosen (common::attach::loader::autoload_by_section) and attaches it to
 * sock/inet_sock_set_state. Everything else comes from the socket itself, with CO-RE (sock.bpf.h), so the three
 * paths read the same values.
 *
 * sk_change_read() decides whether a change concerns a TCP socket of the family asked for (-4/-6) and reads its
 * family and ports. `PORT_FILTERS;` declares -L and -D: two port maps user space fills before attaching
 * (common::output::sockevents::PortArgs) and their switches in .rodata; lport_listed()/rport_listed() test a port
 * against them. SK_HASH() declares a map keyed by socket, and struct sk_task is what such a map keeps of the task
 * that made a change and when (tcplife's owners, tcpconnlat's connecting tasks). */
#ifndef __COREBPF_SOCKSTATE_BPF_H
#define __COREBPF_SOCKSTATE_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "sock.bpf.h"
#include "tp_btf_raw.bpf.h"

#ifndef TASK_COMM_LEN
#define TASK_COMM_LEN 16
#endif
/* Most ports one -L or -D list may hold (the tools' headers say the same number to Rust). */
#ifndef MAX_PORTS
#define MAX_PORTS 1024
#endif

/* The three programs of one handler `fn(struct sock *sk, int oldstate, int newstate)`. */
#define SOCK_STATE_PROGRAMS(fn)                                                                                    \
	TP_BTF_RAW(set_state, inet_sock_set_state, struct sock *sk, int oldstate, int newstate)                    \
	{                                                                                                          \
		return fn(sk, oldstate, newstate);                                                                 \
	}                                                                                                          \
	SEC("tracepoint/sock/inet_sock_set_state")                                                                 \
	int set_state_tp(struct trace_event_raw_inet_sock_set_state *args)                                         \
	{                                                                                                          \
		return fn((struct sock *)args->skaddr, args->oldstate, args->newstate);                            \
	}

/* A hash map `name` from struct sock * to `vtype`, of at most `entries` sockets, allocated as they come. */
#define SK_HASH(name, vtype, entries)                                                                              \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                   \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                                              \
		__uint(max_entries, entries);                                                                      \
		__type(key, struct sock *);                                                                        \
		__type(value, vtype);                                                                              \
	} name SEC(".maps")

/* What a state change is about: the socket's family and ports (host order; the local port is 0 before it is
 * bound, as at CLOSE -> SYN_SENT of a connect). */
struct sk_change {
	__u16 family;
	__u16 lport;
	__u16 rport;
};

/* True, with `c` filled, if `sk` is a TCP socket of AF_INET or AF_INET6 and of `target_family` when that is set. */
static __always_inline bool sk_change_read(struct sock *sk, __u16 target_family, struct sk_change *c)
{
	if (!sk_is_tcp(sk))
		return false;
	c->family = sk_inet_family(sk, target_family);
	if (!c->family)
		return false;
	c->lport = sk_lport(sk);
	c->rport = sk_rport(sk);
	return true;
}

/* -L and -D: the local and remote ports to keep (values unused), each list on when its switch is. */
#define PORT_FILTERS                                                                                               \
	const volatile bool filter_lport = false;                                                                  \
	const volatile bool filter_rport = false;                                                                  \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                   \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                                              \
		__uint(max_entries, MAX_PORTS);                                                                    \
		__type(key, __u16);                                                                                \
		__type(value, __u8);                                                                               \
	} lports SEC(".maps");                                                                                     \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                   \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                                              \
		__uint(max_entries, MAX_PORTS);                                                                    \
		__type(key, __u16);                                                                                \
		__type(value, __u8);                                                                               \
	} rports SEC(".maps")

/* True if `port` passes a port list (`filter` off: every port does). */
static __always_inline bool port_listed(void *ports, bool filter, __u16 port)
{
	return !filter || bpf_map_lookup_elem(ports, &port);
}

/* The local and remote port against the PORT_FILTERS the tool declared. */
#define lport_listed(port) port_listed(&lports, filter_lport, port)
#define rport_listed(port) port_listed(&rports, filter_rport, port)

/* The task current at a state change, and when it happened. */
struct sk_task {
	__u64 ts_ns;
	__u64 cgroup_id;	/* the task's cgroup v2 ID (its container, if any) */
	__u32 pid;
	__u32 _pad;
	char comm[TASK_COMM_LEN];
};

/* Keeps the current task and the time in `map` (an SK_HASH of struct sk_task) for `sk`; `flags` BPF_NOEXIST keeps
 * a task already there. Returns bpf_map_update_elem's result: an error when the map is full (or, with BPF_NOEXIST,
 * when the socket has one). */
static __always_inline long sk_task_note(void *map, struct sock *sk, __u64 flags)
{
	struct sk_task t = {};

	t.ts_ns = bpf_ktime_get_ns();
	t.cgroup_id = bpf_get_current_cgroup_id();
	t.pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(t.comm, sizeof(t.comm));
	return bpf_map_update_elem(map, &sk, &t, flags);
}

#endif
