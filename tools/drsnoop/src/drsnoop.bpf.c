// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* drsnoop: one record per reclaim a task does itself, while it waits for memory: system-wide direct reclaim
 * (vmscan:mm_vmscan_direct_reclaim_begin/end, BCC's hooks) and, unless --global-only, reclaim in the task's memory
 * cgroup when the cgroup is at its limit (vmscan:mm_vmscan_memcg_reclaim_begin/end: a cgroup at its limit reclaims
 * through try_to_free_mem_cgroup_pages, which fires these, never the direct-reclaim pair). Each pair is attached
 * with tp_btf, else raw_tp, else the classic tracepoint.
 *
 * The start is kept per thread in `start` (the PID, TID and UID filters run there, so only wanted threads are
 * kept); the end sends the record. A start that finds `start` full and a record the ring buffer has no room for
 * are counted in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "drsnoop.h"

__u64 lost = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct started {
	__u64 ns;
	__u32 kind;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_RECLAIMING);
	__type(key, __u32);
	__type(value, struct started);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline int begin(__u32 kind)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct started s = { .kind = kind };
	__u32 tid = (__u32)id;

	if (!current_ids_wanted(id) || !current_uid_wanted())
		return 0;
	s.ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start, &tid, &s, BPF_ANY))
		__sync_fetch_and_add(&lost, 1);
	return 0;
}

static __always_inline int end(__u32 kind, __u64 nr_reclaimed)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct started *s;
	struct event *e;

	s = bpf_map_lookup_elem(&start, &tid);
	if (!s)
		return 0;
	if (s->kind != kind)
		goto done;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		goto done;
	e->start_ns = s->ns;
	e->end_ns = bpf_ktime_get_ns();
	e->nr_reclaimed = nr_reclaimed;
	e->pid = id >> 32;
	e->tid = tid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->kind = kind;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
done:
	bpf_map_delete_elem(&start, &tid);
	return 0;
}

TP_BTF_RAW(direct_begin, mm_vmscan_direct_reclaim_begin)
{
	return begin(KIND_DIRECT);
}

TP_BTF_RAW(direct_end, mm_vmscan_direct_reclaim_end, unsigned long nr_reclaimed)
{
	return end(KIND_DIRECT, nr_reclaimed);
}

TP_BTF_RAW(memcg_begin, mm_vmscan_memcg_reclaim_begin)
{
	return begin(KIND_MEMCG);
}

TP_BTF_RAW(memcg_end, mm_vmscan_memcg_reclaim_end, unsigned long nr_reclaimed)
{
	return end(KIND_MEMCG, nr_reclaimed);
}

SEC("tracepoint/vmscan/mm_vmscan_direct_reclaim_begin")
int direct_begin_tp(void *ctx)
{
	return begin(KIND_DIRECT);
}

SEC("tracepoint/vmscan/mm_vmscan_direct_reclaim_end")
int direct_end_tp(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx)
{
	return end(KIND_DIRECT, ctx->nr_reclaimed);
}

SEC("tracepoint/vmscan/mm_vmscan_memcg_reclaim_begin")
int memcg_begin_tp(void *ctx)
{
	return begin(KIND_MEMCG);
}

SEC("tracepoint/vmscan/mm_vmscan_memcg_reclaim_end")
int memcg_end_tp(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx)
{
	return end(KIND_MEMCG, ctx->nr_reclaimed);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
