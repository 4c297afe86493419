// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by bindsnoop.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __BINDSNOOP_H
#define __BINDSNOOP_H

#define TASK_COMM_LEN 16
/* Most ports -P may list (a hash map of this size). */
#define MAX_PORTS 1024
/* Most binds in progress at once (one per thread between the call's entry and its return). */
#define MAX_INFLIGHT 10240
/* Most (address, port) pairs --count keeps. */
#define MAX_COUNTS 10240

/* The bits of `opts`, in the order of BCC's OPTS column (F, T, N, R, r). */
#define OPT_FREEBIND 1
#define OPT_TRANSPARENT 2
#define OPT_BIND_ADDRESS_NO_PORT 4
#define OPT_REUSEADDR 8
#define OPT_REUSEPORT 16

/* One bind() on an IPv4 or IPv6 socket. A successful bind gives the address and port the socket holds after it
 * (the port the kernel chose for port 0); a failed one the address and port asked for. Addresses in network
 * order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;
	__u64 cgroup_id;	/* the task's cgroup v2 ID (its container, if any) */
	__u32 pid;
	__u32 uid;
	__s32 ret;
	__u32 bound_dev_if;
	__u16 family;
	__u16 port;
	__u16 protocol;
	__u8 opts;
	__u8 _pad;
	__u8 addr[16];
	char comm[TASK_COMM_LEN];
};

/* --count: binds per local address and port. */
struct count_key {
	__u8 addr[16];
	__u16 family;
	__u16 port;
	__u32 _pad;
};

#endif
