// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types and limits shared by opensnoop.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __OPENSNOOP_H
#define __OPENSNOOP_H

#define TASK_COMM_LEN 16
/* Bytes of the path as given (as libbpf-tools' NAME_MAX + 1). */
#define PATH_LEN 256
/* -F: directories above a relative path's base, and bytes of each name. */
#define MAX_DEPTH 32
#define COMPONENT_LEN 128

/* One open, open{at,at2} call: sent at return. With -F and a relative path, dirs[0..depth) holds the names of the
 * directories from the base (cwd or dirfd) up to the root, innermost first; the record stops after them. */
struct event {
	__u64 ts_ns;
	__u64 flags;
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 uid;
	__s32 ret;		/* fd, or -errno */
	__u32 mode;
	__u32 depth;		/* entries used in dirs */
	__u8 call;		/* 0 open, 1 openat, 2 openat2 */
	__u8 dirs_complete;	/* the walk reached the root (else the path is cut at MAX_DEPTH) */
	__u8 _pad[6];
	char comm[TASK_COMM_LEN];
	char path[PATH_LEN];
	char dirs[MAX_DEPTH][COMPONENT_LEN];
};

#endif
