// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* bitesize: a log2 histogram of the size of each block I/O request issued to a device, in KiB, per process name.
 *
 * The name is the request's submitter (block_issuer.bpf.h: noted at block_io_start, else at block_rq_insert and
 * then forgotten at block_rq_complete), not whichever task happens to run the queue at block_rq_issue, which is
 * what BCC and libbpf-tools name: on a busy disk theirs credit one process with another's requests. A request counts
 * once, at its first issue (theirs count a requeued request at each issue). Every tracepoint is a tp_btf program,
 * else a raw_tp one (block.bpf.h's argument helper handles the request_queue argument kernels before 5.11
 * passed first;
 * user space reads the arity from BTF). Only reads and writes are counted (block.bpf.h's request_op, with the
 * operations' numbers user space reads from BTF): a discard or write-zeroes names a range it does not transfer,
 * and a flush has no size. The size is the request's __data_len at issue (the tracepoint's `bytes`);
 * -d compares the request's device, -c the submitter's name; with --container-label the submitter's cgroup is
 * noted with it (block_issuer_cgroup) and the key holds it too. Histograms are cumulative and never deleted; user
 * space prints the difference between two reads. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "bits.bpf.h"
#include "block.bpf.h"
#include "block_issuer.bpf.h"
#include "maps.bpf.h"
#include "bitesize.h"

const volatile bool filter_dev = false;
const volatile __u32 target_dev = 0;
const volatile bool filter_comm = false;
const volatile char target_comm[NAME_LEN] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NAMES);
	__type(key, struct name_key);
	__type(value, struct hist);
} hists SEC(".maps");

/* Requests not counted because `hists` was full (user space reports them). */
__u64 hists_full = 0;

static const struct hist empty_hist;

static __always_inline bool comm_wanted(const char *comm)
{
	if (!filter_comm)
		return true;
	for (int i = 0; i < NAME_LEN; i++) {
		if (comm[i] != target_comm[i])
			return false;
		if (!comm[i])
			break;
	}
	return true;
}

static __always_inline int count_request(struct request *rq)
{
	struct block_issuer issuer;
	struct name_key key = {};
	struct hist *hist;
	__u64 slot, bytes;

	/* A flush, discard or write-zeroes moves no data: its size is no I/O size. */
	if (!request_moves_data(rq))
		return 0;
	if (!block_issuer_first_issue(rq, &issuer))
		return 0;
	if (filter_dev && request_dev(rq) != target_dev)
		return 0;
	if (!comm_wanted(issuer.comm))
		return 0;
	__builtin_memcpy(key.comm, issuer.comm, sizeof(key.comm));
	key.cgroup_id = issuer.cgroup_id; /* 0 unless --container-label (block_issuer_cgroup) */
	hist = bpf_map_lookup_or_try_init(&hists, &key, &empty_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		return 0;
	}
	bytes = TP_READ(rq, __data_len);
	slot = log2l(bytes / 1024);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->count, 1);
	/* The shared struct's sum_ns field holds bytes here: the exact total that --prometheus exports. */
	__sync_fetch_and_add(&hist->sum_ns, bytes);
	return 0;
}

BLOCK_ISSUER_PROGRAMS

TP_BTF_RAW(block_rq_issue, block_rq_issue)
{
	return count_request(block_rq_arg(ctx, issue_has_queue));
}

/* block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes). */
TP_BTF_RAW(block_rq_complete, block_rq_complete)
{
	block_issuer_forget((struct request *)ctx[0], (__u32)ctx[2]);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
