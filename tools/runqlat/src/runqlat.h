/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by runqlat.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __RUNQLAT_H
#define __RUNQLAT_H

/* 2^32 usecs is over an hour: enough slots for any wait. */
#define MAX_SLOTS 32
#define TASK_COMM_LEN 16
/* Tasks waiting on a run queue, timed at once (the start map); more are counted as not timed. */
#define MAX_WAITING 16384
/* Histograms at most with -P, -L or --pidnss. */
#define MAX_HISTS 10240

/* Cumulative since start; user space prints the difference between two reads. Keyed by a u32: 0 for the one
 * histogram, else the process, thread or PID namespace. */
struct hist {
	__u64 count;
	__u64 sum_ns;
	__u64 slots[MAX_SLOTS];
	char comm[TASK_COMM_LEN];
};

#endif
