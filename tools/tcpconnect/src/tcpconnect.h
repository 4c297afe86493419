// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpconnect.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPCONNECT_H
#define __TCPCONNECT_H

#define TASK_COMM_LEN 16
/* Most ports -P may list (a hash map of this size). */
#define MAX_PORTS 1024
/* Most distinct (source, destination, port) flows -c counts. */
#define MAX_FLOWS 16384

/* -d: addresses kept of one getaddrinfo() result, and bytes kept of the name looked up. */
#define MAX_LOOKUP_ADDRS 8
#define NAME_LEN 256

/* The kinds of record on the ring buffer; every record starts with its kind. */
#define RECORD_CONNECT 0
#define RECORD_LOOKUP 1

/* One active open. Addresses are in network order, IPv4 in the first 4 bytes. */
struct event {
	__u32 kind;		/* RECORD_CONNECT */
	__u32 _pad0;
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

/* One address of a lookup's result: AF_INET or AF_INET6, in network order, IPv4 in the first 4 bytes. */
struct lookup_addr {
	__u16 family;
	__u8 addr[16];
};

/* -d: a getaddrinfo() call that succeeded: the name asked for and the first addresses it returned. Sent through the
 * connects' ring buffer, so that it reaches user space before any connect the caller makes with its result. */
struct lookup {
	__u32 kind;		/* RECORD_LOOKUP */
	__u32 pid;
	__u64 ts_ns;
	__u32 count;		/* entries used in addrs */
	__u32 _pad;
	struct lookup_addr addrs[MAX_LOOKUP_ADDRS];
	char name[NAME_LEN];
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
