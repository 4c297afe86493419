// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What sslsniff.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __SSLSNIFF_H
#define __SSLSNIFF_H

#define TASK_COMM_LEN 16
/* The largest --max-buffer-size accepted (bytes of plaintext captured per call). */
#define MAX_BUF_LIMIT 1048576
/* Calls in progress (one per thread inside a traced function) kept at once. */
#define MAX_CALLS 10240

/* What a record reports: BCC's FUNC column (READ/RECV, WRITE/SEND, HANDSHAKE). */
#define RW_READ 0
#define RW_WRITE 1
#define RW_HANDSHAKE 2

/* One completed call: this header, followed on the ring buffer by `captured` bytes of plaintext. */
struct ssl_event {
	__u64 timestamp_ns;	/* CLOCK_MONOTONIC time of the return */
	__u64 delta_ns;		/* time spent in the call */
	__u32 pid;
	__u32 tid;
	__u32 uid;
	__u32 len;		/* bytes the call read or wrote (its return value, or what the _ex functions store through their fourth argument) */
	__u32 captured;		/* bytes that follow: min(len, max buffer size), or 0 if they could not be read */
	__u32 buf_filled;	/* 1 if the plaintext could be read from the caller's buffer */
	__u32 rw;		/* RW_READ, RW_WRITE or RW_HANDSHAKE */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
};

#endif
