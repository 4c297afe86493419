// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What filelife.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __FILELIFE_H
#define __FILELIFE_H

#define TASK_COMM_LEN 16
/* Bytes of a file's name (one path component: NAME_MAX, plus the NUL). */
#define NAME_LEN 256
/* Bytes of an unlinked path read from user memory on the tracepoint path (PATH_MAX). */
#define PATH_LEN 4096
/* Files created while tracing and not yet deleted that can be followed at once. */
#define MAX_BORN 16384
/* Calls (creations, unlinks) in progress at once. */
#define MAX_INFLIGHT 10240
/* -F: directories above a deleted file, and bytes of each name. */
#define MAX_DEPTH 32
#define COMPONENT_LEN 128

/* One file deleted after it was created while tracing, sent when its unlink succeeded. With -F, dirs[0..depth)
 * holds the names of the directories above it up to the root, innermost first; the record stops after them. */
struct event {
	__u64 ts_ns;		/* when the unlink returned (CLOCK_MONOTONIC) */
	__u64 age_ns;		/* from the creation to the unlink */
	__u64 ino;		/* the file's inode number */
	__u32 dev;		/* the file system's device, the kernel's encoding (major << 20 | minor) */
	__u32 pid;		/* tgid of the process that deleted it */
	__u32 tid;
	__u32 creator;		/* tgid of the process that created it */
	__u32 depth;		/* entries used in dirs */
	__u32 dirs_complete;	/* the walk reached the root (else the path is cut at MAX_DEPTH) */
	char comm[TASK_COMM_LEN];
	char name[NAME_LEN];	/* the name it was deleted under */
	char dirs[MAX_DEPTH][COMPONENT_LEN];
};

#endif
