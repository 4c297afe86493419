// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
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

/* struct hist, the cumulative histogram (bpf/include/hist.h), with the task's name. Keyed by a u32: 0 for
 * the one histogram, else the process, thread or PID namespace. */
#define HIST_COMM_LEN TASK_COMM_LEN
#include "hist.h"

#endif
