// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by uflow.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __UFLOW_H
#define __UFLOW_H

/* Bytes kept of a class (or file) name and of a method name, with their NULs (powers of two). */
#define CLASS_LEN 128
#define METHOD_LEN 64
/* Threads whose call depth is tracked at once. */
#define MAX_THREADS 8192

/* One method entry or return. */
struct event {
	__u64 ts;		/* bpf_ktime_get_ns() at the probe */
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 depth;		/* the thread's call depth: an entry's after it, a return's before it */
	__u32 is_return;
	__u32 _pad;
	char clazz[CLASS_LEN];
	char method[METHOD_LEN];
};

#endif
