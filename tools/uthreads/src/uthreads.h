// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by uthreads.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __UTHREADS_H
#define __UTHREADS_H

/* Bytes kept of a Java thread's name, with its NUL (a power of two). */
#define NAME_LEN 128

/* What the probe marks (its USDT cookie). */
#define KIND_PTHREAD 0
#define KIND_JAVA_START 1
#define KIND_JAVA_STOP 2

/* One thread start or end. */
struct event {
	__u64 ts;		/* bpf_ktime_get_ns() at the probe */
	__u64 runtime_id;	/* pthread: the start routine's address; Java: the thread's Java ID */
	__u64 native_id;	/* pthread: the new thread's TID; Java: the native ID HotSpot passes */
	__u32 pid;
	__u32 tid;		/* the thread the probe fired in */
	__u32 kind;
	__u32 name_len;		/* bytes of name (Java) */
	char name[NAME_LEN];	/* Java: the thread's name */
};

#endif
