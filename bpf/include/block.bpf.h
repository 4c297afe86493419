// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The block request tracepoints shared by biolatency and biosnoop: block_rq_insert, block_rq_issue and
 * block_rq_complete, as tp_btf programs and as raw_tp programs (user space loads one set or the other, from the
 * attach ladder, by section). BLOCK_RQ_TRACEPOINTS(on_insert, on_issue, on_complete) defines the six programs
 * (three TP_BTF_RAW pairs),
 * block_rq_{insert,issue,complete}_{btf,raw}, calling on_insert(rq), on_issue(rq) and
 * on_complete(rq, nr_bytes) (nr_bytes: the bytes this completion covers; less than the request's remaining
 * __data_len for a partial completion).
 *
 * block_rq_insert and block_rq_issue lost their request_queue argument in 5.11 (and some 5.10 stable kernels);
 * user space reads each one's arity from BTF (2 = with the queue) into insert_has_queue/issue_has_queue,
 * never from the kernel version. request_op(rq) is the request's operation (REQ_OP_*), and request_moves_data(rq)
 * says whether it is a read or a write. */
#ifndef __COREBPF_BLOCK_BPF_H
#define __COREBPF_BLOCK_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "core_fixes.bpf.h"
#include "tp_btf_raw.bpf.h"

const volatile bool insert_has_queue = false;
const volatile bool issue_has_queue = false;

/* Before 5.11: (struct request_queue *q, struct request *rq); since: (struct request *rq). */
static __always_inline struct request *block_rq_arg(__u64 *ctx, bool has_queue)
{
	return (struct request *)(has_queue ? ctx[1] : ctx[0]);
}

/* A request's operation, the low bits of cmd_flags (enum req_op: cmd_flags & REQ_OP_MASK). User space sets the
 * numbers from the kernel's BTF (common::domain::blockdev::RqOps); the defaults are those of every kernel since
 * 4.10. Only reads and writes move data: flushes, discards and write-zeroes carry a range or nothing. */
const volatile __u32 req_op_mask = 0xff;
const volatile __u32 req_op_read = 0;
const volatile __u32 req_op_write = 1;
const volatile __u32 req_op_flush = 2;

static __always_inline __u32 request_op(struct request *rq)
{
	return (__u32)TP_READ(rq, cmd_flags) & req_op_mask;
}

static __always_inline bool request_moves_data(struct request *rq)
{
	__u32 op = request_op(rq);

	return op == req_op_read || op == req_op_write;
}

/* block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes), since 4.x. */
#define BLOCK_RQ_TRACEPOINTS(on_insert, on_issue, on_complete)                                     \
	TP_BTF_RAW(block_rq_insert, block_rq_insert)                                               \
	{                                                                                          \
		return on_insert(block_rq_arg(ctx, insert_has_queue));                             \
	}                                                                                          \
	TP_BTF_RAW(block_rq_issue, block_rq_issue)                                                 \
	{                                                                                          \
		return on_issue(block_rq_arg(ctx, issue_has_queue));                               \
	}                                                                                          \
	TP_BTF_RAW(block_rq_complete, block_rq_complete)                                           \
	{                                                                                          \
		return on_complete((struct request *)ctx[0], (__u32)ctx[2]);                       \
	}

#endif
