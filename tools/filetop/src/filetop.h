// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What filetop.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __FILETOP_H
#define __FILETOP_H

#define TASK_COMM_LEN 16
/* The bytes of a file's name kept, as BCC (the kernel's DNAME_INLINE_LEN on 64-bit): longer names end in "...". */
#define NAME_LEN 32
/* Rows (thread, file) counted at once; reads and writes of more are counted in rows_full and reported. */
#define MAX_ROWS 10240
/* System calls between their start and their end at once (tracepoint path); more are counted in inflight_full. */
#define MAX_INFLIGHT 10240

/* A row of the screen: one thread's reads and writes of one file. */
struct file_key {
	__u64 inode;
	__u32 dev;		/* the file system's device (kernel encoding) */
	__u32 rdev;		/* the device a special file stands for */
	__u32 pid;		/* the process (TGID) */
	__u32 tid;		/* the thread, BCC's TID column */
	char comm[TASK_COMM_LEN];
};

/* A row's reads and writes so far, cumulative (user space prints differences), with what names the file. */
struct file_stat {
	__u64 reads;
	__u64 read_bytes;
	__u64 writes;
	__u64 write_bytes;
	__u32 name_len;		/* the whole name's length, which may exceed NAME_LEN */
	char type;		/* 'R' regular file, 'S' socket, 'O' anything else */
	char pad[3];
	char name[NAME_LEN + 8];	/* NUL-terminated, at most NAME_LEN bytes of the name */
};

#endif
