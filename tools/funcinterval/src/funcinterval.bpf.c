// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* funcinterval: the time from one hit of the matched functions or tracepoints to the next, as a log2 histogram.
 *
 * One program per mechanism (fentry, kprobe_multi, kprobes, tracepoints, uprobe_multi, uprobes), all doing the
 * same: read the time of the previous hit from `last`, store this hit's, and add the gap to the cumulative
 * histogram. As in BCC there is one `last` for all matches and all threads of the traced process (or of the whole
 * machine): the gap is between consecutive hits of any of them. The first hit after start has no predecessor
 * and only sets `last`. Two CPUs hitting at the same instant may both read the same `last` (no atomic exchange
 * before 5.12); one gap is then measured from an older hit, as in BCC. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "bits.bpf.h"
#include "funcinterval.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u64 ns_per_unit = 1;

/* The time of the last hit (0: none yet), shared by every object loaded for fentry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

static __always_inline int hit(void)
{
	__u32 zero = 0, slot;
	__u64 now, prev, delta, *lastp;
	struct hist *h;

	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	lastp = bpf_map_lookup_elem(&last, &zero);
	if (!lastp)
		return 0;
	now = bpf_ktime_get_ns();
	prev = *lastp;
	*lastp = now;
	if (!prev || now < prev)
		return 0;
	delta = now - prev;
	h = bpf_map_lookup_elem(&hists, &zero);
	if (!h)
		return 0;
	slot = log2l(delta / ns_per_unit);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_ns, delta);
	return 0;
}

SEC("fentry")
int BPF_PROG(fi_fentry) { return hit(); }

SEC("kprobe.multi")
int fi_kprobe_multi(struct pt_regs *ctx) { return hit(); }

SEC("kprobe")
int fi_kprobe(struct pt_regs *ctx) { return hit(); }

SEC("tracepoint")
int fi_tracepoint(void *ctx) { return hit(); }

SEC("uprobe.multi")
int fi_uprobe_multi(struct pt_regs *ctx) { return hit(); }

SEC("uprobe")
int fi_uprobe(struct pt_regs *ctx) { return hit(); }
