// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by gethostlatency.bpf.c and main.rs (through the skeleton's generated `types`). */
#ifndef __GETHOSTLATENCY_H
#define __GETHOSTLATENCY_H

#define TASK_COMM_LEN 16
/* Bytes of the host name captured, with its NUL: DNS names have at most 253 characters. */
#define HOST_LEN 256

/* The traced functions; main.rs attaches the entry program of each and names them in this order. */
enum resolver_func {
	FUNC_GETADDRINFO = 0,
	FUNC_GETHOSTBYNAME = 1,
	FUNC_GETHOSTBYNAME2 = 2,
	FUNC_GETHOSTBYNAME_R = 3,
	FUNC_GETHOSTBYNAME2_R = 4,
};

/* One call in progress (keyed by thread in `starts`), and, once it returns, the ring-buffer record. */
struct call {
	__u64 ts;		/* entry time; latency in ns once returned */
	__u64 entry_sp;		/* stack pointer at entry: tells the outermost call's return from a nested one's */
	__u64 host_addr;	/* the name's address, read again at return if it could not be read at entry */
	__u32 pid;
	__u32 tid;
	__u32 func;		/* enum resolver_func */
	__u32 truncated;	/* the host name was longer than HOST_LEN - 1 */
	__u32 host_unread;	/* the name's page was not in memory at entry (a process's first lookup) */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
	char host[HOST_LEN];
};

#endif
