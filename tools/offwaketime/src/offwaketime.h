// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by offwaketime.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __OFFWAKETIME_H
#define __OFFWAKETIME_H

#define TASK_COMM_LEN 16
/* Threads switched out, or woken, and not yet back on a CPU, at most. */
#define MAX_BLOCKED 65536

/* Who woke a thread: its process, thread, command and stacks at the wakeup. */
struct waker {
	__u32 tgid;
	__u32 pid;
	__s32 user_stack_id;
	__s32 kern_stack_id;
	char comm[TASK_COMM_LEN];
};

/* Blocked time is summed per target (the thread that blocked, with its stacks) and waker. A stack id is negative
 * when there is no such stack: -EFAULT (none of that kind), -ENOMEM/-EEXIST (lost), or -1 (not collected). A waker
 * with pid 0 and both ids -1 means none was seen (the thread was woken before tracing began). */
struct wake_key {
	struct waker target;
	struct waker waker;
};

#endif
