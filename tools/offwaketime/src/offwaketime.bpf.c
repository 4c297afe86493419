// SPDX-License-Identifier: GPL-2.0
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
#include "maps.bpf.h"
#include "stacks.bpf.h"
#include "offwaketime.h"

const volatile bool user_stacks_only = false;
const volatile bool kernel_stacks_only = false;
const volatile bool user_threads_only = false;
const volatile bool kernel_threads_only = false;
const volatile bool filter_by_pid = false;
const volatile bool filter_by_tid = false;
const volatile bool filter_state = false;
const volatile __u32 state = 0;
const volatile __u64 min_block_us = 1;
const volatile __u64 max_block_us = (__u64)-1;
/* Since 5.18 sched_switch passes prev_state as a 4th argument (decided from BTF in user space). */
const volatile bool has_prev_state_arg = true;

/* Blocks not counted because the totals map was full, or the start map (too many threads off CPU). */
__u64 lost_blocks = 0;
__u64 lost_starts = 0;
/* New processes that could not be reported to user space (ring buffer full). */
__u64 lost_notices = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u8);
	__uint(max_entries, 1);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u8);
	__uint(max_entries, 1);
} tids SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct start);
	__uint(max_entries, MAX_BLOCKED);
} starts SEC(".maps");

STACK_TRACE_MAP(stackmap);
PROCESS_NOTICE_MAPS(seen_pids, new_pids);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct wake_key);
	__type(value, __u64);
	__uint(max_entries, 40960);
} totals SEC(".maps");

/* Makes the key type visible to the skeleton's generated `types` module. */
struct wake_key _wake_key_type = {};

static const __u64 zero;

struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)t, state);
}

static __always_inline bool wanted(struct task_struct *prev, __u32 prev_state)
{
	__u32 tgid = BPF_CORE_READ(prev, tgid), pid = BPF_CORE_READ(prev, pid);
	bool kthread = BPF_CORE_READ(prev, flags) & PF_KTHREAD;

	if (pid == 0)
		return false;
	if (filter_by_pid && !bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (filter_by_tid && !bpf_map_lookup_elem(&tids, &pid))
		return false;
	if (user_threads_only && kthread)
		return false;
	if (kernel_threads_only && !kthread)
		return false;
	if (filter_state) {
		/* BCC: state 0 means running (preempted); other values are a bitmask. */
		if (state == 0 ? prev_state != 0 : !(prev_state & state))
			return false;
	}
	return true;
}

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

static __always_inline int on_waking(void *ctx, struct task_struct *p)
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

static __always_inline int on_switch(void *ctx, struct task_struct *prev, struct task_struct *next, __u32 prev_state)
{
	__u32 pid = BPF_CORE_READ(prev, pid);
	struct start *start, fresh = {};
	struct wake_key key = {};
	struct waker *w;
	__u64 now = bpf_ktime_get_ns(), delta, *total;

	if (wanted(prev, prev_state)) {
		fresh.ts = now;
		/* prev is still current: these are the stacks where it blocked. */
		take_stacks(ctx, &fresh.target, BPF_CORE_READ(prev, tgid), pid);
		bpf_map_delete_elem(&wakers, &pid);
		if (bpf_map_update_elem(&starts, &pid, &fresh, BPF_ANY))
			__sync_fetch_and_add(&lost_starts, 1);
	}

	pid = BPF_CORE_READ(next, pid);
	start = bpf_map_lookup_elem(&starts, &pid);
	if (!start)
		return 0;
	delta = now > start->ts ? (now - start->ts) / 1000 : 0;
	if (delta >= min_block_us && delta <= max_block_us) {
		key.target = start->target;
		w = bpf_map_lookup_elem(&wakers, &pid);
		if (w) {
			key.waker = *w;
		} else {
			key.waker.user_stack_id = -1;
			key.waker.kern_stack_id = -1;
		}
		total = bpf_map_lookup_or_try_init(&totals, &key, &zero);
		if (total)
			__sync_fetch_and_add(total, delta);
		else
			__sync_fetch_and_add(&lost_blocks, 1);
	}
	bpf_map_delete_elem(&starts, &pid);
	bpf_map_delete_elem(&wakers, &pid);
	return 0;
}

/* sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next[, unsigned int prev_state]) */
static __always_inline int switch_args(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1], *next = (struct task_struct *)ctx[2];
	__u32 prev_state = has_prev_state_arg ? (__u32)ctx[3] : task_state(prev);

	return on_switch(ctx, prev, next, prev_state);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_btf)
{
	return switch_args(ctx);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw)
{
	return switch_args(ctx);
}

/* sched_waking(struct task_struct *p) */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking_btf)
{
	return on_waking(ctx, (struct task_struct *)ctx[0]);
}

SEC("raw_tp/sched_waking")
int BPF_PROG(sched_waking_raw)
{
	return on_waking(ctx, (struct task_struct *)ctx[0]);
}

char LICENSE[] SEC("license") = "GPL";
