// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by bashreadline.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __BASHREADLINE_H
#define __BASHREADLINE_H

#define TASK_COMM_LEN 16
/* Bytes of a command line captured, with its NUL (BCC keeps 80). */
#define MAX_LINE 512

/* One line readline() returned to a bash. */
struct event {
	__u32 pid;
	__u32 tid;
	__u32 len;		/* bytes captured, without the NUL */
	__u32 truncated;	/* the line was longer than MAX_LINE - 1 bytes */
	char comm[TASK_COMM_LEN];
	char line[MAX_LINE];
};

#endif
