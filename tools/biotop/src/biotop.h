// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What biotop.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __BIOTOP_H
#define __BIOTOP_H

#define TASK_COMM_LEN 16
/* Rows (process, direction, disk) counted at once; requests of more are counted in rows_full and reported. */
#define MAX_ROWS 10240
/* Requests timed at once (issued, not yet completed); more are counted in starts_full. */
#define MAX_IN_FLIGHT 16384

/* A row of the screen: who submitted the requests, which way, to which disk. */
struct io_key {
	__u32 pid;
	__u32 op;		/* the request's operation (REQ_OP_*: read, write, flush, discard, ...) */
	__u32 major;
	__u32 minor;
	char comm[TASK_COMM_LEN];
};

/* A row's completed requests so far, cumulative (user space prints differences). */
struct io_stat {
	__u64 bytes;
	__u64 ns;		/* issue to completion, summed */
	__u64 io;
};

/* A request between issue and completion. */
struct io_start {
	__u64 ts;
	__u64 bytes;
	struct io_key key;
};

#endif
