// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The file system operations fsop.bpf.h times, shared by fsslower and fsdist (C side; common::domain::fsop holds
 * the same numbers for Rust, with the kernel functions of each file system). */
#ifndef __COREBPF_FSOP_H
#define __COREBPF_FSOP_H

#define FSOP_READ 0
#define FSOP_WRITE 1
#define FSOP_OPEN 2
#define FSOP_FSYNC 3
#define FSOP_GETATTR 4
#define FSOP_COUNT 5

/* What a system call is to the system call path (values of fsop_syscall_kind, by number, filled by user space;
 * common::domain::fsop::SyscallKind holds the same numbers for Rust). */
#define FSOP_SC_NONE 0
#define FSOP_SC_READ 1    /* read, readv: the descriptor's file at its own position */
#define FSOP_SC_PREAD 2   /* pread64, preadv, preadv2: the position is the fourth argument */
#define FSOP_SC_WRITE 3   /* write, writev */
#define FSOP_SC_PWRITE 4  /* pwrite64, pwritev, pwritev2 */
#define FSOP_SC_OPEN 5    /* open, openat, openat2, creat: the file of the descriptor returned */
#define FSOP_SC_FSYNC 6   /* fsync, fdatasync */
#define FSOP_SC_STATX 7   /* statx: the result's buffer is the fifth argument */
#define FSOP_SC_FSTATAT 8 /* newfstatat: the third */
#define FSOP_SC_STAT 9    /* stat, lstat, fstat: the second */
/* Size of fsop_syscall_kind: calls numbered at or above it are not timed. */
#define FSOP_MAX_SYSCALLS 512

/* Operations between their start and their end at once (per thread); more are counted in fsop_calls_full. */
#define FSOP_MAX_INFLIGHT 10240
/* File systems (devices) the tracepoint path's getattr recognises from a stat result. */
#define FSOP_MAX_DEVS 256

#endif
