// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by javagc.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __JAVAGC_H
#define __JAVAGC_H

/* Collections in progress tracked at once (one per collecting thread). */
#define MAX_STARTS 1024

/* One HotSpot collection, from gc__begin to gc__end on the same thread. */
struct event {
	__u64 elapsed_ns;	/* gc__end minus gc__begin */
	__u32 cpu;		/* the CPU the collection ended on */
	__u32 pid;
	__u32 tid;
	__u32 full;		/* gc__begin's argument: 1 for a full collection */
};

#endif
