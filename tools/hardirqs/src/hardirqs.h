// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by hardirqs.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __HARDIRQS_H
#define __HARDIRQS_H

/* 2^32 units (usecs, or nsecs with -N) and more go in the last slot. */
#define MAX_SLOTS 32
/* Handler names as BCC keeps them (irqaction->name, truncated). */
#define IRQ_NAME_LEN 32
/* Distinct handler names counted; events of more are counted as lost. */
#define MAX_NAMES 1024

struct irq_key {
	char name[IRQ_NAME_LEN];
};

/* struct hist, the cumulative histogram (bpf/include/hist.h). */
#include "hist.h"

#endif
