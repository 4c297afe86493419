// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* biostacks: the latency of block I/O requests, as a log2 histogram per (task, disk, kernel stack), the stack
 * being the one the task was running when the request was started.
 *
 * A request is noted where its submitter is current: block_io_start (6.5+: blk_account_io_start, called while
 * the bio becomes a request, in the submitting task; a reused request pointer replaces its stale note), else
 * block_rq_insert (a request that goes through a scheduler or a plug; a requeue inserts it again from a worker, so
 * the first note stands). A request with no note when it is issued (one that bypassed the insert before 6.5, in
 * which case the submitter usually issues it itself, or one started before tracing began) is noted at
 * block_rq_issue from the task that issues it. The note keeps the time, the task, the disk and the stack id
 * (bpf_get_stackid on the tracepoint's context). At block_rq_complete, after the completion that covers what is
 * left of the request, the time since the note goes into the key's histogram and the note is forgotten. All
 * tracepoints are tp_btf programs, else raw_tp ones (tp_btf_raw.bpf.h); block.bpf.h's argument helper handles the
 * request_queue argument older kernels passed first, user space reads the arity from BTF. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "bits.bpf.h"
#include "block.bpf.h"
#include "maps.bpf.h"
#include "stacks.bpf.h"
#include "biostacks.h"

const volatile bool filter_dev = false;
const volatile __u32 target_dev = 0;
const volatile bool in_ms = false;

struct rq_note {
	__u64 start_ns;
	struct stack_key key;
};

/* Requests started and not yet completed. An LRU: a noted request that never completes here (merged into
 * another) ages out instead of filling it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct request *);
	__type(value, struct rq_note);
} notes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, struct stack_key);
	__type(value, struct hist);
} hists SEC(".maps");

STACK_TRACE_MAP(stacks);

/* Requests not counted because `hists` was full (user space reports them). */
__u64 hists_full = 0;

static const struct hist empty_hist;

static __always_inline int note(void *ctx, struct request *rq, __u64 flags)
{
	struct rq_note n = {};

	n.key.dev = request_dev(rq);
	if (filter_dev && n.key.dev != target_dev)
		return 0;
	n.start_ns = bpf_ktime_get_ns();
	n.key.pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(n.key.comm, sizeof(n.key.comm));
	n.key.kern_stack_id = bpf_get_stackid(ctx, &stacks, 0);
	bpf_map_update_elem(&notes, PTR_KEY(rq), &n, flags);
	return 0;
}

TP_BTF_RAW(block_io_start, block_io_start, struct request *rq)
{
	return note(ctx, rq, BPF_ANY);
}

TP_BTF_RAW(block_rq_insert, block_rq_insert)
{
	return note(ctx, block_rq_arg(ctx, insert_has_queue), BPF_NOEXIST);
}

TP_BTF_RAW(block_rq_issue, block_rq_issue)
{
	struct request *rq = block_rq_arg(ctx, issue_has_queue);

	if (bpf_map_lookup_elem(&notes, PTR_KEY(rq)))
		return 0;
	return note(ctx, rq, BPF_NOEXIST);
}

/* block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes). */
TP_BTF_RAW(block_rq_complete, block_rq_complete)
{
	struct request *rq = (struct request *)ctx[0];
	__u32 nr_bytes = (__u32)ctx[2];
	struct rq_note *n;
	struct hist *hist;
	__u64 delta, slot;

	if (nr_bytes < BPF_CORE_READ(rq, __data_len))
		return 0; /* a partial completion: the rest is still in flight */
	n = bpf_map_lookup_elem(&notes, PTR_KEY(rq));
	if (!n)
		return 0;
	delta = bpf_ktime_get_ns() - n->start_ns;
	if ((__s64)delta < 0)
		goto forget;
	hist = bpf_map_lookup_or_try_init(&hists, &n->key, &empty_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		goto forget;
	}
	slot = log2l(in_ms ? delta / 1000000 : delta / 1000);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->count, 1);
	__sync_fetch_and_add(&hist->sum_ns, delta);
forget:
	bpf_map_delete_elem(&notes, PTR_KEY(rq));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
