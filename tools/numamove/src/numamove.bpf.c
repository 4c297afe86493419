// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* numamove: NUMA-balancing page migrations, counted with the time each took, in a per-CPU array (no events).
 *
 * A migration is a call of the kernel's misplaced-page migration function, migrate_misplaced_folio (6.x) or
 * migrate_misplaced_page (before), which the NUMA hinting fault handler calls for a page found on a node other
 * than the one the task runs on; user space picks the name the kernel has from BTF. Two ways in:
 *  - fentry/fexit on that function, else kprobe/kretprobe (libbpf-tools' design): a start time per thread at
 *    entry, the migration counted with its time at return;
 *  - the migrate:mm_migrate_pages_start and migrate:mm_migrate_pages tracepoints (tp_btf, else raw_tp), which
 *    bracket every migrate_pages() run: a run whose reason is MR_NUMA_MISPLACED (the value from the kernel's
 *    BTF, by CO-RE) is the body of one such call. The end program is attached before the start one, so that a
 *    start seen always has its end seen too, and the end needs no reason of its own.
 * The -p filter is filter.bpf.h's target_tgid. Starts with no room in `starts` are counted in starts_full. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "numamove.h"

__u64 starts_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, S_MAXSTAT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, __u64);
} starts SEC(".maps");

static __always_inline int begin(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 now;

	if (!tgid_wanted(id >> 32))
		return 0;
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &tid, &now, BPF_ANY))
		__sync_fetch_and_add(&starts_full, 1);
	return 0;
}

static __always_inline void add(__u32 key, __u64 value)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &key);

	if (v)
		*v += value;
}

static __always_inline int end(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *start = bpf_map_lookup_elem(&starts, &tid);
	__u64 now = bpf_ktime_get_ns();
	__s64 took;

	if (!start)
		return 0;
	took = (__s64)(now - *start);
	bpf_map_delete_elem(&starts, &tid);
	add(S_MIGRATIONS, 1);
	if (took > 0)
		add(S_NS, took);
	return 0;
}

/* The function's name in these sections is the 6.x one; user space sets the one this kernel has (fentry) or
 * names it when attaching (kprobe). */
SEC("fentry/migrate_misplaced_folio")
int BPF_PROG(misplaced_fentry)
{
	return begin();
}

SEC("fexit/migrate_misplaced_folio")
int BPF_PROG(misplaced_fexit)
{
	return end();
}

SEC("kprobe/migrate_misplaced_folio")
int BPF_KPROBE(misplaced_kprobe)
{
	return begin();
}

SEC("kretprobe/migrate_misplaced_folio")
int BPF_KRETPROBE(misplaced_kretprobe)
{
	return end();
}

TP_BTF_RAW(migrate_start, mm_migrate_pages_start, enum migrate_mode mode, int reason)
{
	if (reason != bpf_core_enum_value(enum migrate_reason, MR_NUMA_MISPLACED))
		return 0;
	return begin();
}

TP_BTF_RAW(migrate_end, mm_migrate_pages)
{
	return end();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
