// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What oomkill.bpf.c and the Rust side share (bpf::types::event, bpf::consts). */
#ifndef __OOMKILL_H
#define __OOMKILL_H

#define TASK_COMM_LEN 16

/* Bits of event.have: which of the victim's fields the kernel's mark_victim tracepoint carries. */
#define HAVE_COMM 1	/* the victim's name (6.8+), else the name is the trigger's when it is the victim */
#define HAVE_MEM 2	/* total_vm, anon_rss, file_rss, shmem_rss, pgtables, oom_score_adj (6.8+) */
#define HAVE_UID 4	/* uid (6.9+) */

/* One OOM kill, made at oom:mark_victim in the task that ran the OOM killer (the trigger). */
struct event {
	__u64 total_vm_kb;	/* the victim's virtual memory */
	__u64 anon_rss_kb;	/* its resident memory: anonymous, file-backed and shared */
	__u64 file_rss_kb;
	__u64 shmem_rss_kb;
	__u64 pgtables_kb;	/* its page tables */
	__u32 fpid;		/* the trigger's process (tgid) */
	__u32 ftid;		/* the trigger's thread */
	__u32 tpid;		/* the victim, as the tracepoint names it (task->pid) */
	__u32 uid;		/* the victim's user */
	__s32 oom_score_adj;
	__u32 have;		/* HAVE_* bits */
	char fcomm[TASK_COMM_LEN];
	char tcomm[TASK_COMM_LEN];
};

#endif
