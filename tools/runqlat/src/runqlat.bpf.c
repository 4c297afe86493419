// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* runqlat: run queue latency, from a task becoming runnable (sched_wakeup, sched_wakeup_new, or preempted while
 * still runnable at sched_switch) to its next sched_switch onto a CPU, as in-kernel log2 histograms.
 *
 * The tracepoints are attached as tp_btf where the kernel allows it, else as raw_tp; user space loads one set or
 * the other. sched_switch gained a fourth argument, prev_state, in 5.18: user space reads the arity from BTF and
 * sets switch_has_state; older kernels read the state from the task (`__state` since 5.14, `state` before).
 * Histograms are cumulative and never cleared, so reading them at an interval loses no wait. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "timehist.bpf.h"
#include "maps.bpf.h"
#include "core_fixes.bpf.h"
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "untraced_switch.bpf.h"
#include "per.h"
#include "runqlat.h"

#define TASK_RUNNING 0

/* What the histograms are kept per (per.h: PER_ALL, PER_PROCESS for -P, PER_THREAD for -L, PER_PIDNS for --pidnss). */
const volatile __u32 per = 0;
const volatile bool millis = false;
const volatile bool switch_has_state = false;

/* A runnable task's wait: since when, and how many times the scheduler had switched it in by then
 * (runs_so_far(), untraced_switch.bpf.h). */
struct wait_start {
	__u64 ts;
	__u64 runs;
};

/* Waits not timed because the start map was full; waits not counted because the hists map was full. */
__u64 start_map_full = 0;
__u64 hists_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAITING);
	__type(key, __u32);
	__type(value, struct wait_start);
} start SEC(".maps");

/* One entry without -P/-L/--pidnss; user space sizes it otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist zero_hist;

/* Makes the struct visible to the skeleton's generated `types` module. */
struct hist _hist_type = {};

/* Waits whose end (the task's switch-in) sched_switch did not report (untraced_switch.bpf.h), timed at the task's
 * next switch-out from the scheduler's accounting. */
__u64 recovered_waits = 0;
/* Such waits of tasks outside the fair class, which cannot be timed. */
__u64 untimed_waits = 0;

static __always_inline void trace_enqueue(struct task_struct *p)
{
	struct wait_start w;
	__u32 pid = TP_READ(p, pid);

	if (!pid)
		return;
	if (!tgid_wanted(TP_READ(p, tgid)))
		return;
	w.ts = bpf_ktime_get_ns();
	w.runs = runs_so_far(p);
	if (bpf_map_update_elem(&start, &pid, &w, BPF_ANY))
		__sync_fetch_and_add(&start_map_full, 1);
}

static __always_inline __u32 pid_namespace(struct task_struct *task)
{
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	struct upid upid;

	bpf_core_read(&upid, sizeof(upid), &pid->numbers[level]);
	return BPF_CORE_READ(upid.ns, ns.inum);
}

/* Adds a wait of `delta` ns by `task` to its histogram. */
static __always_inline void add_wait(struct task_struct *task, __u32 pid, __u64 delta)
{
	struct hist *hist;
	__u32 key = 0;

	if (per == PER_PROCESS)
		key = TP_READ(task, tgid);
	else if (per == PER_THREAD)
		key = pid;
	else if (per == PER_PIDNS)
		key = pid_namespace(task);
	hist = bpf_map_lookup_or_try_init(&hists, &key, &zero_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		return;
	}
	if (per != PER_ALL && !hist->comm[0])
		bpf_probe_read_kernel_str(&hist->comm, sizeof(hist->comm), task->comm);
	timehist_add(hist, delta, millis ? 1000000 : 1000);
}

/* `prev` goes off CPU at `now` with a wait `w` still stamped. If the scheduler has switched it in since the stamp,
 * sched_switch did not report that switch-in, which ended the wait: it came on its run time since it was picked
 * ago (untraced_switch.bpf.h). If not, the wakeup landed while the task was still on its CPU, on its way to sleep:
 * no wait at all. A kernel without the count of switch-ins decides by the times alone. A task outside the fair
 * class keeps no run time: its wait cannot be timed, and is counted in untimed_waits. */
static __always_inline void end_untraced_wait(struct task_struct *prev, __u32 pid, __u64 now, struct wait_start *w)
{
	__u64 runs = runs_so_far(prev), ran = ran_since_picked(prev), came_on;

	if (runs == UNTRACED_NO_RUNS ? !ran || now < w->ts + ran : runs == w->runs)
		return;
	if (!ran) {
		__sync_fetch_and_add(&untimed_waits, 1);
		return;
	}
	__sync_fetch_and_add(&recovered_waits, 1);
	/* The two clocks (bpf_ktime_get_ns() and the scheduler's) may disagree by a little: a switch-in that
	 * seems to come before the wakeup ends a wait shorter than that. */
	came_on = now - ran;
	add_wait(prev, pid, came_on > w->ts ? came_on - w->ts : 0);
}

static __always_inline int handle_switch(struct task_struct *prev, struct task_struct *next, long prev_state)
{
	__u32 pid = TP_READ(prev, pid);
	__u64 now = bpf_ktime_get_ns();
	struct wait_start *w;

	/* A wait of prev's still stamped: its switch-in was not reported, or there was no wait. */
	w = pid && tgid_wanted(TP_READ(prev, tgid)) ? bpf_map_lookup_elem(&start, &pid) : NULL;
	if (w) {
		end_untraced_wait(prev, pid, now, w);
		bpf_map_delete_elem(&start, &pid);
	}
	/* Preempted while runnable: waiting again from now. */
	if (prev_state == TASK_RUNNING)
		trace_enqueue(prev);

	pid = TP_READ(next, pid);
	w = bpf_map_lookup_elem(&start, &pid);
	if (!w)
		return 0;
	if (now >= w->ts)
		add_wait(next, pid, now - w->ts);
	bpf_map_delete_elem(&start, &pid);
	return 0;
}

/* (bool preempt, prev, next) before 5.18; (bool preempt, prev, next, unsigned int prev_state) since. */
static __always_inline int on_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	long state = switch_has_state ? (long)(unsigned int)ctx[3] : (long)task_state(prev);

	return handle_switch(prev, next, state);
}

TP_BTF_RAW(sched_wakeup, sched_wakeup, struct task_struct *p)
{
	trace_enqueue(p);
	return 0;
}

TP_BTF_RAW(sched_wakeup_new, sched_wakeup_new, struct task_struct *p)
{
	trace_enqueue(p);
	return 0;
}

TP_BTF_RAW(sched_switch, sched_switch)
{
	return on_switch(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
