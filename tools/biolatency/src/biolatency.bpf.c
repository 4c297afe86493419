// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* biolatency: block I/O latency from issue (or, with -Q, insert) to completion, as in-kernel log2 histograms.
 *
 * The three block_rq_* tracepoints (block.bpf.h, shared with biosnoop) are attached as tp_btf where the kernel
 * allows it, else as raw_tp; user space loads one set or the other and sets their arity from BTF. Histograms
 * are cumulative and never cleared, so reading them at an interval loses no I/O.
 *
 * With -c, an I/O belongs to the cgroup of the task that submitted it. Where the kernel has block_io_start (6.5+,
 * always in the submitter's context) a request is marked there (an entry of `start` with no time yet) and only
 * marked requests are timed: block_rq_issue runs in whichever task dispatches the queue, often another cgroup's.
 * Without it, the task at issue (or insert, -Q) decides, as libbpf-tools' -c does. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "bits.bpf.h"
#include "maps.bpf.h"
#include "block.bpf.h"
#include "biolatency.h"

CGROUP_FILTER;
const volatile bool filter_dev = false;
const volatile __u32 target_dev = 0;
const volatile bool per_disk = false;
const volatile bool per_flags = false;
const volatile bool queued = false;
const volatile bool millis = false;
/* -c with block_io_start attached: only requests marked there are the cgroup's. */
const volatile bool cgroup_at_start = false;

/* I/Os not timed because the start map was full. */
__u64 start_map_full = 0;

/* Preallocated, as libbpf-tools' is (same size): an entry allocated at each issue and freed at each completion
 * cost every I/O more than the map's memory saves (bench figure 24). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__type(key, struct request *);
	__type(value, __u64);
} start SEC(".maps");

/* One entry without -D/-F; user space sizes it for the disks and flag sets it may see. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct hist_key);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist zero_hist;

/* Makes the struct types visible to the skeleton's generated `types` module. */
struct hist_key _hist_key_type = {};
struct hist _hist_type = {};

/* The request is one to time: from the -c cgroup (marked at block_io_start, or the current task's), if any. */
static __always_inline bool cgroup_owns(struct request *rq)
{
	if (!filter_cgroup)
		return true;
	if (cgroup_at_start)
		return bpf_map_lookup_elem(&start, PTR_KEY(rq)) != NULL;
	return cgroup_wanted();
}

static __always_inline int trace_start(struct request *rq, bool is_issue)
{
	__u64 ts;

	if (!cgroup_owns(rq))
		return 0;
	/* With -Q, a request that went through a scheduler was already timed at insert. */
	if (is_issue && queued && TP_READ(rq, q, elevator))
		return 0;
	if (filter_dev && request_dev(rq) != target_dev)
		return 0;

	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start, PTR_KEY(rq), &ts, BPF_ANY))
		__sync_fetch_and_add(&start_map_full, 1);
	return 0;
}

static __always_inline int trace_done(struct request *rq)
{
	struct hist_key key = {};
	struct hist *hist;
	__u64 *tsp, now = bpf_ktime_get_ns();
	__s64 delta;
	__u64 slot;

	tsp = bpf_map_lookup_elem(&start, PTR_KEY(rq));
	if (!tsp)
		return 0;
	if (!*tsp)
		goto cleanup; /* marked by -c, never issued */
	delta = (__s64)(now - *tsp);
	if (delta < 0)
		goto cleanup;

	if (per_disk)
		key.dev = request_dev(rq);
	if (per_flags)
		key.cmd_flags = TP_READ(rq, cmd_flags);

	hist = bpf_map_lookup_or_try_init(&hists, &key, &zero_hist);
	if (!hist)
		goto cleanup;

	slot = log2l(millis ? (__u64)delta / 1000000U : (__u64)delta / 1000U);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->count, 1);
	__sync_fetch_and_add(&hist->sum_ns, delta);

cleanup:
	bpf_map_delete_elem(&start, PTR_KEY(rq));
	return 0;
}

static __always_inline int on_insert(struct request *rq)
{
	return trace_start(rq, false);
}

static __always_inline int on_issue(struct request *rq)
{
	return trace_start(rq, true);
}

static __always_inline int on_complete(struct request *rq, __u32 nr_bytes)
{
	return trace_done(rq);
}

BLOCK_RQ_TRACEPOINTS(on_insert, on_issue, on_complete)

/* -c: a new request, in its submitter's context. The cgroup's are marked (time 0: not issued yet); an entry left
 * for a reused pointer by a request that never completed goes. */
TP_BTF_RAW(block_io_start, block_io_start, struct request *rq)
{
	__u64 marked = 0;

	if (cgroup_wanted()) {
		if (bpf_map_update_elem(&start, PTR_KEY(rq), &marked, BPF_ANY))
			__sync_fetch_and_add(&start_map_full, 1);
	} else {
		bpf_map_delete_elem(&start, PTR_KEY(rq));
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
