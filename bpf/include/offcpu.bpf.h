// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The scheduler side shared by the off-CPU tools (offcputime, offwaketime, wakeuptime).
 *
 * Each tool stamps a thread when sched_switch takes it off a CPU, if it passes the filters below (the flags'
 * -p/-t/-u/-k/--state, set in .rodata and the `pids`/`tids` maps by user space before attaching), and accounts
 * the time blocked, if within [-m, -M] microseconds (blocked_us()), later: at its switch-in (offcputime,
 * offwaketime) or at its wakeup (wakeuptime). This header declares the filters, the `lost_*` counters, and the
 * tp_btf/raw_tp programs: `sched_switch_btf`/`sched_switch_raw` call the tool's on_switch(), and
 * WAKEUP_PROGRAMS(sched_waking) declares `sched_waking_btf`/`sched_waking_raw` calling its on_wakeup().
 * STARTS_MAP and TOTALS_MAP declare the maps of stamps and totals (add_total()); the tool's header defines
 * MAX_BLOCKED. The matching user space is common::attach::sched. */
#ifndef __COREBPF_OFFCPU_BPF_H
#define __COREBPF_OFFCPU_BPF_H

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"
#include "core_fixes.bpf.h"
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "untraced_switch.bpf.h"

/* task_struct->flags (include/linux/sched.h). */
#define OFFCPU_PF_EXITING 0x00000004
#define OFFCPU_PF_KTHREAD 0x00200000

const volatile bool user_threads_only = false;
const volatile bool kernel_threads_only = false;
const volatile bool filter_state = false;
const volatile __u32 state = 0;
const volatile __u64 min_block_us = 1;
const volatile __u64 max_block_us = (__u64)-1;
/* Since 5.18 sched_switch passes prev_state as a 4th argument (decided from BTF in user space). */
const volatile bool has_prev_state_arg = true;

/* Blocks not counted because the totals map was full, or the start map (too many threads off CPU). */
__u64 lost_blocks = 0;
__u64 lost_starts = 0;
/* Switch-ins sched_switch did not report (untraced_block_us()): blocks timed afterwards from the scheduler's own
 * accounting (recovered_switch_ins), and blocks that could not be, which are missing from the totals
 * (missed_switch_ins). */
__u64 missed_switch_ins = 0;
__u64 recovered_switch_ins = 0;

/* __state of a task switched out for the last time (include/linux/sched.h, since 4.14). */
#define OFFCPU_TASK_DEAD 0x00000080

/* The stack tools' (offcputime, offwaketime) -U and -K, and the new processes they could not report to user space
 * (notice_process() of stacks.bpf.h: ring buffer full). */
const volatile bool user_stacks_only = false;
const volatile bool kernel_stacks_only = false;
__u64 lost_notices = 0;

/* Processes (-p) and threads (-t) to trace (filter.bpf.h). */
ID_SETS_FILTER;

/* `starts`: per thread off CPU (key: its id), a `value_type` stamped when it went (at most MAX_BLOCKED). */
#define STARTS_MAP(value_type)                                                                                    \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                   \
		__type(key, __u32);                                                                                \
		__type(value, value_type);                                                                         \
		__uint(max_entries, MAX_BLOCKED);                                                                  \
	} starts SEC(".maps")

/* `totals`: microseconds blocked per `key_type` (made visible to the skeleton's generated `types` module). */
#define TOTALS_MAP(key_type)                                                                                      \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                   \
		__type(key, key_type);                                                                             \
		__type(value, __u64);                                                                              \
		__uint(max_entries, 40960);                                                                        \
	} totals SEC(".maps");                                                                                     \
	key_type _totals_key_type = {}

/* Adds `us` to the total of `key`, counting it in lost_blocks if the map is full. */
static __always_inline void add_total(void *totals, const void *key, __u64 us)
{
	counter_add(totals, key, us, &lost_blocks);
}

/* The time since `ts` in microseconds, in *us; true if it is within [-m, -M]. */
static __always_inline bool blocked_us(__u64 now, __u64 ts, __u64 *us)
{
	*us = now > ts ? (now - ts) / 1000 : 0;
	return *us >= min_block_us && *us <= max_block_us;
}

/* True if the thread switched out passes the filters on the thread itself (not on its state). */
static __always_inline bool thread_traced(struct task_struct *prev)
{
	__u32 tgid = TP_READ(prev, tgid), pid = TP_READ(prev, pid);
	bool kthread = TP_READ(prev, flags) & OFFCPU_PF_KTHREAD;

	/* The idle task. */
	if (pid == 0)
		return false;
	if (!ids_in_sets(tgid, pid))
		return false;
	if (user_threads_only && kthread)
		return false;
	if (kernel_threads_only && !kthread)
		return false;
	return true;
}

/* True if a traced thread switched out in `prev_state` starts a block to account. */
static __always_inline bool wanted_state(__u32 prev_state)
{
	/* A thread leaving for good never comes back to end its block. */
	if (prev_state & OFFCPU_TASK_DEAD)
		return false;
	/* BCC: state 0 means running (preempted); other values are a bitmask. */
	if (filter_state && (state == 0 ? prev_state != 0 : !(prev_state & state)))
		return false;
	return true;
}

/* True if the thread switched out passes the filters. */
static __always_inline bool wanted(struct task_struct *prev, __u32 prev_state)
{
	return thread_traced(prev) && wanted_state(prev_state);
}

/* A traced thread `prev` is being switched out while the stamp of its previous block, taken at `ts`, is still there:
 * sched_switch did not report the switch-in that ended that block (untraced_switch.bpf.h). The block ended when the
 * thread came back on a CPU: now less its run time since it was picked. True with the block in *us if it could be
 * timed and is within [-m, -M]; counted in recovered_switch_ins if timed, else in missed_switch_ins. */
static __always_inline bool untraced_block_us(struct task_struct *prev, __u64 now, __u64 ts, __u64 *us)
{
	__u64 ran = ran_since_picked(prev);

	if (!ran || now < ts + ran) {
		__sync_fetch_and_add(&missed_switch_ins, 1);
		return false;
	}
	__sync_fetch_and_add(&recovered_switch_ins, 1);
	return blocked_us(now - ran, ts, us);
}

/* Stamps thread `pid` in `starts` with `value` as it goes off CPU, for the tools that end each block at the
 * thread's switch-in (offcputime, offwaketime); they first end a stamp still there (untraced_block_us()). A full
 * map counts in lost_starts. False if nothing was stamped. */
static __always_inline bool stamp_start(void *starts, __u32 *pid, void *value)
{
	if (bpf_map_update_elem(starts, pid, value, BPF_ANY)) {
		__sync_fetch_and_add(&lost_starts, 1);
		return false;
	}
	return true;
}

/* The tool's work on each sched_switch: `prev` (still current) goes off CPU, `next` comes on. */
static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev, struct task_struct *next,
				     __u32 prev_state);

/* sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next[, unsigned int prev_state]) */
static __always_inline int switch_args(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1], *next = (struct task_struct *)ctx[2];
	__u32 prev_state = has_prev_state_arg ? (__u32)ctx[3] : task_state(prev);

	return on_switch(ctx, (bool)ctx[0], prev, next, prev_state);
}

TP_BTF_RAW(sched_switch, sched_switch)
{
	return switch_args(ctx);
}

/* Programs `<tp>_btf` and `<tp>_raw` on the wakeup tracepoint `tp` (sched_waking or sched_wakeup, both
 * `(struct task_struct *p)`), calling the tool's on_wakeup() in the waker's context (sched_waking always is). */
#define WAKEUP_PROGRAMS(tp)                                                                                       \
	static __always_inline int on_wakeup(void *ctx, struct task_struct *p);                                 \
	TP_BTF_RAW(tp, tp, struct task_struct *p)                                                                  \
	{                                                                                                          \
		return on_wakeup(ctx, p);                                                                          \
	}

#endif
