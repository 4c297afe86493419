// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What fsslower.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __FSSLOWER_H
#define __FSSLOWER_H

#define TASK_COMM_LEN 16
/* The bytes of a file's name kept, as libbpf-tools keeps them (the kernel's DNAME_INLINE_LEN on 64-bit). */
#define FILE_NAME_LEN 32

/* One operation slower than the threshold. */
struct event {
	__u64 end_ns;		/* when it returned (CLOCK_MONOTONIC, bpf_ktime_get_ns) */
	__u64 delta_ns;		/* how long it took */
	__s64 size;		/* bytes read or written (or the error), fsync's range; 0 for open */
	__s64 offset;		/* the file position it started at, in bytes */
	__u32 pid;
	__u32 tid;
	__u32 op;		/* FSOP_* of fsop.h */
	__u32 pad;
	char task[TASK_COMM_LEN];
	char file[FILE_NAME_LEN];
};

#endif
