/* SPDX-License-Identifier: GPL-2.0 */
/* Types shared by sigsnoop.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __SIGSNOOP_H
#define __SIGSNOOP_H

#define TASK_COMM_LEN 16

/* Where a record comes from. */
#define SRC_GENERATE 0	/* signal:signal_generate: any signal the kernel queues (RESULT: TRACE_SIGNAL_*) */
#define SRC_KILL 1	/* the kill() system call (RESULT: its return value) */
#define SRC_TKILL 2
#define SRC_TGKILL 3

/* One signal sent. */
struct event {
	__u64 ts_ns;
	__u32 pid;		/* sender's tgid */
	__u32 tid;		/* sender's thread */
	__s32 tpid;		/* target: the thread signalled (generate), or the PID argument of the call */
	__s32 tgid;		/* tgkill's thread group argument; the target's tgid for signal_generate */
	__s32 sig;
	__s32 ret;		/* signal_generate's result, or the call's return value (-errno) */
	__s32 code;		/* si_code (signal_generate), 0 for calls */
	__u8 source;		/* SRC_* */
	__u8 group;		/* signal_generate: sent to the whole thread group */
	__u8 has_tcomm;		/* tcomm was read (always for generate; for calls, when the kernel generated it) */
	__u8 _pad;
	char comm[TASK_COMM_LEN];
	char tcomm[TASK_COMM_LEN];
};

#endif
