// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What drsnoop.bpf.c and the Rust side share (bpf::types::event, bpf::consts). */
#ifndef __DRSNOOP_H
#define __DRSNOOP_H

#define TASK_COMM_LEN 16
/* Threads in reclaim at once that are followed; more are counted in `lost`. */
#define MAX_RECLAIMING 8192

/* event.kind: which reclaim the task did. */
#define KIND_DIRECT 0	/* system-wide direct reclaim (vmscan:mm_vmscan_direct_reclaim_*) */
#define KIND_MEMCG 1	/* reclaim in its memory cgroup, at its limit (vmscan:mm_vmscan_memcg_reclaim_*) */

/* One reclaim, sent when it ends. */
struct event {
	__u64 start_ns;		/* bpf_ktime_get_ns() at its start */
	__u64 end_ns;		/* ... at its end */
	__u64 nr_reclaimed;	/* pages reclaimed */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 uid;
	__u32 kind;		/* KIND_* */
	char comm[TASK_COMM_LEN];
};

#endif
