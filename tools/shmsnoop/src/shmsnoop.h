// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What shmsnoop.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __SHMSNOOP_H
#define __SHMSNOOP_H

#define TASK_COMM_LEN 16

/* Which call a record is for (BCC's order); user space names them. */
#define SYS_SHMGET 0
#define SYS_SHMAT 1
#define SYS_SHMDT 2
#define SYS_SHMCTL 3

/* One System V shared memory call, sent at its return. The argument words are the call's own, in its order:
 * shmget(key, size, shmflg), shmat(shmid, shmaddr, shmflg), shmdt(shmaddr), shmctl(shmid, cmd, buf). */
struct event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at the return */
	__u64 args[3];
	__s64 ret;		/* the return value: an ID, an address, 0, or -errno */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u32 sys;		/* SYS_* */
	__u32 _pad;
	char comm[TASK_COMM_LEN];
};

#endif
