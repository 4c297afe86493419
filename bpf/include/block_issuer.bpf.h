// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The task that submitted a block request, which is not always the task that issues it to the device: a busy
 * I/O scheduler dispatches every queued request from whichever task runs the queue (or a kblockd worker), so
 * the current task at block_rq_issue can be anyone. BCC's tools name that current task; attributing each request
 * to its submitter is what a per-process figure needs.
 *
 * block_issuer_note(rq, fresh) keeps the current task's PID and name (and cgroup, if asked) by request pointer;
 * call it where the submitter is current: block_io_start (6.5+, blk_account_io_start in the submitter; fresh: a
 * reused pointer's stale entry is replaced), else block_rq_insert (not fresh: a requeue inserts again from a
 * worker, and the first note stands). At block_rq_issue,
 * block_issuer_first_issue(rq, &issuer) gives what was noted, or the current task when nothing was (a request
 * submitted before tracing began, or one that bypassed both points), and says whether this is the request's first
 * issue: a request the device could not take is requeued and issued again (by whoever runs the queue then), and
 * a tool that counts requests counts it once. Notes taken at block_io_start are kept: blk-mq reuses a fixed set
 * of request structs per queue, and the next block_io_start of a struct writes its note in place (a lookup and a
 * few stores, where an update or a delete at completion costs about as much as the rest of the programs together,
 * bench figure 24); user space makes the map an LRU then, so the notes of request structs freed for good (a queue
 * reconfigured, a device removed) make way for new ones. Notes taken at block_rq_insert (block_issuer_at_insert)
 * are not fresh, so block_issuer_forget(rq, nr_bytes) at block_rq_complete forgets each after its last completion,
 * in a preallocated hash; with block_io_start it does nothing. User space sets all this up (common's
 * SubmitterNotes). Where no note is found, a request is named after the task that issues it, as BCC does.
 * BLOCK_ISSUER_PROGRAMS declares the two noting programs (tp_btf and raw_tp each); user space loads block_io_start's where the kernel has it, else block_rq_insert's. */
#ifndef __COREBPF_BLOCK_ISSUER_BPF_H
#define __COREBPF_BLOCK_ISSUER_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "block.bpf.h"
#include "tp_btf_raw.bpf.h"

#ifndef BLOCK_ISSUERS_MAX
#define BLOCK_ISSUERS_MAX 16384
#endif

struct block_issuer {
	__u32 pid;
	__u32 issued;		/* set at the first issue */
	char comm[16];
	__u64 cgroup_id;	/* the submitter's cgroup v2 ID with block_issuer_cgroup, else 0 */
};

/* Whether the notes hold the submitter's cgroup (bitesize's --container-label); 0 in them without. */
const volatile bool block_issuer_cgroup = false;
/* Set by user space when the notes are taken at block_rq_insert (kernels before block_io_start). */
const volatile bool block_issuer_at_insert = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);	/* an LRU where the notes are fresh (SubmitterNotes, common) */
	__uint(max_entries, BLOCK_ISSUERS_MAX);
	__type(key, struct request *);
	__type(value, struct block_issuer);
} block_issuers SEC(".maps");

static __always_inline void block_issuer_current(struct block_issuer *issuer)
{
	issuer->pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(issuer->comm, sizeof(issuer->comm));
	issuer->cgroup_id = block_issuer_cgroup ? bpf_get_current_cgroup_id() : 0;
}

static __always_inline void block_issuer_note(struct request *rq, bool fresh)
{
	struct block_issuer issuer = {}, *noted;

	/* A fresh note over a stale one (a request struct used again) is written in place: a lookup and a few stores
	 * instead of an update, which takes a new element and the bucket's lock and frees the old one. No other CPU
	 * touches the note of a request being submitted here. */
	if (fresh) {
		noted = bpf_map_lookup_elem(&block_issuers, PTR_KEY(rq));
		if (noted) {
			block_issuer_current(noted);
			noted->issued = 0;
			return;
		}
	}
	block_issuer_current(&issuer);
	bpf_map_update_elem(&block_issuers, PTR_KEY(rq), &issuer, fresh ? BPF_ANY : BPF_NOEXIST);
}

static __always_inline bool block_issuer_first_issue(struct request *rq, struct block_issuer *issuer)
{
	struct block_issuer *noted = bpf_map_lookup_elem(&block_issuers, PTR_KEY(rq));

	if (!noted) {
		block_issuer_current(issuer);
		return true;
	}
	if (noted->issued)
		return false;
	noted->issued = 1;
	*issuer = *noted;
	return true;
}

/* At block_rq_complete(rq, error, nr_bytes): the last completion covers what is left of the request. */
static __always_inline void block_issuer_forget(struct request *rq, __u32 nr_bytes)
{
	if (block_issuer_at_insert && nr_bytes >= TP_READ(rq, __data_len))
		bpf_map_delete_elem(&block_issuers, PTR_KEY(rq));
}

/* The programs that note each request's submitter (see above). */
#define BLOCK_ISSUER_PROGRAMS                                                                                     \
	TP_BTF_RAW(block_io_start, block_io_start, struct request *rq)                                             \
	{                                                                                                          \
		block_issuer_note(rq, true);                                                                       \
		return 0;                                                                                          \
	}                                                                                                          \
	TP_BTF_RAW(block_rq_insert, block_rq_insert)                                                               \
	{                                                                                                          \
		block_issuer_note(block_rq_arg(ctx, insert_has_queue), false);                                     \
		return 0;                                                                                          \
	}

#endif
