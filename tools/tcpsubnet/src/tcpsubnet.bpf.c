// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcpsubnet: TCP payload bytes sent over IPv4, added up per destination subnet.
 *
 * The send hooks are tcptop's (tcpsend.bpf.h): sock:sock_send_length from 6.3, else the return of tcp_sendmsg
 * (fexit, else a kretprobe). Each send on an AF_INET socket is matched against the subnets in the order given,
 * and the first that holds the destination address gets the bytes; a send no subnet holds is not counted. The
 * subnets are read-only data set before load, so the verifier sees the loop's exact length. The counts are
 * cumulative, one per subnet, in .bss; user space reads them every interval and prints the differences. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "tcpsend.bpf.h"
#include "tcpsubnet.h"

const volatile __u32 nr_subnets = 0;
const volatile struct subnet subnets[MAX_SUBNETS] = {};

/* Bytes sent to each subnet so far, by its position in the list. */
__u64 sent[MAX_SUBNETS] = {};

static __always_inline int tcp_sent(struct sock *sk, int bytes)
{
	__u32 daddr, i;

	if (sk_family(sk) != AF_INET)
		return 0;
	daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
	for (i = 0; i < MAX_SUBNETS && i < nr_subnets; i++) {
		if ((daddr & subnets[i].mask) == subnets[i].net) {
			__sync_fetch_and_add(&sent[i], bytes);
			break;
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
