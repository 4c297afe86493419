// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by wakeuptime.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __WAKEUPTIME_H
#define __WAKEUPTIME_H

#define TASK_COMM_LEN 16
/* Threads switched out and not yet woken, at most. */
#define MAX_BLOCKED 65536

/* Blocked time is summed, as BCC does, per waker kernel stack, waker command and target (blocked) command. The
 * stack id is negative when the stack was lost (-ENOMEM, -EEXIST). */
struct wake_key {
	__s32 w_k_stack_id;
	char waker[TASK_COMM_LEN];
	char target[TASK_COMM_LEN];
};

#endif
