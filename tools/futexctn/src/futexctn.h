// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What futexctn.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __FUTEXCTN_H
#define __FUTEXCTN_H

#define TASK_COMM_LEN 16
/* log2 slots of the wait time (usecs, or msecs with -m); 2^35 units and more share the last one. */
#define MAX_SLOTS 36
/* Futex waits in flight at once (the start map), and (thread or process, lock, stack) histograms kept. */
#define MAX_ENTRIES 10240

/* One histogram's key: a thread (its pid_tgid; with -s, the process: tgid only), the futex's user address and
 * the waiter's user stack (-1 with -s). `epoch` is the report interval the wait ended in: user space moves the
 * epoch on, then takes (reads and deletes) the entries of the epochs before it, so no wait is lost between
 * reports. */
struct hist_key {
	__u64 pid_tgid;
	__u64 uaddr;
	__s32 user_stack_id;
	__u32 epoch;
};

struct hist {
	__u64 slots[MAX_SLOTS];
	__u64 contended;	/* the waits that blocked and were woken (FUTEX_WAIT returned 0) */
	__u64 total;		/* their sum, in the histogram's unit (each wait rounded down first, as the slots) */
	__u64 total_ns;		/* their exact sum */
	__u64 min;		/* the shortest and longest, in the unit */
	__u64 max;
	__u64 cgroup_id;	/* with --container-label, the cgroup v2 ID of the waiter (0 without) */
	char comm[TASK_COMM_LEN];
};

#endif
