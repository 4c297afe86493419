// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* vfsstat: what the BPF side and user space share. */
#ifndef __VFSSTAT_H
#define __VFSSTAT_H

/* The counters (keys of the per-CPU `stats` array), in BCC's column order. */
#define S_READ 0
#define S_WRITE 1
#define S_FSYNC 2
#define S_OPEN 3
#define S_CREATE 4
#define S_UNLINK 5
#define S_MKDIR 6
#define S_RMDIR 7
#define S_MAXSTAT 8

/* The syscall path: what a system call number means (values of the `syscall_class` array, filled by user space
 * before attaching). 0: not counted. */
#define SC_NONE 0
#define SC_READ 1     /* read, pread64: count unless the descriptor was bad (EBADF) */
#define SC_WRITE 2    /* write, pwrite64: likewise */
#define SC_FSYNC 3    /* fsync, fdatasync: likewise */
#define SC_OPEN 4     /* open, openat, openat2, creat, open_by_handle_at: count when it succeeds */
#define SC_MKNOD 5    /* mknod: CREATE when it succeeds and the mode (argument 2) is a regular file */
#define SC_MKNODAT 6  /* mknodat: the same, mode in argument 3 */
#define SC_UNLINK 7   /* unlink: count when it succeeds */
#define SC_UNLINKAT 8 /* unlinkat: UNLINK, or RMDIR with AT_REMOVEDIR (argument 3), when it succeeds */
#define SC_MKDIR 9    /* mkdir, mkdirat: count when it succeeds */
#define SC_RMDIR 10   /* rmdir: count when it succeeds */

/* Size of the `syscall_class` array: system call numbers at or above it are not counted. */
#define SYSCALL_SLOTS 1024

#endif /* __VFSSTAT_H */
