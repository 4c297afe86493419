// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What biopattern.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __BIOPATTERN_H
#define __BIOPATTERN_H

/* Disks followed at once; completions on more are counted in disks_full and reported. */
#define MAX_DISKS 1024

/* One disk's completions so far, cumulative (user space prints differences). */
struct disk_pattern {
	__u64 next_sector;	/* where the last completion ended; 0 before the first */
	__u64 bytes;		/* bytes of the completions counted below */
	__u64 sequential;	/* completions that started where the previous one ended */
	__u64 random;		/* completions that started anywhere else */
};

#endif
