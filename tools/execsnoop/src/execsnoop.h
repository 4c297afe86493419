// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types and limits shared by execsnoop.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __EXECSNOOP_H
#define __EXECSNOOP_H

#define TASK_COMM_LEN 16
/* Bytes read of one argument (longer ones are cut, as BCC's ARGSIZE). */
#define ARGSIZE 128
/* Most arguments --max-args may ask for. */
#define TOTAL_MAX_ARGS 60
/* Room for the arguments, NUL-separated: at least TOTAL_MAX_ARGS * ARGSIZE, a power of two (masks bound reads). */
#define ARGS_BUF 8192
/* Most argv pointers counted at entry; more (or an unreadable array) is ARGC_UNKNOWN. More than TOTAL_MAX_ARGS, so
 * that reaching it still says the arguments were cut; no more than needed: the verifier walks every turn of the
 * counting loop, and at 1024 that walk was 40 ms of each start-up (25,486 instructions verified a program). */
#define MAX_ARGC 128
#define ARGC_UNKNOWN 0xffffffff

/* One exec: filled at sys_enter_execve(at) with the caller's file name and argv, and completed at its exit (where
 * what entry could not read is read from the new program's memory). The record sent through the ring buffer
 * stops after args_size bytes of args. */
struct event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at return */
	__u64 cgroup_id;	/* the task's cgroup v2 ID (its container, if any) */
	__u32 pid;		/* tgid */
	__u32 ppid;		/* real_parent's tgid, read in the kernel (short-lived processes too) */
	__u32 uid;
	__u32 cpu;		/* CPU at return */
	__s32 retval;
	__u32 args_size;	/* bytes used in args */
	__u8 truncated;		/* more arguments than --max-args */
	__u8 execveat;		/* the call was execveat (fexecve) */
	__u8 filename_unread;	/* the caller's file name was not in memory at entry */
	__u8 args_unread;	/* nor one of its argv strings */
	__u8 from_image;	/* args holds the new program's whole argv (image_argc strings), not the caller's */
	__u8 _pad[3];
	__u32 argc;		/* the caller's argc (ARGC_UNKNOWN if not counted) */
	__u32 image_argc;	/* the new program's argc, with from_image */
	char comm[TASK_COMM_LEN];	/* at return: the new program's name after a successful exec */
	char pcomm[TASK_COMM_LEN];	/* the parent's name */
	char filename[ARGSIZE];	/* the path given to exec (empty for fexecve) */
	char args[ARGS_BUF];	/* argv[0..], NUL-terminated, back to back */
};

#endif
