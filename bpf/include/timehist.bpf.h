// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Cumulative time histograms as the time-summing tools keep them (hardirqs, softirqs, cpudist, runqlat): the
 * tool's `struct hist` (in its header, shared with Rust) has `count`, `sum_ns` and `slots[MAX_SLOTS]`, and is
 * never cleared; each event is added with atomic adds, so user space reads the map while it grows and prints
 * the difference between two reads (common::output::hist::IntervalDiff). */
#ifndef __COREBPF_TIMEHIST_BPF_H
#define __COREBPF_TIMEHIST_BPF_H

#include "bits.bpf.h"

/* Adds one event of `delta_ns` nanoseconds to `hist`: one in the log2 slot of `delta_ns / ns_per_unit` (the last
 * slot takes anything larger), one to the count and `delta_ns` to the sum. */
#define timehist_add(hist, delta_ns, ns_per_unit)                                                          \
	({                                                                                                  \
		__u64 __th_delta = (delta_ns);                                                              \
		__u64 __th_slot = log2l(__th_delta / (ns_per_unit));                                        \
		if (__th_slot >= MAX_SLOTS)                                                                 \
			__th_slot = MAX_SLOTS - 1;                                                          \
		__sync_fetch_and_add(&(hist)->slots[__th_slot], 1);                                         \
		__sync_fetch_and_add(&(hist)->count, 1);                                                    \
		__sync_fetch_and_add(&(hist)->sum_ns, __th_delta);                                          \
	})

/* As timehist_add, for a histogram no other CPU writes (a value of a per-CPU map, in a program that does not nest
 * on its CPU): plain adds, no atomic instruction and no cache line shared between CPUs. User space sums the CPUs'
 * copies (common::attach::maps::percpu_values). */
#define timehist_add_local(hist, delta_ns, ns_per_unit)                                                    \
	({                                                                                                  \
		__u64 __th_delta = (delta_ns);                                                              \
		__u64 __th_slot = log2l(__th_delta / (ns_per_unit));                                        \
		if (__th_slot >= MAX_SLOTS)                                                                 \
			__th_slot = MAX_SLOTS - 1;                                                          \
		(hist)->slots[__th_slot]++;                                                                 \
		(hist)->count++;                                                                            \
		(hist)->sum_ns += __th_delta;                                                               \
	})

#endif
