// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* pidpersec: counts new tasks (every fork and clone, as BCC's kprobe on sched_fork does) at the
 * sched:sched_process_fork tracepoint, through the attach ladder tp_btf > raw_tp > tracepoint (the first two from
 * one body, TP_BTF_RAW). The count is cumulative and never reset: user space prints the difference between two
 * reads, so no fork falls between a read and a clear. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "tp_btf_raw.bpf.h"
#include "pidpersec.h"

/* New tasks since load. */
__u64 forks = 0;

TP_BTF_RAW(fork, sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__sync_fetch_and_add(&forks, 1);
	return 0;
}

SEC("tracepoint/sched/sched_process_fork")
int fork_tp(void *ctx)
{
	__sync_fetch_and_add(&forks, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
