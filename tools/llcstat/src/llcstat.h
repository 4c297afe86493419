// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* llcstat: what the BPF side and the front end share. */
#ifndef __LLCSTAT_H
#define __LLCSTAT_H

#define TASK_COMM_LEN 16
/* Most (CPU, PID, TID) records kept; samples of further tasks are counted in `infos_full`. */
#define MAX_ENTRIES 10240

struct llc_key {
	__u32 cpu;
	__u32 pid;
	__u32 tid;
};

struct llc_value {
	__u64 refs;
	__u64 misses;
	char comm[TASK_COMM_LEN];
};

#endif
