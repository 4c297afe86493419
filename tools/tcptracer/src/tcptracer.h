// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcptracer.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPTRACER_H
#define __TCPTRACER_H

#define TASK_COMM_LEN 16
/* Most sockets followed at once (connects waiting for their handshake, open connections with a known owner). */
#define MAX_SOCKETS 16384

/* What happened to the connection. */
#define EV_CONNECT 1
#define EV_ACCEPT 2
#define EV_CLOSE 3

/* One connect, accept or close. Addresses in network order, IPv4 in the first 4 bytes; ports in host order. */
struct event {
	__u64 ts_ns;
	__u32 type;
	__u32 pid;
	__u32 uid;
	__u32 netns;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u16 _pad;
	__u8 laddr[16];
	__u8 raddr[16];
	char comm[TASK_COMM_LEN];
};

#endif
