// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by threadsnoop.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __THREADSNOOP_H
#define __THREADSNOOP_H

#define TASK_COMM_LEN 16
/* Directory levels of the start routine's file kept, from the file up: deeper files go unnamed in the kernel
 * (user space names them while their process lives). */
#define PATH_DEPTH 16
/* Bytes kept of each path component, with its NUL. */
#define NAME_LEN 128

/* One pthread_create() call. The start routine's address, and, where the kernel has bpf_find_vma (5.17+), the
 * file mapped there: enough to name the routine after the creating process is gone. */
struct event {
	__u64 ts;		/* bpf_ktime_get_ns() at the call */
	__u64 start;		/* the start routine's address (third argument) */
	__u64 vm_start;		/* start of the mapping holding it (0: none found) */
	__u64 vm_pgoff;		/* the mapping's offset into its file, in pages */
	__u64 ino;		/* the file's inode number */
	__u32 dev;		/* the file's super block device (kernel dev_t: major << 20 | minor) */
	__u32 pid;
	__u32 tid;
	__u32 depth;		/* path components captured in names[], file first */
	__u32 complete;		/* names[] reach the root of the file's file system */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
	char names[PATH_DEPTH * NAME_LEN];	/* component i at names[i * NAME_LEN] */
};

#endif
