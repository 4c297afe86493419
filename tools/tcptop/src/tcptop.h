// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcptop.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPTOP_H
#define __TCPTOP_H

#define TASK_COMM_LEN 16
/* Default size of the connection map (--max-connections), libbpf-tools' OUTPUT_ROWS_LIMIT. */
#define DEFAULT_CONNECTIONS 10240
/* The largest --max-connections: the kernel sets aside 16 bytes a slot up front (16 MiB here). */
#define MAX_CONNECTIONS 1048576

/* One connection as seen from one process. Addresses are in network order, IPv4 in the first 4 bytes. */
struct conn {
	__u32 pid;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u16 _pad;
	__u32 _pad2;
	__u8 laddr[16];
	__u8 raddr[16];
	char comm[TASK_COMM_LEN];
};

/* Payload bytes so far, cumulative (user space takes the difference each interval). */
struct traffic {
	__u64 sent;
	__u64 received;
};

#endif
