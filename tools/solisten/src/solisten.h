// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by solisten.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __SOLISTEN_H
#define __SOLISTEN_H

#define TASK_COMM_LEN 16
/* Most listens in progress at once (one per thread between the call's entry and its return). */
#define MAX_INFLIGHT 10240

/* One listen() on a TCP socket (IPv4 or IPv6). The address and port are the socket's when the call returns (a
 * socket listening unbound got its port then); the backlog is what the kernel passed on, capped at the
 * namespace's net.core.somaxconn. Addresses in network order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;
	__u64 netns;
	__u32 pid;
	__s32 ret;
	__s32 backlog;
	__u16 family;
	__u16 type;
	__u16 port;
	__u16 _pad[3];
	__u8 addr[16];
	char comm[TASK_COMM_LEN];
};

#endif
