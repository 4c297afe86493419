// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* wqlat: workqueue latency, from a work item being queued (workqueue:workqueue_queue_work) to a worker starting
 * to execute it (workqueue_execute_start), as in-kernel log2 histograms: one, or one per workqueue name (-W).
 *
 * The tracepoints are attached as tp_btf where the kernel allows it, else raw_tp, else the classic tracepoints.
 * tp_btf/raw_tp read the workqueue's name from the pool_workqueue argument; the classic tracepoint carries it as
 * a string (since 5.x, a __data_loc field; before, the workqueue_struct pointer). Work items are keyed by their
 * address: a pending work item cannot be queued again until it starts. Histograms are cumulative and never
 * cleared, so reading them at an interval loses no work item. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "timehist.bpf.h"
#include "maps.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "wqlat.h"

/* Nanoseconds per histogram unit: 1 (-N), 1000 (usecs) or 1000000 (-m). */
const volatile __u64 ns_per_unit = 1000;
/* -W: a histogram per workqueue name. */
const volatile bool per_wq = false;
/* -w: only this workqueue. */
const volatile bool filter_wq = false;
const volatile char target_wq[WQ_NAME_LEN] = {};

/* Work items not timed because the start map was full; not counted because the hists map was full. */
__u64 start_map_full = 0;
__u64 hists_full = 0;
/* -w: whether a workqueue has the name (WQ_SEARCH_*), from one walk of the kernel's list of workqueues. */
__u32 wq_search = WQ_SEARCH_PENDING;
__u32 wq_walk_started = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_QUEUED);
	__type(key, __u64);
	__type(value, struct queued);
} start SEC(".maps");

/* One entry without -W; user space sizes it otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct wq_key);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist zero_hist;

/* Make the structs visible to the skeleton's generated `types` module. */
struct hist _hist_type = {};
struct wq_key _wq_key_type = {};

static __always_inline bool wq_wanted(const char *name)
{
	int i;

	if (!filter_wq)
		return true;
	for (i = 0; i < WQ_NAME_LEN; i++) {
		if (name[i] != target_wq[i])
			return false;
		if (!name[i])
			break;
	}
	return true;
}

/* `q` (its name filled in) was queued now as work item `work`. */
static __always_inline void queued(__u64 work, struct queued *q)
{
	if (!wq_wanted(q->wq.name))
		return;
	q->ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start, &work, q, BPF_ANY))
		__sync_fetch_and_add(&start_map_full, 1);
}

static __always_inline void started(__u64 work)
{
	static const struct wq_key all = {};
	struct queued *q;
	struct hist *hist;
	__s64 delta;

	q = bpf_map_lookup_elem(&start, &work);
	if (!q)
		return;
	delta = (__s64)(bpf_ktime_get_ns() - q->ts);
	if (delta >= 0) {
		hist = bpf_map_lookup_or_try_init(&hists, per_wq ? &q->wq : &all, &zero_hist);
		if (hist)
			timehist_add(hist, (__u64)delta, ns_per_unit);
		else
			__sync_fetch_and_add(&hists_full, 1);
	}
	bpf_map_delete_elem(&start, &work);
}

/* One step of the walk of search_wq(): compares the name of the workqueue whose `list` member *pos is with
 * target_wq, 8 bytes at a time, zero-padded (workqueues are allocated zeroed, and target_wq is padded), then moves
 * *pos on. A function of its own (not inlined), so that the walk's loop is one call and one conditional jump back:
 * when clang lays out a larger loop body, its latch can fall through into the loop's head, a back-edge that
 * older kernels refuse ("back-edge from insn X to Y": 5.10 and 6.1 do). */
static __noinline __u32 search_wq_step(struct list_head **pos, struct list_head *start)
{
	struct workqueue_struct *wq = container_of(*pos, struct workqueue_struct, list);
	const volatile __u64 *target = (const volatile __u64 *)target_wq;
	__u64 name[WQ_NAME_LEN / 8] = {}, diff = 0;
	struct list_head *next = NULL;
	int w;

	bpf_probe_read_kernel_str(name, sizeof(name), wq->name);
	/* Without a branch per word: the verifier follows each iteration, and its jumps are limited. */
	for (w = 0; w < WQ_NAME_LEN / 8; w++)
		diff |= name[w] ^ target[w];
	if (!diff)
		return WQ_SEARCH_FOUND;
	if (bpf_probe_read_kernel(&next, sizeof(next), &(*pos)->next) || !next)
		return WQ_SEARCH_UNKNOWN;
	if (next == start)
		return WQ_SEARCH_ABSENT;
	*pos = next;
	return WQ_SEARCH_PENDING;
}

/* -w, on the first work item queued: walks the kernel's list of workqueues (the `list` member links them all, and
 * the list's head, a static variable that is no workqueue, whose "name" is whatever lies before it) from `first`
 * round to it again, looking for target_wq, so that user space can say at once that no workqueue has that name
 * instead of printing an empty histogram. The list is read without its lock: a workqueue created or destroyed
 * meanwhile can make the walk miss its way round, which it then reports as unknown. */
static __always_inline void search_wq(struct workqueue_struct *first)
{
	struct list_head *start = &first->list, *pos = start;
	__u32 result = WQ_SEARCH_PENDING;
	int i;

	wq_walk_started = 1;
	for (i = 0; i < MAX_WALK && result == WQ_SEARCH_PENDING; i++)
		result = search_wq_step(&pos, start);
	wq_search = result == WQ_SEARCH_PENDING ? WQ_SEARCH_UNKNOWN : result;
}

TP_BTF_RAW(workqueue_queue_work, workqueue_queue_work, int req_cpu, struct pool_workqueue *pwq,
	   struct work_struct *work)
{
	struct queued q = {};
	struct workqueue_struct *wq = BPF_CORE_READ(pwq, wq);

	if (filter_wq && !wq_walk_started)
		search_wq(wq);
	bpf_probe_read_kernel_str(q.wq.name, sizeof(q.wq.name), wq->name);
	queued((__u64)work, &q);
	return 0;
}

TP_BTF_RAW(workqueue_execute_start, workqueue_execute_start, struct work_struct *work)
{
	started((__u64)work);
	return 0;
}

/* The classic tracepoint's record before the name became a string (its workqueue field a pointer). */
struct trace_event_raw_workqueue_queue_work___ptr {
	void *workqueue;
} __attribute__((preserve_access_index));

SEC("tracepoint/workqueue/workqueue_queue_work")
int workqueue_queue_work_tp(struct trace_event_raw_workqueue_queue_work *ctx)
{
	struct trace_event_raw_workqueue_queue_work___ptr *old = (void *)ctx;
	struct queued q = {};
	__u32 loc;

	if (bpf_core_field_exists(ctx->__data_loc_workqueue)) {
		loc = ctx->__data_loc_workqueue;
		bpf_probe_read_kernel_str(q.wq.name, sizeof(q.wq.name), (void *)ctx + (loc & 0xffff));
	} else {
		struct workqueue_struct *wq = old->workqueue;

		bpf_probe_read_kernel_str(q.wq.name, sizeof(q.wq.name), wq->name);
	}
	queued((__u64)ctx->work, &q);
	return 0;
}

SEC("tracepoint/workqueue/workqueue_execute_start")
int workqueue_execute_start_tp(struct trace_event_raw_workqueue_execute_start *ctx)
{
	started((__u64)ctx->work);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
