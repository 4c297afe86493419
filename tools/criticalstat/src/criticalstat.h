// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* criticalstat: what the BPF side and the front end share. */
#ifndef __CRITICALSTAT_H
#define __CRITICALSTAT_H

#define TASK_COMM_LEN 16

/* Indexes of a section's addresses: where it started and ended, each as (caller, its caller). */
#define START_CALLER 0
#define START_PARENT 1
#define END_CALLER 2
#define END_PARENT 3

/* One section at least as long as the threshold. */
struct event {
	__u64 time_ns;
	__s64 stack_id;
	__u64 addrs[4];
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u32 pad;
	char comm[TASK_COMM_LEN];
};

#endif
