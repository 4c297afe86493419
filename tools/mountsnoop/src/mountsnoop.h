// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by mountsnoop.bpf.c and the Rust front end (through the skeleton's `types` and `consts`). */
#ifndef __MOUNTSNOOP_H
#define __MOUNTSNOOP_H

#define TASK_COMM_LEN 16
#define PATH_LEN 4096
#define FS_LEN 256
#define DATA_LEN 512

/* The calls traced (struct event's `op`), numbered as libbpf-tools' mountsnoop numbers them. */
#define OP_MOUNT 1
#define OP_UMOUNT 2
#define OP_FSOPEN 3
#define OP_FSCONFIG 4
#define OP_FSMOUNT 5
#define OP_MOVE_MOUNT 6

/* fsconfig's commands whose `value` is a string (the others pass none, a blob or a descriptor). */
#define FSCONFIG_SET_STRING_CMD 1
#define FSCONFIG_SET_PATH_CMD 3
#define FSCONFIG_SET_PATH_EMPTY_CMD 4

/* One call, at its return. Which fields a call fills:
 *   mount(src, dest, fs, flags, data)
 *   umount(dest, flags)
 *   fsopen(fs, flags)
 *   fsconfig(fd, flags = cmd, fs = key, data = value, aux)
 *   fsmount(fd, flags, attr_flags)
 *   move_mount(fd = from_dfd, src = from_pathname, fd2 = to_dfd, dest = to_pathname, flags)
 * The strings not filled are empty. */
struct event {
	__u64 delta_ns;		/* entry to return */
	__u64 flags;
	__u32 pid;
	__u32 tid;
	__u32 mnt_ns;		/* the caller's mount namespace (its inode number) */
	__s32 ret;		/* the return value: 0, a new descriptor, or -errno */
	__u32 op;		/* OP_* */
	__s32 fd;
	__s32 fd2;
	__s32 aux;
	__u32 attr_flags;
	__u32 ppid;		/* with -P: the caller's parent process (else 0) */
	char comm[TASK_COMM_LEN];
	char pcomm[TASK_COMM_LEN];	/* with -P: the parent's command name (else empty) */
	char fs[FS_LEN];
	char data[DATA_LEN];
	char src[PATH_LEN];
	char dest[PATH_LEN];
};

#endif
