// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* cpudist: the time tasks spend on a CPU per slice (from being switched in to being switched out), or with -O
 * off it (from switched out to switched in again), as in-kernel log2 histograms, from sched_switch alone.
 *
 * sched_switch is attached as tp_btf where the kernel allows it, else as raw_tp; user space loads one or the
 * other. Its task arguments (prev, next) are the same on every kernel. Histograms are cumulative and never
 * cleared, so reading them at an interval loses no slice. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "timehist.bpf.h"
#include "maps.bpf.h"
#include "untraced_switch.bpf.h"
#include "per.h"
#include "cpudist.h"

/* What the histograms are kept per (per.h: PER_ALL, PER_PROCESS for -P, PER_THREAD for -L). */
const volatile __u32 per = 0;
const volatile bool millis = false;
const volatile bool offcpu = false;
const volatile bool include_idle = false;

/* Slices not timed because the start map was full, or not counted because the hists map was full. */
__u64 start_map_full = 0;
__u64 hists_full = 0;
/* Slices whose start sched_switch did not report (untraced_switch.bpf.h), timed from the scheduler's accounting at
 * the task's next switch-out (recovered_slices), or not (missed_slices: a task outside the fair class). */
__u64 recovered_slices = 0;
__u64 missed_slices = 0;
/* The time of the first switch the program saw: a task on a CPU since before then had no switch-in to report. */
__u64 traced_from = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct start_key);
	__type(value, __u64);
} start SEC(".maps");

/* One entry without -P/-L; user space sizes it otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist zero_hist;

/* Makes the structs visible to the skeleton's generated `types` module. */
struct hist _hist_type = {};
struct start_key _start_key_type = {};

/* The task's start key, or false if the task is not traced. */
static __always_inline bool task_key(struct task_struct *t, __u32 cpu, struct start_key *key)
{
	__u32 pid = TP_READ(t, pid);

	if (!tgid_wanted(TP_READ(t, tgid)))
		return false;
	if (!pid && !include_idle)
		return false;
	key->pid = pid;
	key->cpu = pid ? 0xffffffff : cpu;
	return true;
}

static __always_inline void store_start(struct task_struct *t, __u32 cpu, __u64 ts)
{
	struct start_key key;

	if (!task_key(t, cpu, &key))
		return;
	if (bpf_map_update_elem(&start, &key, &ts, BPF_ANY))
		__sync_fetch_and_add(&start_map_full, 1);
}

/* Adds a slice of `delta` ns of task `t` (start key `key`) to its histogram. */
static __always_inline void add_slice(struct task_struct *t, struct start_key *key, __u64 delta)
{
	struct hist *hist;
	__u32 hkey = 0;

	if (per == PER_PROCESS)
		hkey = TP_READ(t, tgid);
	else if (per == PER_THREAD)
		hkey = key->pid;
	hist = bpf_map_lookup_or_try_init(&hists, &hkey, &zero_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		return;
	}
	if (per != PER_ALL && !hist->comm[0])
		bpf_probe_read_kernel_str(&hist->comm, sizeof(hist->comm), t->comm);
	timehist_add(hist, delta, millis ? 1000000 : 1000);
}

/* Ends the slice of `t` that started at its stamp, if it has one, at `ts`. False if `t` is traced but has none. */
static __always_inline bool update_hist(struct task_struct *t, __u32 cpu, __u64 ts)
{
	struct start_key key;
	__u64 *tsp;

	if (!task_key(t, cpu, &key))
		return true;
	tsp = bpf_map_lookup_elem(&start, &key);
	if (!tsp)
		return false;
	if (ts >= *tsp)
		add_slice(t, &key, ts - *tsp);
	bpf_map_delete_elem(&start, &key);
	return true;
}

/* `t` is being switched out at `ts` (sched_switch's prev) and its state says its last switch-in was not reported:
 * on CPU without a stamp (on-CPU slices), or still stamped from its last switch-out (-O). It came on `ran` ns ago
 * (untraced_switch.bpf.h): that ends the off-CPU slice from the stamp, or is the on-CPU slice itself, if it began
 * after tracing did (the idle task, keyed per CPU, is left alone). */
static __always_inline void untraced_switch_in(struct task_struct *t, __u32 cpu, __u64 ts, __u64 *stamp)
{
	struct start_key key;
	__u64 ran, since;

	if (!task_key(t, cpu, &key) || !key.pid)
		return;
	ran = ran_since_picked(t);
	if (!ran) {
		if (stamp)
			__sync_fetch_and_add(&missed_slices, 1);
		return;
	}
	since = ts > ran ? ts - ran : 0;
	if (stamp ? since < *stamp : since < traced_from)
		return;
	__sync_fetch_and_add(&recovered_slices, 1);
	add_slice(t, &key, stamp ? since - *stamp : ran);
}

/* On-CPU mode: the slice of `prev` ends now, from its switch-in stamp or, if sched_switch did not report that
 * switch-in, from the scheduler's accounting. */
static __always_inline void end_on_cpu_slice(struct task_struct *prev, __u32 cpu, __u64 ts)
{
	if (!update_hist(prev, cpu, ts))
		untraced_switch_in(prev, cpu, ts, NULL);
}

/* -O: `prev` goes off CPU now; a stamp of its last switch-out still there means sched_switch did not report the
 * switch-in that ended that off-CPU slice. */
static __always_inline void start_off_cpu_slice(struct task_struct *prev, __u32 cpu, __u64 ts)
{
	struct start_key key;
	__u64 *tsp;

	if (task_key(prev, cpu, &key) && key.pid && (tsp = bpf_map_lookup_elem(&start, &key)))
		untraced_switch_in(prev, cpu, ts, tsp);
	store_start(prev, cpu, ts);
}

/* (bool preempt, prev, next[, prev_state]): prev and next are the same arguments on every kernel. */
static __always_inline int on_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 ts = bpf_ktime_get_ns();

	if (!traced_from)
		traced_from = ts;
	if (offcpu) {
		start_off_cpu_slice(prev, cpu, ts);
		update_hist(next, cpu, ts);
	} else {
		end_on_cpu_slice(prev, cpu, ts);
		store_start(next, cpu, ts);
	}
	return 0;
}

TP_BTF_RAW(sched_switch, sched_switch)
{
	return on_switch(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
