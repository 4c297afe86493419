// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by stackcount.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __STACKCOUNT_H
#define __STACKCOUNT_H

#define TASK_COMM_LEN 16
/* Distinct (process, stacks) counted at once, unless --hash-storage-size says otherwise. */
#define DEFAULT_COUNTS 10240
/* fentry attaches one object per function: above this many functions, kprobe_multi or kprobes. */
#define MAX_FENTRY_FUNCS 8

/* Events are counted per process (for naming its user frames; merged in user space without -P), command name,
 * user stack and kernel stack. A stack id is negative when there is no such stack: -EFAULT (none of that kind),
 * -ENOMEM/-EEXIST (lost), or -1 (not collected: -U or -K). */
struct stack_key {
	__u32 pid;
	__s32 user_stack_id;
	__s32 kern_stack_id;
	__u32 pad;
	/* At a user function's entry on arm64, its caller's return address (entry_caller(), arch.bpf.h), which the
	 * user stack lacks; 0 elsewhere. User space puts it after the stack's first frame. */
	__u64 entry_caller;
	char comm[TASK_COMM_LEN];
};

#endif
