// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What template.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME (one home for each fact shared by C and Rust). */
#ifndef __TEMPLATE_H
#define __TEMPLATE_H

#define TASK_COMM_LEN 16
/* Bytes of the directory as given, with its NUL; longer ones are cut there. */
#define PATH_LEN 256
/* chdir() calls followed from entry to return at once; more are counted in inflight_full. */
#define MAX_INFLIGHT 10240

/* One chdir() call, sent at its return. */
struct event {
	__u64 ts_ns;
	__u32 pid;		/* tgid */
	__u32 tid;
	__s32 ret;		/* 0, or -errno */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
	char path[PATH_LEN];	/* as given */
};

#endif
