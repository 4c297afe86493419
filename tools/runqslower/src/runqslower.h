// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by runqslower.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __RUNQSLOWER_H
#define __RUNQSLOWER_H

#define TASK_COMM_LEN 16
/* Tasks waiting on a run queue, timed at once (the start map); more are counted as not timed. */
#define MAX_WAITING 16384

/* One wait above the threshold: the task that waited, and the task it took the CPU from. */
struct event {
	__u64 delta_ns;			/* runnable (woken, created or preempted) to running */
	__u32 pid;			/* the task's thread ID (BCC's TID column) */
	__u32 tgid;			/* its process */
	__u32 prev_pid;			/* the thread that left the CPU for it */
	__u32 cpu;
	char task[TASK_COMM_LEN];
	char prev_task[TASK_COMM_LEN];
};

#endif
