// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Stack helpers shared by the stack tools (profile, offcputime, stackcount, ...).
 *
 * STACK_TRACE_MAP declares a BPF_MAP_TYPE_STACK_TRACE map of MAX_STACK_DEPTH frames; user space sizes it
 * (--stack-storage-size) before load. bpf_get_stackid() returns -EFAULT when there is no stack of that kind (a
 * kernel stack for a sample taken in user mode, a user stack for a kernel thread): that is not an error. -ENOMEM
 * and -EEXIST mean the map was full or two stacks collided: the stack is lost and user space warns.
 *
 * notice_process() tells user space, through a ring buffer, the first time a process is seen, so that it can save
 * the process's memory maps for symbolization before the process exits. */
#ifndef __COREBPF_STACKS_BPF_H
#define __COREBPF_STACKS_BPF_H

#include <bpf/bpf_helpers.h>
#include <asm-generic/errno-base.h>
#include "ringbuf.bpf.h"

/* Frames per stack: the kernel's default perf_event_max_stack. */
#define MAX_STACK_DEPTH 127

typedef __u64 stack_trace_t[MAX_STACK_DEPTH];

#define STACK_TRACE_MAP(name)                                                                                      \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_STACK_TRACE);                                                            \
		__type(key, __u32);                                                                                \
		__type(value, stack_trace_t);                                                                      \
		__uint(max_entries, 16384);                                                                        \
	} name SEC(".maps")

/* The PIDs notice_process() has already reported (LRU, so a long run with many short-lived processes keeps
 * working). */
#define SEEN_PIDS_MAP(seen)                                                                                        \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                                                               \
		__type(key, __u32);                                                                                \
		__type(value, __u8);                                                                               \
		__uint(max_entries, 16384);                                                                        \
	} seen SEC(".maps")

/* The maps notice_process() uses: the PIDs already reported and the ring buffer of new PIDs (each record one
 * __u32). A tool that sends events may give notice_process() its events ring instead, and tell the two kinds of
 * record apart by their length. */
#define PROCESS_NOTICE_MAPS(seen, ring)                                                                            \
	SEEN_PIDS_MAP(seen);                                                                                       \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_RINGBUF);                                                                \
		__uint(max_entries, 64 * 1024);                                                                    \
	} ring SEC(".maps")

/* Reports process `pid` on `ring` the first time it is seen; counts reports that did not fit in `*lost`. */
static __always_inline void notice_process(void *seen, void *ring, __u32 pid, __u64 *lost)
{
	__u8 one = 1;
	__u32 *rec;

	if (bpf_map_lookup_elem(seen, &pid))
		return;
	/* Another CPU may be reporting it at this very moment: only the one that inserts reports. */
	if (bpf_map_update_elem(seen, &pid, &one, BPF_NOEXIST))
		return;
	rec = ringbuf_reserve(ring, sizeof(*rec), lost);
	if (!rec) {
		/* Try again on the next sample. */
		bpf_map_delete_elem(seen, &pid);
		return;
	}
	*rec = pid;
	bpf_ringbuf_submit(rec, 0);
}

#endif
