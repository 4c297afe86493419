// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by offcputime.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __OFFCPUTIME_H
#define __OFFCPUTIME_H

#define TASK_COMM_LEN 16
/* Threads switched out and not yet back, at most. */
#define MAX_BLOCKED 65536

/* Off-CPU time is summed per thread, command name, user stack and kernel stack. A stack id is negative when there
 * is no such stack: -EFAULT (none of that kind), -ENOMEM/-EEXIST (lost), or -1 (not collected: -U or -K). */
struct stack_key {
	__u32 tgid;
	__u32 pid;
	__s32 user_stack_id;
	__s32 kern_stack_id;
	char comm[TASK_COMM_LEN];
};

#endif
