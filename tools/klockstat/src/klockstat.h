// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What klockstat.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __KLOCKSTAT_H
#define __KLOCKSTAT_H

#define TASK_COMM_LEN 16
/* Locks being waited for or held at once (per thread and lock), and statistics entries (callers or threads). */
#define MAX_ENTRIES 10240

/* One side of a caller's statistics, the waits to take its locks or the times it held them: their count, total
 * and longest, and the thread (pid_tgid), lock address and command of the longest. */
struct lock_times {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	__u64 max_id;
	__u64 max_lock;
	char max_comm[TASK_COMM_LEN];
};

/* The statistics of one caller (its kernel stack id) or, with -P, one thread (its TID; `comm` is its command).
 * Holds are measured only where the lock functions can be traced. */
struct lock_stat {
	struct lock_times acq;
	struct lock_times hld;
	char comm[TASK_COMM_LEN];
};

#endif
