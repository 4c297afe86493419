// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by funcinterval.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __FUNCINTERVAL_H
#define __FUNCINTERVAL_H

/* log2 slots of a gap in the histogram's unit: 2^64 covers any. */
#define MAX_SLOTS 64
/* fentry attaches one object per function: above this many functions, kprobe_multi or kprobes. */
#define MAX_FENTRY_FUNCS 8

/* struct hist, the cumulative histogram (bpf/include/hist.h). */
#include "hist.h"

#endif
