// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* javagc: HotSpot's collections (its gc__begin and gc__end USDT probes in libjvm.so), timed per thread: the
 * begin program keeps the time under the thread, the end program sends one event per collection longer than
 * threshold_ns. Only that pair is used: the memory-pool pairs nest inside it, one per pool. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>
#include "ringbuf.bpf.h"
#include "javagc.h"

/* Only collections longer than this are sent (-t, in nanoseconds). */
const volatile __u64 threshold_ns = 0;

/* Events not sent because the ring buffer was full. */
__u64 lost = 0;
/* Collections not timed because `starts` was full. */
__u64 starts_full = 0;

struct start {
	__u64 ts;
	__u64 full;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_STARTS);
	__type(key, __u32);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} events SEC(".maps");

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

SEC("usdt")
int javagc_begin(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct start s = { .ts = bpf_ktime_get_ns() };
	long full = 0;

	if (!bpf_usdt_arg(ctx, 0, &full))
		s.full = full & 0xff;
	if (bpf_map_update_elem(&starts, &tid, &s, BPF_ANY))
		__sync_fetch_and_add(&starts_full, 1);
	return 0;
}

SEC("usdt")
int javagc_end(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns(), elapsed;
	__u32 tid = (__u32)id;
	struct start *s;
	struct event *e;

	s = bpf_map_lookup_elem(&starts, &tid);
	if (!s)
		return 0;	/* gc__begin fired before the tool attached */
	elapsed = now - s->ts;
	if (elapsed > threshold_ns) {
		e = ringbuf_reserve(&events, sizeof(*e), &lost);
		if (e) {
			e->elapsed_ns = elapsed;
			e->cpu = bpf_get_smp_processor_id();
			e->pid = id >> 32;
			e->tid = tid;
			e->full = s->full;
			bpf_ringbuf_submit(e, 0);
		}
	}
	bpf_map_delete_elem(&starts, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
