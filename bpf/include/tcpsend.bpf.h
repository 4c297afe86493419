// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The send side of TCP, as tcptop and tcpsubnet count it: the bytes each successful send call handed to a TCP
 * socket, seen in the sending task, over the attach ladder tp_btf > raw_tp > fentry > kprobe.
 *
 * The including file defines the handler, after the #include:
 *
 *	static __always_inline int tcp_sent(struct sock *sk, int bytes)
 *	{
 *		...
 *	}
 *
 * It is called with a TCP socket (of any family: the handler filters) and bytes > 0, from these programs:
 * - send_btf / send_raw: sock:sock_send_length (Linux 6.3+), which fires in sock_sendmsg for every protocol with
 *   the call's return value; sockets other than TCP leave here;
 * - sendmsg_fexit: the return of tcp_sendmsg (fexit), kernels before 6.3 with BPF trampolines;
 * - sendmsg_entry / sendmsg_ret: the same with a kprobe and a kretprobe, the socket kept from entry to return
 *   in the map `tcp_sending` (thread ID -> socket).
 * User space keeps the programs of one mechanism (common::attach::loader::autoload_by_section) and attaches them
 * by these names. */
#ifndef __COREBPF_TCPSEND_BPF_H
#define __COREBPF_TCPSEND_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "sock.bpf.h"

static __always_inline int tcp_sent(struct sock *sk, int bytes);

TP_BTF_RAW(send, sock_send_length, struct sock *sk, int ret, int flags)
{
	if (ret <= 0 || !sk || !sk_is_tcp(sk))
		return 0;
	return tcp_sent(sk, ret);
}

SEC("fexit/tcp_sendmsg")
int BPF_PROG(sendmsg_fexit, struct sock *sk, struct msghdr *msg, size_t size, int ret)
{
	if (ret <= 0 || !sk)
		return 0;
	return tcp_sent(sk, ret);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct sock *);
} tcp_sending SEC(".maps");

SEC("kprobe/tcp_sendmsg")
int BPF_KPROBE(sendmsg_entry, struct sock *sk)
{
	sk_stash(&tcp_sending, sk);
	return 0;
}

SEC("kretprobe/tcp_sendmsg")
int BPF_KRETPROBE(sendmsg_ret, int ret)
{
	struct sock *sk = sk_take(&tcp_sending);

	if (ret <= 0 || !sk)
		return 0;
	return tcp_sent(sk, ret);
}

#endif
