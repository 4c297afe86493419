// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcptop: payload bytes sent and received per TCP connection and process, counted in a hash map.
 *
 * The sock:sock_send_length and sock:sock_recv_length tracepoints (Linux 6.3+) fire in sock_sendmsg and
 * sock_recvmsg with the socket and the call's return value, in the calling task: a positive value is the bytes
 * the application wrote or read. Only TCP sockets of the IPv4 and IPv6 families count. Counts are cumulative (no
 * entry is ever deleted here); user space reads the map every interval and takes the difference. A full map
 * is counted in `full`. Before 6.3 (no such tracepoints): fexit tcp_sendmsg + fentry tcp_cleanup_rbuf, else the
 * same with kprobes, as BCC. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "sock.bpf.h"
#include "tcpsend.bpf.h"
#include "tcptop.h"

const volatile __u16 target_family = 0;
CGROUP_FILTER;

/* Calls not counted: the connection map was full. */
__u64 full = 0;

struct conn _conn_type = {};
struct traffic _traffic_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DEFAULT_CONNECTIONS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct conn);
	__type(value, struct traffic);
} conns SEC(".maps");

static __always_inline int count(struct sock *sk, int ret, bool sent)
{
	struct conn key = {};
	struct traffic zero = {}, *t;
	__u16 family;

	if (ret <= 0 || !sk)
		return 0;
	key.pid = bpf_get_current_pid_tgid() >> 32;
	if (!tgid_wanted(key.pid))
		return 0;
	family = sk_inet_family(sk, target_family);
	if (!family)
		return 0;
	if (!sk_is_tcp(sk))
		return 0;
	if (!cgroup_wanted())
		return 0;
	key.family = family;
	key.lport = sk_lport(sk);
	key.rport = sk_rport(sk);
	sk_addrs(sk, family, key.laddr, key.raddr);
	bpf_get_current_comm(key.comm, sizeof(key.comm));

	t = bpf_map_lookup_elem(&conns, &key);
	if (!t) {
		bpf_map_update_elem(&conns, &key, &zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&conns, &key);
		if (!t) {
			__sync_fetch_and_add(&full, 1);
			return 0;
		}
	}
	if (sent)
		__sync_fetch_and_add(&t->sent, ret);
	else
		__sync_fetch_and_add(&t->received, ret);
	return 0;
}

/* The send side, shared with tcpsubnet (tcpsend.bpf.h): sock:sock_send_length, else tcp_sendmsg's return. */
static __always_inline int tcp_sent(struct sock *sk, int bytes)
{
	return count(sk, bytes, true);
}

TP_BTF_RAW(recv, sock_recv_length, struct sock *sk, int ret, int flags)
{
	return count(sk, ret, false);
}

/* --- kernel function paths of the receive side (kernels before 6.3), as BCC and libbpf-tools: tcp_cleanup_rbuf
 * (bytes copied to the reader), in the calling task. --- */

SEC("fentry/tcp_cleanup_rbuf")
int BPF_PROG(cleanup_rbuf_fentry, struct sock *sk, int copied)
{
	return count(sk, copied, false);
}

SEC("kprobe/tcp_cleanup_rbuf")
int BPF_KPROBE(cleanup_rbuf_kprobe, struct sock *sk, int copied)
{
	return count(sk, copied, false);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
