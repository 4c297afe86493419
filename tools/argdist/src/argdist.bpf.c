// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* argdist: one object per probe spec. The generic probe (probe.bpf.h) fetches the values the spec names,
 * computes its expressions (cast to their types) and applies its filter; this program then counts the first result into a log2 histogram (-H, in .bss) or the
 * whole key (up to MAX_KEYS integers and strings) into a hash of counts (-C). The maps are cumulative; the Rust
 * side prints each interval's difference, as BCC's tool clears its tables. The count map's key size is set at
 * load time to the integers plus only as many strings as the spec has, so integer keys hash 32 bytes. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"
#include "bits.bpf.h"
#include "argdist.h"
#include "probe.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 mode = MODE_HIST;
const volatile __u32 n_keys = 1;
const volatile struct key_expr keys[MAX_KEYS] = {};
const volatile __u32 str_size = 80;

struct count_key {
	__u64 vals[MAX_KEYS];
	char strs[MAX_KEYS][STR_MAX];
};

__u64 hist_slots[HIST_SLOTS] = {};
/* The sum of the histogram's values (as unsigned 64-bit integers), for Prometheus' `_sum`. */
__u64 hist_sum = 0;
/* Events not counted: the count map was full. */
__u64 dropped = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_ENTRIES);
	__uint(key_size, sizeof(struct count_key));
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	/* Slot 0 builds the key; slot 1 stays zero. */
	__uint(max_entries, 2);
	__type(key, __u32);
	/* By size, not type: the skeleton cannot derive Default for long arrays. */
	__uint(value_size, sizeof(struct count_key));
} scratch SEC(".maps");

static __always_inline int handle(void *record, struct pt_regs *regs, __u64 *slots)
{
	__u64 vals[MAX_FETCH] = {}, outs[MAX_OUT] = {};
	__u32 tid, zero = 0;

	if (!probe_wanted(&tid))
		return 0;
	if (!probe_fetch(record, regs, slots, tid, vals))
		return 0;
	if (!probe_eval(record, vals, outs))
		return 0;

	if (mode == MODE_HIST) {
		__u64 v = outs[0];
		__u64 slot = log2l(v);
		if (slot >= HIST_SLOTS)
			slot = HIST_SLOTS - 1;
		__sync_fetch_and_add(&hist_slots[slot], 1);
		__sync_fetch_and_add(&hist_sum, v);
		return 0;
	}

	__u32 one = 1;
	struct count_key *key = bpf_map_lookup_elem(&scratch, &zero);
	struct count_key *blank = bpf_map_lookup_elem(&scratch, &one);
	if (!key || !blank)
		return 0;
	/* Zeroed whole (a hash key's unused string bytes count too) from the slot never written: too long for an
	 * inline memset. */
	bpf_probe_read_kernel(key, sizeof(*key), blank);
#pragma unroll
	for (int i = 0; i < MAX_KEYS; i++) {
		__u8 f = keys[i].fetch, s = keys[i].str;

		if (i >= n_keys)
			break;
		if (s < MAX_KEYS && f < MAX_FETCH)
			probe_string(key->strs[s], str_size, record, f, vals[f]);
		else
			key->vals[i] = outs[i];
	}
	counter_inc(&counts, key, &dropped);
	return 0;
}

/* The generic programs (tracepoint, kprobe/uprobe, kretprobe, fentry/fexit and the $latency starts) over handle(). */
PROBE_PROGRAMS(handle)
