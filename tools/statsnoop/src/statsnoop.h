// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What statsnoop.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __STATSNOOP_H
#define __STATSNOOP_H

#define TASK_COMM_LEN 16
/* Bytes of the path as given (as BCC's NAME_MAX, plus the NUL). */
#define PATH_LEN 256

/* Which call a record is for; user space names them (report.rs, CALLS), in this order. */
#define CALL_STATFS 0
#define CALL_NEWSTAT 1
#define CALL_NEWLSTAT 2
#define CALL_STATX 3
#define CALL_NEWFSTATAT 4
#define CALL_NEWFSTAT 5

/* One stat-family call, sent at its return. */
struct event {
	__u64 ts_ns;
	__u32 pid;		/* tgid */
	__u32 tid;
	__s32 ret;		/* 0, or -errno */
	__s32 fd;		/* fstat's fd, statx/newfstatat's dirfd (AT_FDCWD is -100), else -1 */
	__u32 call;		/* CALL_* */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
	char path[PATH_LEN];	/* as given; empty for fstat */
};

#endif
