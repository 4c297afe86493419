// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by runqlen.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __RUNQLEN_H
#define __RUNQLEN_H

/* Queue lengths 0..MAX_SLOTS-2 each have a slot; longer ones go in the last. */
#define MAX_SLOTS 32
/* CPUs at most (the hists map is sized to the possible CPUs, up to this). */
#define MAX_CPUS 4096

/* Per CPU, cumulative since start: samples by queue length. */
struct hist {
	__u64 slots[MAX_SLOTS];
};

#endif
