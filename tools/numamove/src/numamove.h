// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What numamove.bpf.c and the Rust side share (bpf::consts). */
#ifndef __NUMAMOVE_H
#define __NUMAMOVE_H

/* The counters (keys of the per-CPU `stats` array). */
#define S_MIGRATIONS 0	/* NUMA-balancing migration attempts that ended */
#define S_NS 1		/* the nanoseconds they took, summed */
#define S_MAXSTAT 2

/* Migrations in progress at once (one per task at most). */
#define MAX_INFLIGHT 10240

#endif
