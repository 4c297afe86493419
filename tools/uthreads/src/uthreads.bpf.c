// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* uthreads: threads of one process as they start (and, for Java, end), from USDT probes: glibc's
 * libc:pthread_start (in the new thread, with its start routine) where the C library has it, and HotSpot's
 * hotspot:thread__start/stop (the Java thread's name, Java ID and native ID). One program serves every probe;
 * its USDT cookie says which kind it is. One event per probe hit; the attachment is to the one process. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "ringbuf.bpf.h"
#include "usdt_args.bpf.h"
#include "uthreads.h"

/* Events not sent because the ring buffer was full. */
__u64 lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} events SEC(".maps");

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

SEC("usdt")
int uthreads_probe(struct pt_regs *ctx)
{
	__u64 kind = bpf_usdt_cookie(ctx), id = bpf_get_current_pid_tgid();
	struct event *e;

	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->ts = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind = kind;
	if (kind == KIND_PTHREAD) {
		e->runtime_id = usdt_arg(ctx, 1);	/* start routine */
		e->native_id = e->tid;
	} else {
		e->name_len = usdt_read_counted(e->name, NAME_LEN, usdt_arg(ctx, 0), usdt_arg(ctx, 1));
		e->runtime_id = usdt_arg(ctx, 2);
		e->native_id = usdt_arg(ctx, 3);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
