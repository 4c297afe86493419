// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* ugc: garbage collections of a language runtime, timed between the begin and end USDT probes of each of its
 * probe pairs (HotSpot's gc__begin/end and mem__pool__gc__begin/end, CPython's and Node's gc__start/done,
 * Ruby's mark and sweep phases).
 *
 * Both programs are attached to every pair; the probe's USDT cookie says which pair it is and what its
 * arguments carry. The begin program records the time (and the arguments the report needs from the start) under
 * the thread, the pair and, for HotSpot's memory pools, the pool (a collection begins every pool before it ends
 * any); the end program takes that record out and sends one event if the collection lasted at least min_ns. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "ringbuf.bpf.h"
#include "usdt_args.bpf.h"
#include "ugc.h"

/* Only collections at least this long are sent (-M, in nanoseconds). */
const volatile __u64 min_ns = 0;

/* Events not sent because the ring buffer was full. */
__u64 lost = 0;
/* Begin probes not recorded because `starts` was full. */
__u64 starts_full = 0;

struct start_key {
	__u32 tid;
	__u32 pair;
	__u64 tag;		/* HotSpot's pool name pointer; 0 for the others */
};

struct start {
	__u64 ts;
	__u64 field1;
	__u64 field2;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_STARTS);
	__type(key, struct start_key);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} events SEC(".maps");

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

static __always_inline void key_of(struct pt_regs *ctx, __u64 cookie, struct start_key *key)
{
	key->tid = (__u32)bpf_get_current_pid_tgid();
	key->pair = cookie & 0xff;
	key->tag = (cookie >> 8) == KIND_JAVA_POOL ? usdt_arg(ctx, 2) : 0;
}

SEC("usdt")
int ugc_begin(struct pt_regs *ctx)
{
	__u64 cookie = bpf_usdt_cookie(ctx);
	struct start_key key = {};
	struct start s = {};

	key_of(ctx, cookie, &key);
	s.ts = bpf_ktime_get_ns();
	switch (cookie >> 8) {
	case KIND_JAVA_POOL:
		s.field1 = usdt_arg(ctx, 5);	/* used bytes */
		s.field2 = usdt_arg(ctx, 7);	/* max bytes */
		break;
	case KIND_PYTHON_GEN:
		s.field1 = usdt_arg(ctx, 0);	/* generation */
		break;
	}
	if (bpf_map_update_elem(&starts, &key, &s, BPF_ANY))
		__sync_fetch_and_add(&starts_full, 1);
	return 0;
}

SEC("usdt")
int ugc_end(struct pt_regs *ctx)
{
	__u64 cookie = bpf_usdt_cookie(ctx), now = bpf_ktime_get_ns(), id = bpf_get_current_pid_tgid();
	struct start_key key = {};
	struct start *s;
	struct event *e;
	__u64 elapsed;

	key_of(ctx, cookie, &key);
	s = bpf_map_lookup_elem(&starts, &key);
	if (!s)
		return 0;	/* the begin probe fired before the tool attached */
	elapsed = now - s->ts;
	if (elapsed < min_ns) {
		bpf_map_delete_elem(&starts, &key);
		return 0;
	}
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e) {
		bpf_map_delete_elem(&starts, &key);
		return 0;
	}
	e->ts = now;
	e->elapsed_ns = elapsed;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->pair = key.pair;
	switch (cookie >> 8) {
	case KIND_JAVA_POOL:
		e->field1 = s->field1;
		e->field2 = s->field2;
		e->field3 = usdt_arg(ctx, 5);
		e->field4 = usdt_arg(ctx, 7);
		bpf_probe_read_user_str(e->manager, sizeof(e->manager), (void *)usdt_arg(ctx, 0));
		bpf_probe_read_user_str(e->pool, sizeof(e->pool), (void *)key.tag);
		break;
	case KIND_PYTHON_GEN:
		e->field1 = s->field1;
		e->field2 = usdt_arg(ctx, 0);	/* objects collected */
		break;
	case KIND_NODE_TYPE:
		e->field1 = usdt_arg(ctx, 0);	/* type flags */
		break;
	}
	bpf_map_delete_elem(&starts, &key);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
