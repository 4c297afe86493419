// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What capable.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __CAPABLE_H
#define __CAPABLE_H

#define TASK_COMM_LEN 16
/* Kernel functions (common::domain::capabilities::CALLERS) whose address ranges classify a check on the
 * tracepoint path. */
#define MAX_CALLERS 16
/* Kernel frames searched for one of them, innermost first. */
#define SCAN_FRAMES 12
/* include/linux/security.h */
#define CAP_OPT_NOAUDIT 2
#define CAP_OPT_INSETID 4
/* --unique: off, per process, per cgroup (with --cgroupmap, as BCC). */
#define UNIQUE_OFF 0
#define UNIQUE_PID 1
#define UNIQUE_CGROUP 2
/* Distinct (capability, process or cgroup, stacks) that --unique remembers. */
#define MAX_SEEN 10240

/* One capability check. insetid is -1 where the options are unknown; audit is 1 for an audited check. A stack id
 * is negative when there is no such stack: -EFAULT (none of that kind), -ENOMEM/-EEXIST (lost), -1 (not asked
 * for). */
struct event {
	__u32 pid;
	__u32 tid;
	__u32 uid;
	__s32 cap;
	__s32 ret;
	__u8 audit;
	__s8 insetid;
	__u8 pad[2];
	__s32 kern_stack_id;
	__s32 user_stack_id;
	char comm[TASK_COMM_LEN];
};

/* A kernel function's text, [start, end), and the options it passes to cap_capable(). */
struct caller_range {
	__u64 start;
	__u64 end;
	__u32 opts;
	__u32 pad;
};

#endif
