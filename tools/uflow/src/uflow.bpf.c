// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* uflow: every method entry and return of one process, from its runtime's USDT probes, with the thread's call
 * depth, sent as it happens. The USDT cookie says where the runtime passes the class and method names; calls
 * whose class or method does not start with the -C or -M prefix are neither sent nor counted in the depth. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "maps.bpf.h"
#include "ringbuf.bpf.h"
#include "usdt_args.bpf.h"
#include "uflow.h"

/* -C and -M: the prefixes a call's class and method must start with (empty: any). */
const volatile char class_prefix[CLASS_LEN] = {};
const volatile __u32 class_prefix_len = 0;
const volatile char method_prefix[METHOD_LEN] = {};
const volatile __u32 method_prefix_len = 0;

/* Events not sent because the ring buffer was full. */
__u64 lost = 0;
/* Calls whose depth was not tracked because `depths` was full. */
__u64 depths_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, __u32);
} depths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

static const __u32 zero_depth = 0;

static __always_inline bool starts_with(const char *s, const volatile char *prefix, __u32 len, __u32 size)
{
	for (__u32 i = 0; i < size; i++) {
		if (i >= len)
			return true;
		if (s[i] != prefix[i])
			return false;
	}
	return true;
}

static __always_inline int on_call(struct pt_regs *ctx, bool is_return)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, *depth;
	struct event *e;

	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	usdt_read_call(ctx, bpf_usdt_cookie(ctx), e->clazz, CLASS_LEN, e->method, METHOD_LEN);
	if (!starts_with(e->clazz, class_prefix, class_prefix_len, CLASS_LEN) ||
	    !starts_with(e->method, method_prefix, method_prefix_len, METHOD_LEN)) {
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	depth = bpf_map_lookup_or_try_init(&depths, &tid, &zero_depth);
	if (!depth)
		__sync_fetch_and_add(&depths_full, 1);
	if (is_return) {
		e->depth = depth ? *depth : 0;
		if (depth && *depth)
			*depth -= 1;
	} else if (depth) {
		*depth += 1;
		e->depth = *depth;
	}
	e->ts = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->is_return = is_return;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("usdt")
int uflow_entry(struct pt_regs *ctx)
{
	return on_call(ctx, false);
}

SEC("usdt")
int uflow_return(struct pt_regs *ctx)
{
	return on_call(ctx, true);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
