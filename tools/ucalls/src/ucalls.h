// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by ucalls.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __UCALLS_H
#define __UCALLS_H

/* Bytes kept of a class (or file) name and of a method name, with their NULs (powers of two). */
#define CLASS_LEN 128
#define METHOD_LEN 64
/* Methods (and system calls) counted at once. */
#define MAX_METHODS 16384
/* Threads with calls in progress tracked at once (-L). */
#define MAX_THREADS 4096
/* Calls in progress kept per thread (-L): deeper calls are counted but not timed. */
#define MAX_DEPTH 64

struct method_key {
	char clazz[CLASS_LEN];
	char method[METHOD_LEN];
};

/* Calls of one method (or system call) so far, cumulative. */
struct info {
	__u64 calls;
	__u64 total_ns;		/* -L: time from entry to return, summed over the timed calls */
};

#endif
