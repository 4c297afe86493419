// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by cpudist.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __CPUDIST_H
#define __CPUDIST_H

/* 2^32 usecs is over an hour: enough slots for any slice. */
#define MAX_SLOTS 32
#define TASK_COMM_LEN 16
/* Tasks whose slice start is kept at once (the start map); slices of more are counted as lost. */
#define MAX_TASKS 32768
/* Histograms at most with -P or -L. */
#define MAX_HISTS 10240

/* Where a slice starts: a task by PID, or with -I a CPU's idle task (pid 0, its CPU). */
struct start_key {
	__u32 pid;
	__u32 cpu;
};

/* struct hist, the cumulative histogram (bpf/include/hist.h), with the task's name. Keyed by a u32: 0 for
 * the one histogram, else the process or thread. */
#define HIST_COMM_LEN TASK_COMM_LEN
#include "hist.h"

#endif
