// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Event records on a BPF ring buffer, the one way every tool sends them: a record the ring buffer has no room for
 * is counted in a __u64 of the program's .bss (the tool's `lost`, by convention), which user space reads and
 * reports at the end of the run (common::attach::events::EventStream). */
#ifndef __COREBPF_RINGBUF_BPF_H
#define __COREBPF_RINGBUF_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

/* A record of `size` bytes (a constant) reserved on ring buffer `rb`, or NULL with one more `*lost`. The caller
 * fills every byte, then submits it (bpf_ringbuf_submit). */
static __always_inline void *ringbuf_reserve(void *rb, __u64 size, __u64 *lost)
{
	void *e = bpf_ringbuf_reserve(rb, size, 0);

	if (!e)
		__sync_fetch_and_add(lost, 1);
	return e;
}

/* ringbuf_reserve, zeroed: for records whose padding or optional fields the caller leaves unset. */
static __always_inline void *ringbuf_reserve_zeroed(void *rb, __u64 size, __u64 *lost)
{
	void *e = ringbuf_reserve(rb, size, lost);

	if (e)
		__builtin_memset(e, 0, size);
	return e;
}

/* Copies the `size` bytes at `data` (a record built elsewhere, of variable length) onto ring buffer `rb`, or counts
 * one more `*lost` when there is no room. */
static __always_inline void ringbuf_output(void *rb, void *data, __u64 size, __u64 *lost)
{
	if (bpf_ringbuf_output(rb, data, size, 0))
		__sync_fetch_and_add(lost, 1);
}

#endif
