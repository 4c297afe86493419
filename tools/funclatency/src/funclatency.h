// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by funclatency.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __FUNCLATENCY_H
#define __FUNCLATENCY_H

/* log2 slots of a latency in the histogram's unit: 2^64 covers any. */
#define MAX_SLOTS 64
/* Threads timed at once (calls in flight); more are counted as not timed. */
#define MAX_THREADS 10240
/* fentry/fexit attaches one object per function: above this many functions, kprobe_multi or kprobes. */
#define MAX_FENTRY_FUNCS 8

/* struct hist, the cumulative histogram (bpf/include/hist.h). */
#include "hist.h"

/* A call in flight: the thread, and with -l its nesting depth. */
struct start_key {
	__u32 tid;
	__u32 depth;
};

#endif
