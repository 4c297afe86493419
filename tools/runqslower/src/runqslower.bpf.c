// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* runqslower: each scheduling delay above a threshold, from a task becoming runnable (sched_wakeup,
 * sched_wakeup_new, or preempted while runnable at sched_switch) to the sched_switch that puts it on a CPU, sent
 * as one record with the task that left the CPU for it.
 *
 * Three attach paths hold the same logic. tp_btf (else raw_tp) programs get the task pointers. The classic
 * tracepoints carry only IDs, names and prev_state, not the process of the task switched in: there a wait above
 * the threshold is kept (the pending map) until the task leaves the CPU again, as the current task, whose
 * process is known then (a task that exits leaves the CPU a last time too), and is sent then. The thread (-t)
 * and name (-c) filters run when a wait starts; the process filter (-p) too where the task is known. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "core_fixes.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "runqslower.h"

#define TASK_RUNNING 0
/* The classic sched_switch's prev_state: the task's state bits (0: runnable), or'ed with TASK_REPORT_MAX (0x100)
 * when it was preempted. Either way a task whose low byte is 0 is still runnable. */
#define TP_STATE_MASK 0xff

/* Report waits of more than min_us microseconds (0: every wait). */
const volatile __u64 min_us = 10000;
/* -c: only tasks whose name starts with target_comm. */
const volatile bool filter_comm = false;
const volatile char target_comm[TASK_COMM_LEN] = {};
const volatile bool switch_has_state = false;

__u64 lost = 0;
/* Waits not timed because the start map was full. */
__u64 start_map_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAITING);
	__type(key, __u32);
	__type(value, __u64);
} start SEC(".maps");

/* Classic tracepoints: records waiting for their task's process, by thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAITING);
	__type(key, __u32);
	__type(value, struct event);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline bool comm_wanted(const char *comm)
{
	int i;

	if (!filter_comm)
		return true;
	for (i = 0; i < TASK_COMM_LEN && target_comm[i]; i++)
		if (comm[i] != target_comm[i])
			return false;
	return true;
}

/* Thread `pid`, of process `tgid` (0: unknown), named `comm`, waits from now on. (Task fields are read with
 * TP_READ: direct loads in the tp_btf programs, probe reads in the raw_tp ones; tp_btf_raw.bpf.h.) */
static __always_inline void wait_starts(__u32 tgid, __u32 pid, const char *comm)
{
	__u64 ts;

	if (!pid || !tid_wanted(pid) || !comm_wanted(comm))
		return;
	if (tgid && !tgid_wanted(tgid))
		return;
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start, &pid, &ts, BPF_ANY))
		__sync_fetch_and_add(&start_map_full, 1);
}

static __always_inline void task_wait_starts(struct task_struct *p)
{
	char comm[TASK_COMM_LEN] = {};

	if (filter_comm)
		bpf_probe_read_kernel_str(comm, sizeof(comm), p->comm);
	wait_starts(TP_READ(p, tgid), TP_READ(p, pid), comm);
}

/* Thread `pid` runs: the length of its wait if it was timed and is above the threshold, else 0. */
static __always_inline __u64 wait_ends(__u32 pid)
{
	__u64 *tsp, delta;

	tsp = bpf_map_lookup_elem(&start, &pid);
	if (!tsp)
		return 0;
	delta = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&start, &pid);
	if ((__s64)delta <= 0)
		return 0;
	if (min_us && delta / 1000 <= min_us)
		return 0;
	return delta;
}

TP_BTF_RAW(sched_wakeup, sched_wakeup, struct task_struct *p)
{
	task_wait_starts(p);
	return 0;
}

TP_BTF_RAW(sched_wakeup_new, sched_wakeup_new, struct task_struct *p)
{
	task_wait_starts(p);
	return 0;
}

/* (bool preempt, prev, next) before 5.18; (bool preempt, prev, next, unsigned int prev_state) since. */
TP_BTF_RAW(sched_switch, sched_switch)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	long state = switch_has_state ? (long)(unsigned int)ctx[3] : (long)task_state(prev);
	__u32 prev_pid = TP_READ(prev, pid), pid, tgid;
	struct event *e;
	__u64 delta;

	/* Preempted, or switched out while still runnable: waiting again from now. */
	if (preempt || state == TASK_RUNNING)
		task_wait_starts(prev);

	pid = TP_READ(next, pid);
	delta = wait_ends(pid);
	if (!delta)
		return 0;
	tgid = TP_READ(next, tgid);
	if (!tgid_wanted(tgid))
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->delta_ns = delta;
	e->pid = pid;
	e->tgid = tgid;
	e->prev_pid = prev_pid;
	e->cpu = bpf_get_smp_processor_id();
	bpf_probe_read_kernel_str(e->task, sizeof(e->task), next->comm);
	bpf_probe_read_kernel_str(e->prev_task, sizeof(e->prev_task), prev->comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* The classic tracepoints' records (their layout has not changed since 4.x). */
struct sched_wakeup_tp {
	__u64 common;
	char comm[TASK_COMM_LEN];
	__s32 pid;
	__s32 prio;
};

struct sched_switch_tp {
	__u64 common;
	char prev_comm[TASK_COMM_LEN];
	__s32 prev_pid;
	__s32 prev_prio;
	long prev_state;
	char next_comm[TASK_COMM_LEN];
	__s32 next_pid;
	__s32 next_prio;
};

static __always_inline int classic_wakeup(struct sched_wakeup_tp *ctx)
{
	char comm[TASK_COMM_LEN];

	__builtin_memcpy(comm, ctx->comm, sizeof(comm));
	wait_starts(0, ctx->pid, comm);
	return 0;
}

SEC("tracepoint/sched/sched_wakeup")
int sched_wakeup_tp(struct sched_wakeup_tp *ctx)
{
	return classic_wakeup(ctx);
}

SEC("tracepoint/sched/sched_wakeup_new")
int sched_wakeup_new_tp(struct sched_wakeup_tp *ctx)
{
	return classic_wakeup(ctx);
}

SEC("tracepoint/sched/sched_switch")
int sched_switch_tp(struct sched_switch_tp *ctx)
{
	__u32 prev_pid = ctx->prev_pid, next_pid = ctx->next_pid;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	char comm[TASK_COMM_LEN];
	struct event *e, *wait;
	__u64 delta;

	/* The task leaving the CPU is the current one: its process is known now. Its last wait, if pending, is
	 * sent. */
	wait = bpf_map_lookup_elem(&pending, &prev_pid);
	if (wait) {
		if (tgid_wanted(tgid)) {
			wait->tgid = tgid;
			ringbuf_output(&events, wait, sizeof(*wait), &lost);
		}
		bpf_map_delete_elem(&pending, &prev_pid);
	}
	if (!(ctx->prev_state & TP_STATE_MASK)) {
		__builtin_memcpy(comm, ctx->prev_comm, sizeof(comm));
		wait_starts(tgid, prev_pid, comm);
	}

	delta = wait_ends(next_pid);
	if (!delta)
		return 0;
	e = bpf_map_lookup_elem(&pending, &next_pid);
	if (!e) {
		/* A new entry: zeroed by the update, then filled in place. */
		static const struct event zero_event;

		if (bpf_map_update_elem(&pending, &next_pid, &zero_event, BPF_ANY)) {
			__sync_fetch_and_add(&lost, 1);
			return 0;
		}
		e = bpf_map_lookup_elem(&pending, &next_pid);
		if (!e)
			return 0;
	}
	e->delta_ns = delta;
	e->pid = next_pid;
	e->tgid = 0;
	e->prev_pid = prev_pid;
	e->cpu = bpf_get_smp_processor_id();
	__builtin_memcpy(e->task, ctx->next_comm, sizeof(e->task));
	__builtin_memcpy(e->prev_task, ctx->prev_comm, sizeof(e->prev_task));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
