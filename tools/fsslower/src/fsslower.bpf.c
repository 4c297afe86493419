// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* fsslower: reads, writes, opens and fsyncs of one file system that take longer than a threshold, one record each.
 *
 * The timing is fsop.bpf.h's (shared with fsdist): fentry/fexit or kprobes on the file system's own functions, or
 * the system calls' tracepoints filtered by the file's super block magic. What is left here is the end of an
 * operation: below min_lat_ns it is dropped in the kernel; above, one record with the file's name goes to the ring
 * buffer (a record with no room is counted in `lost`). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "ringbuf.bpf.h"
#include "fsop.bpf.h"
#include "fsslower.h"

const volatile __u64 min_lat_ns = 0;

__u64 lost = 0;

struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline void fsop_done(void *ctx, const struct fsop_call *call, struct file *file, __s64 ret,
				      __u64 delta_ns)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;

	/* as libbpf-tools: strictly slower than the threshold (so -m 0 shows everything that took any time) */
	if (delta_ns <= min_lat_ns)
		return;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->end_ns = call->ts + delta_ns;
	e->delta_ns = delta_ns;
	e->size = call->op == FSOP_FSYNC ? call->end - call->offset : call->op == FSOP_OPEN ? 0 : ret;
	e->offset = call->offset;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->op = call->op;
	bpf_get_current_comm(e->task, sizeof(e->task));
	if (file)
		bpf_probe_read_kernel_str(e->file, sizeof(e->file), BPF_CORE_READ(file, f_path.dentry, d_name.name));
	bpf_ringbuf_submit(e, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
