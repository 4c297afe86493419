// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* softirqslower: soft IRQs that waited or ran at least a threshold, one record each.
 *
 * Two delays per vector and CPU: from softirq_raise (the vector marked pending) to softirq_entry (its handler
 * starts), and from softirq_entry to softirq_exit (the handler's run). A vector is raised and run on the same
 * CPU, and handlers do not nest on a CPU, so each start time is one slot of a per-CPU array indexed by vector.
 * A raise while the vector is already pending keeps the earlier time (the wait counts from the first raise).
 * Every entry starts the run timer, whether or not its raise was seen; an exit with no entry seen since the
 * attach is not timed.
 *
 * Three attach paths hold the same logic: tp_btf (else raw_tp) programs from one body (tp_btf_raw.bpf.h), and
 * the classic irq tracepoints, whose record holds the vector as its first field. User space keeps one set. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "ringbuf.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "softirqslower.h"

/* Report delays of min_ns and more (min_us * 1000; 0: every one). */
const volatile __u64 min_ns = 10000000;
const volatile bool filter_cpu = false;
const volatile __u32 target_cpu = 0;

__u64 lost = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_VECS);
	__type(key, __u32);
	__type(value, __u64);
} raised_at SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_VECS);
	__type(key, __u32);
	__type(value, __u64);
} entered_at SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline bool cpu_wanted(__u32 cpu)
{
	return !filter_cpu || cpu == target_cpu;
}

static __always_inline void send(__u32 stage, __u32 vec, __u32 cpu, __u64 delta)
{
	struct event *e;

	if (delta < min_ns)
		return;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return;
	e->delta_ns = delta;
	e->stage = stage;
	e->vec = vec;
	e->cpu = cpu;
	e->pid = (__u32)bpf_get_current_pid_tgid();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int raised(__u32 vec)
{
	__u64 *ts;

	if (vec >= MAX_VECS || !cpu_wanted(bpf_get_smp_processor_id()))
		return 0;
	ts = bpf_map_lookup_elem(&raised_at, &vec);
	if (ts && !*ts)
		*ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int entered(__u32 vec)
{
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 now, *ts;

	if (vec >= MAX_VECS || !cpu_wanted(cpu))
		return 0;
	now = bpf_ktime_get_ns();
	ts = bpf_map_lookup_elem(&raised_at, &vec);
	if (ts && *ts) {
		send(STAGE_RAISE_TO_ENTRY, vec, cpu, now - *ts);
		*ts = 0;
	}
	ts = bpf_map_lookup_elem(&entered_at, &vec);
	if (ts)
		*ts = now;
	return 0;
}

static __always_inline int exited(__u32 vec)
{
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 *ts, delta;

	if (vec >= MAX_VECS || !cpu_wanted(cpu))
		return 0;
	ts = bpf_map_lookup_elem(&entered_at, &vec);
	if (!ts || !*ts)
		return 0;
	delta = bpf_ktime_get_ns() - *ts;
	*ts = 0;
	send(STAGE_ENTRY_TO_EXIT, vec, cpu, delta);
	return 0;
}

TP_BTF_RAW(softirq_raise, softirq_raise, unsigned int vec)
{
	return raised(vec);
}

TP_BTF_RAW(softirq_entry, softirq_entry, unsigned int vec)
{
	return entered(vec);
}

TP_BTF_RAW(softirq_exit, softirq_exit, unsigned int vec)
{
	return exited(vec);
}

/* The classic tracepoints' record (irq/softirq_*: the common header, then `unsigned int vec`). */
struct softirq_tp {
	__u64 common;
	unsigned int vec;
};

SEC("tracepoint/irq/softirq_raise")
int softirq_raise_tp(struct softirq_tp *ctx)
{
	return raised(ctx->vec);
}

SEC("tracepoint/irq/softirq_entry")
int softirq_entry_tp(struct softirq_tp *ctx)
{
	return entered(ctx->vec);
}

SEC("tracepoint/irq/softirq_exit")
int softirq_exit_tp(struct softirq_tp *ctx)
{
	return exited(ctx->vec);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
