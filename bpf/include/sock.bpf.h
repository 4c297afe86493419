// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Socket fields the network tools read, with CO-RE: family, ports and addresses of a struct sock.
 *
 * Addresses go into 16-byte arrays in network order (IPv4 in the first 4 bytes), which is what
 * common::domain::net::ip_addr decodes. Ports are returned in host order. The local port is read from
 * inet_sport, not skc_num: skc_num is zeroed when the port is released at close, inet_sport stays. */
#ifndef __SOCK_BPF_H
#define __SOCK_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

static __always_inline __u16 sk_family(const struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_family);
}

/* The socket's family if it is AF_INET or AF_INET6 and, with `target_family` set (the -4/-6 filter), that one;
 * else 0 (not traced). */
static __always_inline __u16 sk_inet_family(const struct sock *sk, __u16 target_family)
{
	__u16 family = sk_family(sk);

	if (family != AF_INET && family != AF_INET6)
		return 0;
	if (target_family && family != target_family)
		return 0;
	return family;
}

static __always_inline __u16 sk_lport(const struct sock *sk)
{
	return bpf_ntohs(BPF_CORE_READ((struct inet_sock *)sk, inet_sport));
}

static __always_inline __u16 sk_rport(const struct sock *sk)
{
	return bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
}

static __always_inline bool sk_is_tcp(const struct sock *sk)
{
	return BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol) == IPPROTO_TCP;
}

/* Local and remote address of an AF_INET or AF_INET6 socket into saddr/daddr (16 bytes each, zeroed by the
 * caller). */
static __always_inline void sk_addrs(const struct sock *sk, __u16 family, __u8 *saddr, __u8 *daddr)
{
	if (family == AF_INET) {
		bpf_core_read(saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(daddr, 4, &sk->__sk_common.skc_daddr);
	} else if (bpf_core_field_exists(sk->__sk_common.skc_v6_daddr)) {
		bpf_core_read(saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(daddr, 16, &sk->__sk_common.skc_v6_daddr);
	}
}

/* The socket a thread is working on, kept from a function's entry (or a syscall's) to its return: sk_stash at
 * entry, sk_take at return (NULL if nothing was kept; the entry is removed). `map` is a hash of the __u32 thread
 * ID to the struct sock *. */
static __always_inline void sk_stash(void *map, struct sock *sk)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_update_elem(map, &tid, &sk, BPF_ANY);
}

static __always_inline struct sock *sk_take(void *map)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sock **skp = bpf_map_lookup_elem(map, &tid);
	struct sock *sk;

	if (!skp)
		return NULL;
	sk = *skp;
	bpf_map_delete_elem(map, &tid);
	return sk;
}

#endif
