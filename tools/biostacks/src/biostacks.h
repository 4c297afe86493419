// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What biostacks.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __BIOSTACKS_H
#define __BIOSTACKS_H

/* Latencies of 2^31 units and more share the last slot. */
#define MAX_SLOTS 32
/* Distinct (process, disk, stack) keys kept; requests of more are counted in hists_full and reported. */
#define MAX_KEYS 10240
#define NAME_LEN 16

/* One histogram's key: the task that started the request, its disk and the kernel stack it started it from. */
struct stack_key {
	__u32 pid;
	__u32 dev;
	__s32 kern_stack_id; /* negative: no stack (the error bpf_get_stackid gave) */
	char comm[NAME_LEN];
};

/* struct hist, the cumulative log2 histogram (bpf/include/hist.h); sum_ns holds the exact nanoseconds. */
#include "hist.h"

#endif
