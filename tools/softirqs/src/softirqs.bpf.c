// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* softirqs: time in each soft IRQ vector, from softirq_entry to softirq_exit on the same CPU, as in-kernel
 * totals, counts and log2 histograms per vector.
 *
 * The tracepoints are attached as tp_btf where the kernel allows it, else as raw_tp; user space loads one set
 * or the other. Softirqs do not nest on a CPU, so the start time is one per-CPU slot, and each CPU keeps its own
 * per-vector records, added to without atomics (user space sums the CPUs). The records are cumulative and never
 * cleared, so reading them at an interval loses no event. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "timehist.bpf.h"
#include "softirqs.h"

const volatile bool filter_cpu = false;
const volatile __u32 target_cpu = 0;
const volatile bool nsecs = false;

struct start_val {
	__u64 ts;
	__u32 vec;
	__u32 valid;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct start_val);
} start SEC(".maps");

/* One record per vector and CPU; the last one also takes vectors past MAX_VECS - 1. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_VECS);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* Makes the struct visible to the skeleton's generated `types` module. */
struct hist _hist_type = {};

static __always_inline int entry(unsigned int vec)
{
	__u32 zero = 0;
	struct start_val *s;

	if (filter_cpu && bpf_get_smp_processor_id() != target_cpu)
		return 0;
	s = bpf_map_lookup_elem(&start, &zero);
	if (!s)
		return 0;
	s->ts = bpf_ktime_get_ns();
	s->vec = vec;
	s->valid = 1;
	return 0;
}

static __always_inline int exit_(unsigned int vec)
{
	__u32 zero = 0, key;
	struct start_val *s;
	struct hist *hist;
	__u64 delta;

	if (filter_cpu && bpf_get_smp_processor_id() != target_cpu)
		return 0;
	s = bpf_map_lookup_elem(&start, &zero);
	if (!s || !s->valid || s->vec != vec)
		return 0;
	s->valid = 0;
	delta = bpf_ktime_get_ns() - s->ts;
	key = vec < MAX_VECS ? vec : MAX_VECS - 1;
	hist = bpf_map_lookup_elem(&hists, &key);
	if (!hist)
		return 0;
	timehist_add_local(hist, delta, nsecs ? 1 : 1000);
	return 0;
}

TP_BTF_RAW(softirq_entry, softirq_entry, unsigned int vec)
{
	return entry(vec);
}

TP_BTF_RAW(softirq_exit, softirq_exit, unsigned int vec)
{
	return exit_(vec);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
