// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* biotop: block I/O by process, like top: for each submitting process, direction and disk, the requests
 * completed, their bytes and their time from issue to completion.
 *
 * The process is the request's submitter (block_issuer.bpf.h: noted at block_io_start, else at block_rq_insert),
 * not whichever task runs the queue at issue. At block_rq_issue (first issue only: a requeued request counts once)
 * the request's size, operation (block.bpf.h's request_op: user space names it), disk and the time go into `starts`, by request pointer; at its last
 * block_rq_complete (the completion that covers what is left of it) the row of `rows` adds one I/O, the bytes and
 * the time. Rows are cumulative and never deleted by this side, so nothing is lost between two reads; user space
 * prints differences (and drops the rows of processes gone). -p compares the submitter's PID at issue. Every
 * tracepoint is a tp_btf program, else a raw_tp one (block.bpf.h's argument helper handles the request_queue
 * argument kernels before 5.11 passed first; user space reads the arity from BTF). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "block.bpf.h"
#include "block_issuer.bpf.h"
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "biotop.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct request *);
	__type(value, struct io_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ROWS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct io_key);
	__type(value, struct io_stat);
} rows SEC(".maps");

/* Requests not counted because a map was full (user space reports them). */
__u64 starts_full = 0;
__u64 rows_full = 0;

/* Makes the structs visible to the skeleton's generated `types` module. */
struct io_key _io_key_type = {};
struct io_stat _io_stat_type = {};

static const struct io_stat empty_stat;

static __always_inline int request_issued(struct request *rq)
{
	struct block_issuer issuer;
	struct io_start start = {};
	__u32 dev;

	if (!block_issuer_first_issue(rq, &issuer))
		return 0;
	if (!tgid_wanted(issuer.pid))
		return 0;
	dev = request_dev(rq);
	start.ts = bpf_ktime_get_ns();
	start.bytes = BPF_CORE_READ(rq, __data_len);
	start.key.pid = issuer.pid;
	start.key.op = request_op(rq);
	start.key.major = dev >> 20;
	start.key.minor = dev & ((1U << 20) - 1);
	__builtin_memcpy(start.key.comm, issuer.comm, sizeof(start.key.comm));
	if (bpf_map_update_elem(&starts, PTR_KEY(rq), &start, BPF_ANY))
		__sync_fetch_and_add(&starts_full, 1);
	return 0;
}

static __always_inline int request_completed(struct request *rq, __u32 nr_bytes)
{
	struct io_start *start;
	struct io_stat *stat;

	block_issuer_forget(rq, nr_bytes);
	/* A partial completion: the request goes on until one covers what is left of it. */
	if (nr_bytes < BPF_CORE_READ(rq, __data_len))
		return 0;
	start = bpf_map_lookup_elem(&starts, PTR_KEY(rq));
	if (!start)
		return 0;
	stat = bpf_map_lookup_or_try_init(&rows, &start->key, &empty_stat);
	if (stat) {
		__sync_fetch_and_add(&stat->bytes, start->bytes);
		__sync_fetch_and_add(&stat->ns, bpf_ktime_get_ns() - start->ts);
		__sync_fetch_and_add(&stat->io, 1);
	} else {
		__sync_fetch_and_add(&rows_full, 1);
	}
	bpf_map_delete_elem(&starts, PTR_KEY(rq));
	return 0;
}

BLOCK_ISSUER_PROGRAMS

TP_BTF_RAW(block_rq_issue, block_rq_issue)
{
	return request_issued(block_rq_arg(ctx, issue_has_queue));
}

/* block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes). */
TP_BTF_RAW(block_rq_complete, block_rq_complete)
{
	return request_completed((struct request *)ctx[0], (__u32)ctx[2]);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
