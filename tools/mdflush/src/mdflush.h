// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What mdflush.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __MDFLUSH_H
#define __MDFLUSH_H

#define TASK_COMM_LEN 16
#define DISK_NAME_LEN 32
/* The md driver's fixed block major (include/uapi/linux/major.h); partitionable arrays ("md_d0") have a dynamic
 * major, and are recognised by their name. */
#define MD_MAJOR 9

/* One flush request sent to an md array, from the task that sent it. */
struct event {
	__u32 pid;		/* tgid */
	__u32 tid;
	char comm[TASK_COMM_LEN];
	char disk[DISK_NAME_LEN];	/* the array's gendisk name: md0, md127, md_home */
};

#endif
