// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What syncsnoop.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __SYNCSNOOP_H
#define __SYNCSNOOP_H

#define TASK_COMM_LEN 16

/* Which call a record is for; user space names them (lib.rs, CALLS), in this order. */
#define CALL_SYNC 0
#define CALL_FSYNC 1
#define CALL_FDATASYNC 2
#define CALL_MSYNC 3
#define CALL_SYNC_FILE_RANGE 4
#define CALL_SYNCFS 5
#define CALL_SYNC_FILE_RANGE2 6

/* One sync-family call, sent at its entry (as BCC). */
struct event {
	__u64 ts_ns;		/* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 arg0;		/* the fd (fsync, fdatasync, syncfs, sync_file_range) or msync's address */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 call;		/* CALL_* */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
};

#endif
