// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* cpufreq: what the BPF side and the front end share. */
#ifndef __CPUFREQ_H
#define __CPUFREQ_H

#define TASK_COMM_LEN 16
/* Most process names with a histogram of their own; samples of further names are counted in `hists_full`. */
#define MAX_ENTRIES 1024
/* CPUs whose frequency is kept (the array is indexed by CPU number). */
#define MAX_CPU_NR 4096
/* Linear slots of HIST_STEP_SIZE MHz from 0; the last one also holds every frequency above it. */
#define MAX_SLOTS 26
#define HIST_STEP_SIZE 200

struct hkey {
	char comm[TASK_COMM_LEN];
};

struct hist {
	__u64 slots[MAX_SLOTS];
	/* Sum of the sampled frequencies in MHz (the exact mean is sum / samples). */
	__u64 sum_mhz;
};

#endif
