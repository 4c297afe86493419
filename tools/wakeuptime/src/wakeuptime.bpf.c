// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* wakeuptime: sum the time threads spend blocked, per waker kernel stack, waker name and target name.
 *
 * On sched_switch the thread switched out (prev, still current) is stamped with the time if it passes the filters
 * (-p, -u) and is blocking: not preempted (it stays runnable and gets no wakeup) and not exiting. On sched_waking
 * (else sched_wakeup), in the waker's context, the stamp of the thread woken is taken and its time blocked, if
 * within [-m, -M] microseconds, is added to the (waker kernel stack, waker comm, target comm) total. Only the
 * unique stacks and their totals reach user space, at the end. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.bpf.h"
#include "wakeuptime.h"
#include "offcpu.bpf.h"

/* When each blocked thread went off CPU (ns). */
STARTS_MAP(__u64);
STACK_TRACE_MAP(stackmap);
TOTALS_MAP(struct wake_key);

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev, struct task_struct *next,
				     __u32 prev_state)
{
	__u32 pid;
	__u64 now;

	if (preempt || (BPF_CORE_READ(prev, flags) & OFFCPU_PF_EXITING) || !wanted(prev, prev_state))
		return 0;
	pid = BPF_CORE_READ(prev, pid);
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &pid, &now, BPF_ANY))
		__sync_fetch_and_add(&lost_starts, 1);
	return 0;
}

WAKEUP_PROGRAMS(sched_waking)
WAKEUP_PROGRAMS(sched_wakeup)

static __always_inline int on_wakeup(void *ctx, struct task_struct *p)
{
	__u32 pid = BPF_CORE_READ(p, pid);
	struct wake_key key = {};
	__u64 *ts, delta;

	ts = bpf_map_lookup_elem(&starts, &pid);
	if (!ts)
		return 0;
	if (blocked_us(bpf_ktime_get_ns(), *ts, &delta)) {
		/* current is the waker: its kernel stack is where the wakeup came from. */
		key.w_k_stack_id = bpf_get_stackid(ctx, &stackmap, 0);
		bpf_get_current_comm(&key.waker, sizeof(key.waker));
		BPF_CORE_READ_STR_INTO(&key.target, p, comm);
		add_total(&totals, &key, delta);
	}
	bpf_map_delete_elem(&starts, &pid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
