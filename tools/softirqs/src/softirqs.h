// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by softirqs.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __SOFTIRQS_H
#define __SOFTIRQS_H

/* 2^32 units (usecs, or nsecs with -N) and more go in the last slot. */
#define MAX_SLOTS 32
/* Softirq vectors counted (the kernel has 10; more are counted as unknown). */
#define MAX_VECS 16

/* struct hist, the cumulative histogram (bpf/include/hist.h). */
#include "hist.h"

#endif
