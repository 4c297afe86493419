// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* biosnoop: one record per block I/O request, with the process that issued it, from the block tracepoints.
 *
 * A request is first seen in the issuing task's context: at block_io_start (6.5+, in the submitter's
 * blk_account_io_start), else at block_rq_insert (into the scheduler, or the plug flush of the submitter), else at
 * block_rq_issue. There the cgroup (-c) and disk (-d) filters run, and the PID and comm (or that the request is
 * filtered out) are kept by request pointer; a later insert or issue (from a kblockd worker, another task that
 * runs the queue, or a requeue) keeps them. block_rq_issue stamps the
 * issue time, sector, size and flags; block_rq_complete (the last one, for partial completions) sends the record
 * through a ring buffer and forgets the request, as block_rq_merge does for a request merged into another. A
 * flush request (REQ_OP_FLUSH) is made by the block layer itself, never seen at block_io_start: it is named after
 * the task current at its first issue, as biotop does.
 * block_rq_* are shared with biolatency (block.bpf.h); every tracepoint is tp_btf where the kernel allows it,
 * else raw_tp. Failed reservations are counted in `lost`, requests not followed (map full) in `reqs_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "block.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "biosnoop.h"

CGROUP_FILTER;
const volatile bool filter_dev = false;
const volatile __u32 target_dev = 0;
const volatile __u64 min_ns = 0;
/* The kernel has block_io_start, which sees every request first: one not seen there began before we attached. */
const volatile bool have_io_start = false;

__u64 lost = 0;
__u64 reqs_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct req_info {
	__u64 start_ns;
	__u64 issue_ns;
	__u64 sector;
	__u64 cmd_flags;
	__u32 bytes;
	__u32 pid;
	__u32 dev;
	__u32 filtered;		/* seen first outside the -c cgroup or -d disk: followed, never reported */
	__u32 name_at_issue;	/* a flush request the block layer made: named after the task that issues it */
	char comm[TASK_COMM_LEN];
};

/* Entries are allocated as requests start, not up front: the map costs what is in flight. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct request *);
	__type(value, struct req_info);
} reqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* Starts following rq in the current task's context (the issuer). A request the filters reject is followed too,
 * marked filtered, so that another task dispatching it later (a scheduler runs every queued request of the queue
 * from whichever task kicks it) does not take it for its own. Where block_io_start exists, a request first seen
 * at insert or issue began before we attached: its issuer is unknown (in_issuer false). NULL if the map is full. */
static __always_inline struct req_info *begin(struct request *rq, bool in_issuer)
{
	struct req_info r = {};

	r.dev = request_dev(rq);
	r.start_ns = bpf_ktime_get_ns();
	if (in_issuer) {
		r.filtered = !cgroup_wanted();
		r.pid = bpf_get_current_pid_tgid() >> 32;
		bpf_get_current_comm(&r.comm, sizeof(r.comm));
	} else if (request_op(rq) == req_op_flush) {
		/* A flush request is the block layer's own (made for the REQ_PREFLUSH of whichever writes asked, which
		 * complete without it): no block_io_start ever sees it, and it is named after the task that issues it,
		 * as biotop names it. */
		r.name_at_issue = 1;
	} else {
		/* Issued before we attached, by a task we do not know: "?" as BCC prints. */
		r.filtered = filter_cgroup;
		r.comm[0] = '?';
	}
	if (filter_dev && r.dev != target_dev)
		r.filtered = true;
	if (bpf_map_update_elem(&reqs, PTR_KEY(rq), &r, BPF_ANY)) {
		__sync_fetch_and_add(&reqs_full, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(&reqs, PTR_KEY(rq));
}

/* block_io_start: a new request, always in the submitter's context (a stale entry for a reused pointer goes). */
static __always_inline int on_start(struct request *rq)
{
	if (!begin(rq, true))
		bpf_map_delete_elem(&reqs, PTR_KEY(rq));
	return 0;
}

static __always_inline int on_insert(struct request *rq)
{
	if (!bpf_map_lookup_elem(&reqs, PTR_KEY(rq)))
		begin(rq, !have_io_start);
	return 0;
}

static __always_inline int on_issue(struct request *rq)
{
	struct req_info *r = bpf_map_lookup_elem(&reqs, PTR_KEY(rq));

	if (!r)
		r = begin(rq, !have_io_start);
	if (r && r->name_at_issue) {
		r->name_at_issue = 0;
		r->filtered = r->filtered || !cgroup_wanted();
		r->pid = bpf_get_current_pid_tgid() >> 32;
		bpf_get_current_comm(&r->comm, sizeof(r->comm));
	}
	if (!r || r->filtered)
		return 0;
	r->issue_ns = bpf_ktime_get_ns();
	r->sector = BPF_CORE_READ(rq, __sector);
	r->bytes = BPF_CORE_READ(rq, __data_len);
	r->cmd_flags = BPF_CORE_READ(rq, cmd_flags);
	return 0;
}

static __always_inline int on_complete(struct request *rq, __u32 nr_bytes)
{
	struct req_info *r = bpf_map_lookup_elem(&reqs, PTR_KEY(rq));
	struct event *e;
	__u64 now;

	if (!r)
		return 0;
	/* A partial completion: the request goes on (blk_update_request traces each part). */
	if (nr_bytes < BPF_CORE_READ(rq, __data_len))
		return 0;
	now = bpf_ktime_get_ns();
	if (!r->issue_ns || now - r->issue_ns < min_ns)
		goto cleanup;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		goto cleanup;
	e->ts_ns = now;
	e->latency_ns = now - r->issue_ns;
	e->queue_ns = r->issue_ns - r->start_ns;
	e->sector = r->sector;
	e->cmd_flags = r->cmd_flags;
	e->bytes = r->bytes;
	e->pid = r->pid;
	e->dev = r->dev;
	e->_pad = 0;
	__builtin_memcpy(e->comm, r->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
cleanup:
	bpf_map_delete_elem(&reqs, PTR_KEY(rq));
	return 0;
}

BLOCK_RQ_TRACEPOINTS(on_insert, on_issue, on_complete)

TP_BTF_RAW(block_io_start, block_io_start, struct request *rq)
{
	return on_start(rq);
}

/* The request merged into another is freed without a completion. */
TP_BTF_RAW(block_rq_merge, block_rq_merge, struct request *rq)
{
	bpf_map_delete_elem(&reqs, PTR_KEY(rq));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
