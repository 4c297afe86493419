// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* criticalstat: kernel sections that ran with interrupts (or preemption) disabled for at least a threshold.
 *
 * The preemptirq tracepoints fire where a CPU disables and enables interrupts (irq_disable/irq_enable) or
 * preemption (preempt_disable/preempt_enable), with the address that did it and its caller. They exist only in
 * kernels built with CONFIG_PREEMPTIRQ_TRACEPOINTS; user space checks the kernel's BTF before loading. One pair
 * is loaded (-i or -p), as tp_btf where the kernel allows it, else raw_tp. Per CPU, the disable event records the
 * start; the enable event measures the section and, when it lasted at least `threshold_ns`, sends it with the
 * kernel stack of its end through a ring buffer. As in BCC, sections that overlap an idle period (power:cpu_idle)
 * are not reported: a CPU waiting for an interrupt with them off is not a latency problem. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "ringbuf.bpf.h"
#include "stacks.bpf.h"
#include "criticalstat.h"

const volatile __u64 threshold_ns = 100000;

/* Sections not reported because the ring buffer was full. */
__u64 lost = 0;

struct start {
	__u64 ts;
	__u64 caller;
	__u64 parent;
	__u32 active;
	/* An idle period began or ended inside the section. */
	__u32 idle_skip;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} idle SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

STACK_TRACE_MAP(stacks);

/* Makes the struct visible to the skeleton's generated `types` module. */
struct event _event_type = {};

static __always_inline bool in_idle(void)
{
	__u32 zero = 0, *on = bpf_map_lookup_elem(&idle, &zero);

	return on && *on;
}

static __always_inline void reset(struct start *s)
{
	s->active = 0;
	s->idle_skip = 0;
}

static __always_inline int on_disable(unsigned long ip, unsigned long parent_ip)
{
	__u32 zero = 0;
	struct start *s = bpf_map_lookup_elem(&starts, &zero);

	if (!s)
		return 0;
	if (in_idle()) {
		reset(s);
		return 0;
	}
	s->ts = bpf_ktime_get_ns();
	s->caller = ip;
	s->parent = parent_ip;
	s->idle_skip = 0;
	s->active = 1;
	return 0;
}

static __always_inline int on_enable(void *ctx, unsigned long ip, unsigned long parent_ip)
{
	__u32 zero = 0;
	struct start *s = bpf_map_lookup_elem(&starts, &zero);
	struct event *e;
	__u64 now, id;

	if (!s)
		return 0;
	if (in_idle() || !s->active || s->idle_skip) {
		reset(s);
		return 0;
	}
	now = bpf_ktime_get_ns();
	if (now < s->ts || now - s->ts < threshold_ns) {
		reset(s);
		return 0;
	}
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (e) {
		id = bpf_get_current_pid_tgid();
		e->time_ns = now - s->ts;
		e->addrs[START_CALLER] = s->caller;
		e->addrs[START_PARENT] = s->parent;
		e->addrs[END_CALLER] = ip;
		e->addrs[END_PARENT] = parent_ip;
		e->cpu = bpf_get_smp_processor_id();
		e->pid = id >> 32;
		e->tid = (__u32)id;
		e->pad = 0;
		e->stack_id = bpf_get_stackid(ctx, &stacks, 0);
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		bpf_ringbuf_submit(e, 0);
	}
	reset(s);
	return 0;
}

TP_BTF_RAW(irq_disable, irq_disable, unsigned long ip, unsigned long parent_ip)
{
	return on_disable(ip, parent_ip);
}

TP_BTF_RAW(irq_enable, irq_enable, unsigned long ip, unsigned long parent_ip)
{
	return on_enable(ctx, ip, parent_ip);
}

TP_BTF_RAW(preempt_disable, preempt_disable, unsigned long ip, unsigned long parent_ip)
{
	return on_disable(ip, parent_ip);
}

TP_BTF_RAW(preempt_enable, preempt_enable, unsigned long ip, unsigned long parent_ip)
{
	return on_enable(ctx, ip, parent_ip);
}

TP_BTF_RAW(cpu_idle, cpu_idle, unsigned int state, unsigned int cpu_id)
{
	__u32 zero = 0, *on = bpf_map_lookup_elem(&idle, &zero);
	struct start *s = bpf_map_lookup_elem(&starts, &zero);

	/* A section in progress saw the CPU go idle or wake: not reported. */
	if (s && s->active)
		s->idle_skip = 1;
	/* Entering an idle state (a small number) or leaving it (PWR_EVENT_EXIT, -1). */
	if (on)
		*on = state < 100;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
