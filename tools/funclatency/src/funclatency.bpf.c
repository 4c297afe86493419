// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* funclatency: time each call of the matched functions from entry to return, into log2 histograms.
 *
 * One entry program and one return program serve every mechanism (fentry/fexit, kprobe_multi, kprobes,
 * uprobe_multi, uprobes); the function's index reaches the return program as the link's BPF cookie (or, for
 * fexit, as this object's `func_index`), used only for -F. As in BCC, calls are keyed by thread: without -l a
 * nested or recursive call's entry replaces the outer one's, so the innermost calls are timed; with -l LEVEL a
 * per-thread depth keeps the outermost LEVEL levels apart. A call whose return never comes (longjmp, exit)
 * leaves an entry that the LRU maps reclaim, so the maps never fill for good. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "bits.bpf.h"
#include "funclatency.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 max_depth = 0;
const volatile bool per_function = false;
const volatile __u64 ns_per_unit = 1;
const volatile __u32 func_index = 0;

/* Calls not timed: the start map had no room. */
__u64 untimed = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, struct start_key);
	__type(value, __u64);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, __u32);
} depths SEC(".maps");

/* One histogram, or one per function with -F (sized by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

static __always_inline bool traced(__u64 pid_tgid)
{
	return tgid_wanted(pid_tgid >> 32);
}

static __always_inline int enter(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start_key key = { .tid = (__u32)id };
	__u64 ts;

	if (!traced(id))
		return 0;
	if (max_depth) {
		__u32 *d = bpf_map_lookup_elem(&depths, &key.tid);
		__u32 depth = d ? *d : 0, next = depth + 1;

		bpf_map_update_elem(&depths, &key.tid, &next, BPF_ANY);
		if (depth >= max_depth)
			return 0;
		key.depth = depth;
	}
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &key, &ts, BPF_ANY))
		__sync_fetch_and_add(&untimed, 1);
	return 0;
}

static __always_inline int leave(__u32 index)
{
	__u64 id = bpf_get_current_pid_tgid(), *tsp, delta;
	struct start_key key = { .tid = (__u32)id };
	struct hist *h;
	__u32 slot, zero = 0;

	if (!traced(id))
		return 0;
	if (max_depth) {
		__u32 *d = bpf_map_lookup_elem(&depths, &key.tid);
		__u32 depth;

		if (!d || !*d)
			return 0; /* entered before tracing began */
		depth = *d - 1;
		if (depth)
			bpf_map_update_elem(&depths, &key.tid, &depth, BPF_ANY);
		else
			bpf_map_delete_elem(&depths, &key.tid);
		if (depth >= max_depth)
			return 0;
		key.depth = depth;
	}
	tsp = bpf_map_lookup_elem(&starts, &key);
	if (!tsp)
		return 0;
	delta = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&starts, &key);

	h = bpf_map_lookup_elem(&hists, per_function ? &index : &zero);
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

/* The function's index for -F: the link's cookie (read only when -F asks, so kernels without cookies load). */
static __always_inline __u32 cookie_index(void *ctx)
{
	return per_function ? (__u32)bpf_get_attach_cookie(ctx) : 0;
}

SEC("fentry")
int BPF_PROG(fl_fentry) { return enter(); }

SEC("fexit")
int BPF_PROG(fl_fexit) { return leave(func_index); }

SEC("kprobe.multi")
int fl_kprobe_multi(struct pt_regs *ctx) { return enter(); }

SEC("kretprobe.multi")
int fl_kretprobe_multi(struct pt_regs *ctx) { return leave(cookie_index(ctx)); }

SEC("kprobe")
int fl_kprobe(struct pt_regs *ctx) { return enter(); }

SEC("kretprobe")
int fl_kretprobe(struct pt_regs *ctx) { return leave(cookie_index(ctx)); }

SEC("uprobe.multi")
int fl_uprobe_multi(struct pt_regs *ctx) { return enter(); }

SEC("uretprobe.multi")
int fl_uretprobe_multi(struct pt_regs *ctx) { return leave(cookie_index(ctx)); }

SEC("uprobe")
int fl_uprobe(struct pt_regs *ctx) { return enter(); }

SEC("uretprobe")
int fl_uretprobe(struct pt_regs *ctx) { return leave(cookie_index(ctx)); }
