/* SPDX-License-Identifier: GPL-2.0 */
/* Event records on a BPF ring buffer, as the event-stream tools send them: a record that cannot be reserved is
 * counted in the tool's `lost` (a __u64 in .bss that user space reports, common::attach::maps::DropCounter). */
#ifndef __COREBPF_RINGBUF_BPF_H
#define __COREBPF_RINGBUF_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

/* A zeroed record of `size` bytes (a constant) reserved on ring buffer `rb`, or NULL with one more `*lost`. */
static __always_inline void *ringbuf_reserve_zeroed(void *rb, __u64 size, __u64 *lost)
{
	void *e = bpf_ringbuf_reserve(rb, size, 0);

	if (!e) {
		__sync_fetch_and_add(lost, 1);
		return NULL;
	}
	__builtin_memset(e, 0, size);
	return e;
}

#endif
