// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpaccept.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPACCEPT_H
#define __TCPACCEPT_H

#define TASK_COMM_LEN 16
/* Most ports -P may list (a hash map of this size). */
#define MAX_PORTS 1024

/* One passive open, as the accepting process took it. Addresses in network order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;
	__u32 pid;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u16 _pad[3];
	__u8 laddr[16];
	__u8 raddr[16];
	char comm[TASK_COMM_LEN];
};

#endif
