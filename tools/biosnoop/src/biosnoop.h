// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types and limits shared by biosnoop.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __BIOSNOOP_H
#define __BIOSNOOP_H

#define TASK_COMM_LEN 16
/* Requests followed at once (the reqs map); more are counted as missed. */
#define MAX_IN_FLIGHT 10240

/* One completed request, sent at block_rq_complete. */
struct event {
	__u64 ts_ns;		/* completion, CLOCK_MONOTONIC */
	__u64 latency_ns;	/* issue to completion */
	__u64 queue_ns;		/* first sight (block_io_start, else insert, else issue) to issue */
	__u64 sector;
	__u64 cmd_flags;
	__u32 bytes;		/* __data_len at issue */
	__u32 pid;		/* tgid of the task that issued the I/O */
	__u32 dev;		/* kernel dev_t of the disk */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
};

#endif
