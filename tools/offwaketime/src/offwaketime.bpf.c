// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* offwaketime: sum the time threads spend blocked, per thread and stack where they blocked and per waker stack.
 *
 * On sched_switch the thread switched out (prev, still current) is stamped with the time and its user and kernel
 * stacks, if it passes the filters (process/thread, user or kernel threads, state). On sched_waking the waker
 * (current) records its name and stacks for the thread it wakes. When the blocked thread is switched back in, its
 * time off CPU, if within [min, max] microseconds, is added to its (target stacks, waker stacks) total. The first
 * stack of each process is reported on a ring buffer so user space can save its memory maps while it lives. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.bpf.h"
#include "offwaketime.h"
#include "offcpu.bpf.h"

struct start {
	__u64 ts;
	struct waker target;
};

/* The waker of each blocked thread, recorded at sched_waking, taken at its switch-in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct waker);
	__uint(max_entries, MAX_BLOCKED);
} wakers SEC(".maps");

STARTS_MAP(struct start);

STACK_TRACE_MAP(stackmap);
PROCESS_NOTICE_MAPS(seen_pids, new_pids);

TOTALS_MAP(struct wake_key);

/* The current task's name and stacks, with `tgid`/`pid` given. */
static __always_inline void take_stacks(void *ctx, struct waker *w, __u32 tgid, __u32 pid)
{
	w->tgid = tgid;
	w->pid = pid;
	bpf_get_current_comm(&w->comm, sizeof(w->comm));
	w->user_stack_id = kernel_stacks_only ? -1 : bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
	w->kern_stack_id = user_stacks_only ? -1 : bpf_get_stackid(ctx, &stackmap, 0);
	if (w->user_stack_id >= 0)
		notice_process(&seen_pids, &new_pids, tgid, &lost_notices);
}

WAKEUP_PROGRAMS(sched_waking)

static __always_inline int on_wakeup(void *ctx, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = BPF_CORE_READ(p, pid);
	struct waker w = {};

	/* Only wakeups of threads that were stamped when they blocked (they passed the filters). */
	if (!bpf_map_lookup_elem(&starts, &pid))
		return 0;
	take_stacks(ctx, &w, id >> 32, (__u32)id);
	bpf_map_update_elem(&wakers, &pid, &w, BPF_ANY);
	return 0;
}

/* Ends the block of thread `pid` stamped in `start`, `us` long: adds it, with the waker recorded since, to the total
 * of its key, marks the stamp used (its ts 0, so that a failed delete cannot count it twice) and deletes it. */
static __always_inline void end_block(__u32 *pid, struct start *start, bool in_range, __u64 us)
{
	struct wake_key key = {};
	struct waker *w;

	if (in_range) {
		key.target = start->target;
		w = bpf_map_lookup_elem(&wakers, pid);
		if (w) {
			key.waker = *w;
		} else {
			key.waker.user_stack_id = -1;
			key.waker.kern_stack_id = -1;
		}
		add_total(&totals, &key, us);
	}
	start->ts = 0;
	bpf_map_delete_elem(&starts, pid);
	bpf_map_delete_elem(&wakers, pid);
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
		/* prev is still current: these are the stacks where it blocked. */
		take_stacks(ctx, &fresh.target, BPF_CORE_READ(prev, tgid), pid);
		bpf_map_delete_elem(&wakers, &pid);
		stamp_start(&starts, &pid, &fresh);
	}

	pid = BPF_CORE_READ(next, pid);
	start = bpf_map_lookup_elem(&starts, &pid);
	if (!start || !start->ts)
		return 0;
	end_block(&pid, start, blocked_us(now, start->ts, &delta), delta);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
