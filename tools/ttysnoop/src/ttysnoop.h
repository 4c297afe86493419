// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What ttysnoop.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __TTYSNOOP_H
#define __TTYSNOOP_H

#define TASK_COMM_LEN 16
/* Largest -s: bytes of one chunk (BCC's default is 256). */
#define MAX_DATASIZE 4096
/* Room for a chunk's bytes: twice -s's limit. The verifier bounds a chunk by this, and with -s equal to it the
 * loop of ttysnoop.bpf.c did not verify within the kernel's limit (6.18). */
#define DATA_ROOM 8192
/* Largest -c: chunks sent for one write (BCC's default is 16). */
#define MAX_DATACOUNT 128
/* Segments of one writev() followed; bytes in later ones are not shown. */
#define MAX_SEGS 64
/* Writes followed from the system call's start to its result at once (tracepoint path). */
#define MAX_INFLIGHT 10240

/* chunk.flags */
#define CHUNK_LAST 1	/* the write's last chunk: nothing more of it follows */
#define CHUNK_FAULT 2	/* its bytes could not be read (len is 0) */

/* One piece of the bytes a write sent to the device, at most -s bytes; -c pieces per write at most. */
struct chunk {
	__u64 total;		/* bytes of the whole write (the result of the system call, or its count) */
	__u32 pid;
	__u32 tid;
	__u32 index;		/* 0 for the write's first chunk */
	__u32 len;		/* bytes in data */
	__u32 flags;
	__u32 pad;
	char comm[TASK_COMM_LEN];
	__u8 data[DATA_ROOM];
};

#endif
