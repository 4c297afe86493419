// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by exitsnoop.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __EXITSNOOP_H
#define __EXITSNOOP_H

#define TASK_COMM_LEN 16

/* One exit: of a process (at its last thread), or of any thread with --per-thread. */
struct event {
	__u64 start_ns;		/* task->start_time (CLOCK_MONOTONIC) */
	__u64 exit_ns;		/* bpf_ktime_get_ns() at sched_process_exit */
	__u64 cgroup_id;	/* the task's cgroup v2 ID (its container, if any) */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 ppid;		/* real_parent's tgid */
	__u32 exit_code;	/* the wait() status: (code << 8) | 0x80 if a core was dumped | signal */
	__u32 cpu;
	__u32 _pad;
	char comm[TASK_COMM_LEN];
};

#endif
