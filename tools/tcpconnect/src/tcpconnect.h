// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpconnect.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPCONNECT_H
#define __TCPCONNECT_H

#define TASK_COMM_LEN 16
/* Most ports -P may list (a hash map of this size). */
#define MAX_PORTS 1024
/* Most distinct (source, destination, port) flows -c counts. */
#define MAX_FLOWS 16384

/* One active open. Addresses are in network order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;
	__u32 pid;
	__u32 uid;
	__u16 family;
	__u16 lport;
	__u16 dport;
	__u16 _pad;
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[TASK_COMM_LEN];
};

/* -c: connects counted per source address, destination address and port. */
struct flow {
	__u16 family;
	__u16 dport;
	__u32 _pad;
	__u8 saddr[16];
	__u8 daddr[16];
};

#endif
