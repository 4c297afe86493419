// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What swapin.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __SWAPIN_H
#define __SWAPIN_H

#define TASK_COMM_LEN 16
/* Processes (PID and name pairs) counted at once; swap-ins of more are counted in counts_full and reported.
 * User space forgets the processes that have exited, so this bounds the live ones only. */
#define MAX_PROCESSES 10240
/* Swap devices (not files) whose reads the block-layer path counts by device number. */
#define MAX_SWAP_DEVS 16

/* A counted process: its PID (the thread group's) and the name of the task that swapped in. */
struct swapin_key {
	__u32 pid;
	char comm[TASK_COMM_LEN];
};

#endif
