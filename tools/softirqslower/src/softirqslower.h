// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What softirqslower.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and struct event as bpf::types::event. */
#ifndef __SOFTIRQSLOWER_H
#define __SOFTIRQSLOWER_H

#define TASK_COMM_LEN 16
/* Vector numbers timed (the kernel has 10, HI to RCU); a vector past this is not timed. */
#define MAX_VECS 16

/* The two delays measured, the `stage` of a record. */
#define STAGE_RAISE_TO_ENTRY 0	/* raised (softirq_raise) to its handler starting (softirq_entry) */
#define STAGE_ENTRY_TO_EXIT 1	/* its handler running: softirq_entry to softirq_exit */

/* One delay at or above the threshold. */
struct event {
	__u64 delta_ns;
	__u32 stage;
	__u32 vec;			/* the vector number (NET_RX_SOFTIRQ, ...) */
	__u32 cpu;
	__u32 pid;			/* the thread that was running when it happened (0: idle) */
	char comm[TASK_COMM_LEN];	/* its name (swapper/N when idle, ksoftirqd/N, ...) */
};

#endif
