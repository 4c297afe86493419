// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* hardirqs: time in each hard IRQ handler, from irq_handler_entry to irq_handler_exit on the same CPU, as
 * in-kernel totals, counts and log2 histograms per handler name (irqaction->name, as BCC keys them).
 *
 * The tracepoints are attached as tp_btf where the kernel allows it, else as raw_tp; user space loads one set
 * or the other. Hard IRQ handlers do not nest on a CPU, so the start is one per-CPU slot. The per-name records
 * are cumulative and never cleared, so reading them at an interval loses no event. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "timehist.bpf.h"
#include "maps.bpf.h"
#include "hardirqs.h"

const volatile bool filter_cpu = false;
const volatile __u32 target_cpu = 0;
const volatile bool nsecs = false;

/* Events not counted because the hists map was full. */
__u64 hists_full = 0;

struct start_val {
	__u64 ts;
	__s32 irq;
	__u32 valid;
	struct irq_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct start_val);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NAMES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct irq_key);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist zero_hist;

/* Makes the structs visible to the skeleton's generated `types` module. */
struct hist _hist_type = {};
struct irq_key _irq_key_type = {};

static __always_inline int entry(int irq, struct irqaction *action)
{
	__u32 zero = 0;
	struct start_val *s;

	if (filter_cpu && bpf_get_smp_processor_id() != target_cpu)
		return 0;
	s = bpf_map_lookup_elem(&start, &zero);
	if (!s)
		return 0;
	__builtin_memset(&s->key, 0, sizeof(s->key));
	bpf_probe_read_kernel_str(&s->key.name, sizeof(s->key.name), TP_READ(action, name));
	s->irq = irq;
	s->valid = 1;
	s->ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int exit_(int irq)
{
	__u32 zero = 0;
	struct start_val *s;
	struct hist *hist;
	__u64 delta;

	if (filter_cpu && bpf_get_smp_processor_id() != target_cpu)
		return 0;
	s = bpf_map_lookup_elem(&start, &zero);
	if (!s || !s->valid || s->irq != irq)
		return 0;
	s->valid = 0;
	delta = bpf_ktime_get_ns() - s->ts;
	hist = bpf_map_lookup_or_try_init(&hists, &s->key, &zero_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		return 0;
	}
	timehist_add(hist, delta, nsecs ? 1 : 1000);
	return 0;
}

TP_BTF_RAW(irq_handler_entry, irq_handler_entry, int irq, struct irqaction *action)
{
	return entry(irq, action);
}

TP_BTF_RAW(irq_handler_exit, irq_handler_exit, int irq)
{
	return exit_(irq);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
