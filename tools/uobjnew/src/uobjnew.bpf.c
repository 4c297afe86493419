// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* uobjnew: allocations of one process counted per type, with their bytes: from its runtime's allocation USDT
 * probe (HotSpot's object__alloc, Ruby's object__create, Tcl's obj__create; the cookie says which), or for C from a
 * uprobe on malloc, counted per block size. The counts are cumulative; the front end differences them. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "maps.bpf.h"
#include "usdt_args.bpf.h"
#include "uobjnew.h"

/* Allocations not counted because `allocs` was full. */
__u64 types_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TYPES);
	__type(key, struct alloc_key);
	__type(value, struct alloc_val);
} allocs SEC(".maps");

/* A zeroed key, too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct alloc_key);
} key_scratch SEC(".maps");

static const struct alloc_val zero_val = {};

static __always_inline void count(struct alloc_key *key, __u64 bytes)
{
	struct alloc_val *val = bpf_map_lookup_or_try_init(&allocs, key, &zero_val);

	if (!val) {
		__sync_fetch_and_add(&types_full, 1);
		return;
	}
	__sync_fetch_and_add(&val->allocs, 1);
	__sync_fetch_and_add(&val->bytes, bytes);
}

static __always_inline struct alloc_key *scratch_key(void)
{
	__u32 zero = 0;
	struct alloc_key *key = bpf_map_lookup_elem(&key_scratch, &zero);

	if (key)
		__builtin_memset(key, 0, sizeof(*key));
	return key;
}

SEC("usdt")
int uobjnew_usdt(struct pt_regs *ctx)
{
	struct alloc_key *key = scratch_key();
	__u64 bytes = 0;
	__s64 size;

	if (!key)
		return 0;
	switch (bpf_usdt_cookie(ctx)) {
	case ALLOC_JAVA:
		usdt_read_counted(key->name, NAME_LEN, usdt_arg(ctx, 1), usdt_arg(ctx, 2));
		/* An int. OpenJDK 17's interpreter passes no real size on its fast path (0 or a stray register):
		 * a negative one is taken as 0. */
		size = (__s64)usdt_arg(ctx, 3);
		bytes = size > 0 ? size : 0;
		break;
	case ALLOC_RUBY:
		bpf_probe_read_user_str(key->name, NAME_LEN, (void *)usdt_arg(ctx, 0));
		break;
	default:
		break;
	}
	count(key, bytes);
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(uobjnew_malloc, size_t size)
{
	struct alloc_key *key = scratch_key();

	if (!key)
		return 0;
	key->size = size;
	count(key, size);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
