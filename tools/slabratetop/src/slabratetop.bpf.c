// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* slabratetop: kernel slab allocations per cache, counted at the kmem:kmem_cache_alloc tracepoint.
 *
 * Since 6.1 the tracepoint passes the cache itself, kmem_cache_alloc(call_site, ptr, struct kmem_cache *s,
 * gfp_flags, node): the row is s->name and each allocation adds s->size bytes (the object as the allocator hands
 * it out, what BCC's kprobe on kmem_cache_alloc() adds). Before 6.1 it passed (call_site, ptr, bytes_req,
 * bytes_alloc, gfp_flags) with no cache, and kmem_cache_alloc_node was a second tracepoint of the same shape: there
 * the row is the allocating function (call_site, named by user space) and the bytes are bytes_alloc. User space
 * tells the two apart from BTF (kmem_cache_alloc_node exists only before 6.1) and sets `has_cache`.
 *
 * The handler is a tp_btf program, else a raw_tp one (same argument array), else a classic tracepoint reading the
 * record: its `name` string (6.1 and later, checked with CO-RE) or its call_site, and bytes_alloc. Rows are
 * cumulative and never deleted by this side; -p compares the allocating task's process. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "slabratetop.h"

/* Set by user space: the tracepoint passes struct kmem_cache * (6.1+). */
const volatile bool has_cache = true;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ROWS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cache_key);
	__type(value, struct cache_stat);
} rows SEC(".maps");

/* Allocations not counted because the map was full (user space reports them). */
__u64 rows_full = 0;

/* Makes the structs visible to the skeleton's generated `types` module. */
struct cache_key _cache_key_type = {};
struct cache_stat _cache_stat_type = {};

static const struct cache_stat empty_stat;

static __always_inline void count(struct cache_key *key, __u64 bytes)
{
	struct cache_stat *stat = bpf_map_lookup_or_try_init(&rows, key, &empty_stat);

	if (!stat) {
		__sync_fetch_and_add(&rows_full, 1);
		return;
	}
	__sync_fetch_and_add(&stat->allocs, 1);
	__sync_fetch_and_add(&stat->bytes, bytes);
}

static __always_inline bool wanted(void)
{
	return tgid_wanted(bpf_get_current_pid_tgid() >> 32);
}

/* Both tracepoint forms: ctx[2] is the cache (6.1+), else ctx[3] is bytes_alloc and ctx[0] the call site. */
static __always_inline int allocated(unsigned long long *ctx)
{
	struct cache_key key = {};

	if (!wanted())
		return 0;
	if (has_cache) {
		struct kmem_cache *s = (struct kmem_cache *)ctx[2];

		bpf_probe_read_kernel_str(key.name, sizeof(key.name), BPF_CORE_READ(s, name));
		count(&key, BPF_CORE_READ(s, size));
	} else {
		key.call_site = ctx[0];
		count(&key, ctx[3]);
	}
	return 0;
}

TP_BTF_RAW(kmem_cache_alloc, kmem_cache_alloc)
{
	return allocated(ctx);
}

/* Before 6.1 only: the allocations of a chosen node (user space leaves it out where it does not exist). */
TP_BTF_RAW(kmem_cache_alloc_node, kmem_cache_alloc_node)
{
	return allocated(ctx);
}

/* The classic tracepoints' records, as far as this tool reads them (CO-RE: fields found by name). 6.1 and later:
 * kmem_cache_alloc's own record, with the cache's name as a string in it on the kernels that record it (else the
 * call site); before 6.1: the record of the kmem_alloc class, shared by kmem_cache_alloc and kmem_cache_alloc_node. */
struct trace_event_raw_kmem_cache_alloc___x {
	unsigned long call_site;
	u32 __data_loc_name;
	size_t bytes_alloc;
} __attribute__((preserve_access_index));

struct trace_event_raw_kmem_alloc___x {
	unsigned long call_site;
	size_t bytes_alloc;
} __attribute__((preserve_access_index));

static __always_inline int record_allocated(void *ctx)
{
	struct cache_key key = {};
	__u64 bytes;

	if (!wanted())
		return 0;
	if (has_cache) {
		struct trace_event_raw_kmem_cache_alloc___x *rec = ctx;

		if (bpf_core_field_exists(rec->__data_loc_name)) {
			u32 loc = BPF_CORE_READ(rec, __data_loc_name);

			bpf_probe_read_kernel_str(key.name, sizeof(key.name), (char *)ctx + (loc & 0xffff));
		} else {
			key.call_site = BPF_CORE_READ(rec, call_site);
		}
		bytes = BPF_CORE_READ(rec, bytes_alloc);
	} else {
		struct trace_event_raw_kmem_alloc___x *rec = ctx;

		key.call_site = BPF_CORE_READ(rec, call_site);
		bytes = BPF_CORE_READ(rec, bytes_alloc);
	}
	count(&key, bytes);
	return 0;
}

SEC("tracepoint/kmem/kmem_cache_alloc")
int kmem_cache_alloc_tp(void *ctx)
{
	return record_allocated(ctx);
}

/* Before 6.1 only: kmem_cache_alloc_node's record (class kmem_alloc_node) is kmem_alloc's with `node` added at
 * the end, so call_site and bytes_alloc sit where the kmem_alloc layout above finds them. */
SEC("tracepoint/kmem/kmem_cache_alloc_node")
int kmem_cache_alloc_node_tp(void *ctx)
{
	return record_allocated(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
