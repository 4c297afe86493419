// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* ustat: language-runtime events counted per process and per column (method calls, collections, allocations,
 * class loads, exceptions, thread starts). One program is attached to every USDT probe ustat knows, in every
 * traced process; the probe's USDT cookie says which column it adds to. The counts are cumulative; the front end
 * reads them every interval and takes differences. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
/* Each traced process uses up to a dozen of libbpf's USDT spec slots (one per probe site and argument layout);
 * the default of 256 would stop at a few dozen Java processes. */
#define BPF_USDT_MAX_SPEC_CNT 2048
#include <bpf/usdt.bpf.h>
#include "maps.bpf.h"
#include "ustat.h"

/* Events not counted because `counts` was full. */
__u64 procs_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct counts);
} counts SEC(".maps");

static const struct counts zero_counts = {};

/* Makes struct counts visible to the skeleton's generated `types` module. */
struct counts _counts_type = {};

SEC("usdt")
int ustat_event(struct pt_regs *ctx)
{
	__u64 column = bpf_usdt_cookie(ctx);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct counts *c;

	if (column >= NCATS)
		return 0;
	c = bpf_map_lookup_or_try_init(&counts, &tgid, &zero_counts);
	if (!c) {
		__sync_fetch_and_add(&procs_full, 1);
		return 0;
	}
	__sync_fetch_and_add(&c->n[column], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
