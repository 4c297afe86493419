// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* offcputime: sum the time threads spend off CPU, per thread and stack where they blocked.
 *
 * On sched_switch the thread switched out (prev, still current) is stamped with the time and its user and kernel
 * stacks, if it passes the filters (process/thread, user or kernel threads, state); the thread switched in (next)
 * is looked up, and its time off CPU, if within [min, max] microseconds, is added to its (thread, stacks) total.
 * A switch-in sched_switch did not report leaves the stamp in place: that block is ended when the thread next goes
 * off CPU (untraced_block_us() of offcpu.bpf.h).
 * Only the unique stacks and their totals reach user space, at the end. The first stack of each process is
 * reported on a ring buffer so user space can save its memory maps while it lives. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.bpf.h"
#include "offcputime.h"
#include "offcpu.bpf.h"

struct start {
	__u64 ts;
	struct stack_key key;
};

STARTS_MAP(struct start);

STACK_TRACE_MAP(stackmap);
PROCESS_NOTICE_MAPS(seen_pids, new_pids);

TOTALS_MAP(struct stack_key);

/* Ends the block of thread `pid` stamped in `start`, `us` long: adds it to the total of its key, and marks the stamp
 * used (its ts 0) before deleting it, so that a failed delete cannot count it twice. */
static __always_inline void end_block(__u32 *pid, struct start *start, bool in_range, __u64 us)
{
	if (in_range)
		add_total(&totals, &start->key, us);
	start->ts = 0;
	bpf_map_delete_elem(&starts, pid);
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev, struct task_struct *next,
				     __u32 prev_state)
{
	__u32 pid = BPF_CORE_READ(prev, pid);
	struct start *start, fresh = {};
	__u64 now = bpf_ktime_get_ns(), delta = 0;

	if (thread_traced(prev)) {
		/* A stamp still there: the switch-in that ended its block was not reported (untraced_block_us()). */
		start = bpf_map_lookup_elem(&starts, &pid);
		if (start && start->ts)
			end_block(&pid, start, untraced_block_us(prev, now, start->ts, &delta), delta);
		else if (start)
			bpf_map_delete_elem(&starts, &pid);
	}
	if (wanted(prev, prev_state)) {
		fresh.ts = now;
		fresh.key.tgid = BPF_CORE_READ(prev, tgid);
		fresh.key.pid = pid;
		BPF_CORE_READ_STR_INTO(&fresh.key.comm, prev, comm);
		/* prev is still current: these are the stacks where it blocked. */
		fresh.key.user_stack_id = kernel_stacks_only ? -1 : bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
		fresh.key.kern_stack_id = user_stacks_only ? -1 : bpf_get_stackid(ctx, &stackmap, 0);
		if (stamp_start(&starts, &pid, &fresh) && fresh.key.user_stack_id >= 0)
			notice_process(&seen_pids, &new_pids, fresh.key.tgid, &lost_notices);
	}

	pid = BPF_CORE_READ(next, pid);
	start = bpf_map_lookup_elem(&starts, &pid);
	if (!start || !start->ts)
		return 0;
	end_block(&pid, start, blocked_us(now, start->ts, &delta), delta);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
