// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The cumulative log2 histogram of the time-summing tools (biolatency, cpudist, funclatency, hardirqs, runqlat,
 * softirqs), declared once: each event adds one to `count`, its nanoseconds to `sum_ns` and one to its log2
 * slot (timehist.bpf.h's timehist_add()). It is never cleared: user space reads it through the skeleton's
 * generated `types::hist` and prints the difference between two reads (common::output::hist).
 *
 * Include it from the tool's own header after defining MAX_SLOTS (the tool's header keeps it, so that the build
 * helper's consts.rs hands the same number to Rust); a tool whose histograms are per task and named defines
 * HIST_COMM_LEN (the bytes of the name) too, and `struct hist` then ends with `char comm[HIST_COMM_LEN]`. */
#ifndef __COREBPF_HIST_H
#define __COREBPF_HIST_H

#ifndef MAX_SLOTS
#error "define MAX_SLOTS before including hist.h"
#endif

struct hist {
	__u64 count;
	__u64 sum_ns;
	__u64 slots[MAX_SLOTS];
#ifdef HIST_COMM_LEN
	char comm[HIST_COMM_LEN];
#endif
};

#endif
