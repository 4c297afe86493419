// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types and sizes shared by syscount.bpf.c and the Rust front end (through the skeleton and `bpf::consts`). */
#ifndef __SYSCOUNT_H
#define __SYSCOUNT_H

/* Syscall numbers counted per syscall (a per-CPU array slot each); higher numbers are counted as out of range. */
#define SYSCALL_SLOTS 1024
/* Processes counted at once with -P (entries of exited processes are removed after their last report). */
#define MAX_PROCESSES 32768
/* Threads inside a syscall at once whose entry time -L can keep. */
#define MAX_IN_FLIGHT 65536
#define TASK_COMM_LEN 16

/* Per syscall (per CPU, summed by user space): calls and, with -L, their total time. */
struct sys_stat {
	__u64 count;
	__u64 total_ns;
};

/* Per process with -P: calls, total time with -L, and the process's name when it was first seen or, after a
 * successful exec, the new program's. */
struct proc_stat {
	__u64 count;
	__u64 total_ns;
	char comm[TASK_COMM_LEN];
};

#endif
