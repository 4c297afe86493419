// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What tcpsubnet.bpf.c and lib.rs share (constants reach Rust as bpf::consts). */
#ifndef __TCPSUBNET_H
#define __TCPSUBNET_H

/* The most subnets one run can be given. */
#define MAX_SUBNETS 256

/* One subnet: its network address and its mask, both in network byte order, the address already masked. */
struct subnet {
	__u32 net;
	__u32 mask;
};

#endif
