// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* fsdist: the latency of each file system operation (read, write, open, fsync, getattr) of one file system, as a
 * cumulative log2 histogram per operation.
 *
 * The timing is fsop.bpf.h's (shared with fsslower): fentry/fexit or kprobes on the file system's own functions,
 * or the system calls' tracepoints filtered by the file's file system. Each operation that returns is added to its
 * histogram in .bss, which is never cleared: user space prints the difference between two reads. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "timehist.bpf.h"
#include "fsop.bpf.h"
#include "fsdist.h"

_Static_assert(OPS == FSOP_COUNT, "fsdist.h's OPS is fsop.h's FSOP_COUNT");

const volatile bool in_ms = false;

struct hist hists[OPS] = {};

static __always_inline void fsop_done(void *ctx, const struct fsop_call *call, struct file *file, __s64 ret,
				      __u64 delta_ns)
{
	__u32 op = call->op;

	if (op >= OPS)
		return;
	timehist_add(&hists[op], delta_ns, in_ms ? 1000000 : 1000);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
