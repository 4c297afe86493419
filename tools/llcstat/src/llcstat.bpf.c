// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* llcstat: cache references and misses per (CPU, process, thread), from two sampling perf events per CPU.
 *
 * User space opens, on every CPU, one perf event counting last-level cache references and one counting misses,
 * each firing every N events (`-c N`), and attaches `on_ref` and `on_miss` to them. Each sample adds its period
 * (N) to the current task's record, so a record holds events, not samples. Records are cumulative and read once,
 * when the run ends. Without -t, the thread ID of a record is the process ID (all threads of a process on a CPU
 * are one record). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "llcstat.h"

const volatile bool per_thread = false;

/* Samples not counted because the infos map was full. */
__u64 infos_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, struct llc_key);
	__type(value, struct llc_value);
} infos SEC(".maps");

/* Makes the structs visible to the skeleton's generated `types` module. */
struct llc_key _llc_key_type = {};
struct llc_value _llc_value_type = {};

static __always_inline int count(__u64 period, bool miss)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct llc_key key = {};
	struct llc_value *val, zero = {};

	key.cpu = bpf_get_smp_processor_id();
	key.pid = id >> 32;
	key.tid = per_thread ? (__u32)id : key.pid;

	val = bpf_map_lookup_elem(&infos, &key);
	if (!val) {
		bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		/* BPF_NOEXIST: a record made meanwhile by the other event on this CPU is kept, not reset. */
		bpf_map_update_elem(&infos, &key, &zero, BPF_NOEXIST);
		val = bpf_map_lookup_elem(&infos, &key);
		if (!val) {
			__sync_fetch_and_add(&infos_full, 1);
			return 0;
		}
	}
	if (miss)
		__sync_fetch_and_add(&val->misses, period);
	else
		__sync_fetch_and_add(&val->refs, period);
	/* The name at the latest sample, as the original tools keep it (a process may exec meanwhile). */
	bpf_get_current_comm(val->comm, sizeof(val->comm));
	return 0;
}

SEC("perf_event")
int on_ref(struct bpf_perf_event_data *ctx)
{
	return count(ctx->sample_period, false);
}

SEC("perf_event")
int on_miss(struct bpf_perf_event_data *ctx)
{
	return count(ctx->sample_period, true);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
