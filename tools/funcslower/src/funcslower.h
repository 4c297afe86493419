// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by funcslower.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __FUNCSLOWER_H
#define __FUNCSLOWER_H

/* Arguments kept per call (-a): the registers of the calling convention. */
#define MAX_ARGS 6
/* Threads timed at once (calls in flight); more are counted as not timed. */
#define MAX_THREADS 10240
/* fentry/fexit attaches one object per function: above this many functions, kprobe_multi or kprobes. */
#define MAX_FENTRY_FUNCS 8
#define COMM_LEN 16

/* A call in flight, keyed by thread. */
struct entry {
	__u64 start_ns;
	__u64 ip;
	__u64 args[MAX_ARGS];
	__u32 func;
	__u32 pad;
};

/* A call slower than the threshold. The events ring buffer also carries process notices (notice_process(),
 * stacks.bpf.h): 4-byte records, each a PID, told apart by their length. */
struct event {
	__u64 start_ns;
	__u64 duration_ns;
	__u64 retval;
	__u64 ip;
	__u64 args[MAX_ARGS];
	__u32 pid;
	__u32 tid;
	__u32 func;
	__s32 user_stack_id;
	__s32 kern_stack_id;
	char comm[COMM_LEN];
};

#endif
