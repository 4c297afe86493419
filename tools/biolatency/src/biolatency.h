/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by biolatency.bpf.c and main.rs (through the skeleton's generated `types`). */
#ifndef __BIOLATENCY_H
#define __BIOLATENCY_H

/* 2^32 usecs is over an hour: enough slots for any I/O. */
#define MAX_SLOTS 32

/* One histogram per key: all-zero key without -D/-F, else the disk and/or the request flags. */
struct hist_key {
	__u64 cmd_flags;
	__u32 dev;
	__u32 _pad;
};

/* Cumulative since start; user space prints the difference between two reads. */
struct hist {
	__u64 count;
	__u64 sum_ns;
	__u64 slots[MAX_SLOTS];
};

#endif
