// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* memleak: track the allocations not yet freed, by address, each with its size, time and stack, and the totals
 * per stack. User mode: uprobes on the allocator's entry (the size) and return (the address) and on free/munmap.
 * Kernel mode: the kmem (and percpu) tracepoints, which carry the address and size at once. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"
#include "filter.bpf.h"
#include "stacks.bpf.h"
#include "ringbuf.bpf.h"
#include "memleak.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u64 min_size = 0;
const volatile __u64 max_size = (__u64)-1;
const volatile __u64 sample_every_n = 1;
const volatile __u64 page_size = 4096;
const volatile bool user_stacks = true;
const volatile bool trace_all = false;
const volatile bool wa_missing_free = false;

/* Allocations not tracked: the allocs map was full. */
__u64 lost_allocs = 0;
/* Allocations left out of the per-stack totals: the combined map was full. */
__u64 lost_combined = 0;
/* Calls whose entry could not be kept until their return. */
__u64 lost_pending = 0;
/* -t events that found no room in the ring buffer. */
__u64 lost_events = 0;

/* New processes not reported in time for their maps to be saved. */
__u64 lost_notices = 0;

STACK_TRACE_MAP(stack_traces);
/* User mode: the traced process is reported at its first recorded allocation, when its libraries are mapped, so
 * that its frames can be named even after it exits (a -c command that ends quickly). */
PROCESS_NOTICE_MAPS(seen, new_pids);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PENDING);
	__type(key, __u64);
	__type(value, __u64);
} sizes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PENDING);
	__type(key, __u32);
	__type(value, __u64);
} memptrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ALLOCS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct alloc_info);
} allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_COMBINED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct combined_info);
} combined_allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static const struct combined_info zero_combined;

static __always_inline void trace(__u32 type, __u32 kind, __u64 size, __u64 addr)
{
	struct alloc_event *e;
	__u64 id;

	if (!trace_all)
		return;
	e = ringbuf_reserve(&events, sizeof(*e), &lost_events);
	if (!e)
		return;
	id = bpf_get_current_pid_tgid();
	e->type = type;
	e->kind = kind;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->size = size;
	e->addr = addr;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void combined_add(__s32 stack_id, __u64 size)
{
	__u64 key = (__u64)(__s64)stack_id;
	struct combined_info *c = bpf_map_lookup_or_try_init(&combined_allocs, &key, &zero_combined);

	if (!c) {
		__sync_fetch_and_add(&lost_combined, 1);
		return;
	}
	__sync_fetch_and_add(&c->total_size, size);
	__sync_fetch_and_add(&c->number_of_allocs, 1);
}

static __always_inline void combined_del(__s32 stack_id, __u64 size)
{
	__u64 key = (__u64)(__s64)stack_id;
	struct combined_info *c = bpf_map_lookup_elem(&combined_allocs, &key);

	if (!c)
		return;
	__sync_fetch_and_sub(&c->total_size, size);
	__sync_fetch_and_sub(&c->number_of_allocs, 1);
	/* A stack with nothing outstanding leaves the map, so that it holds live stacks only. Another CPU adding to
	 * it at this moment may lose that one allocation from the totals (as in BCC); the records are exact. */
	if (c->number_of_allocs == 0)
		bpf_map_delete_elem(&combined_allocs, &key);
}

/* The allocation at `addr` is gone: forget it and take it out of its stack's totals. */
static __always_inline int free_addr(__u64 addr, __u32 kind)
{
	struct alloc_info *info = bpf_map_lookup_elem(&allocs, &addr);
	struct alloc_info copy;

	if (!info)
		return 0;
	copy = *info;
	if (bpf_map_delete_elem(&allocs, &addr))
		return 0; /* another CPU freed it first */
	combined_del(copy.stack_id, copy.size);
	trace(EV_FREE, kind, copy.size, addr);
	return 0;
}

static __always_inline bool size_wanted(__u64 size)
{
	if (size < min_size || size > max_size)
		return false;
	if (sample_every_n > 1 && bpf_ktime_get_ns() % sample_every_n != 0)
		return false;
	return true;
}

/* Records a completed allocation of `size` bytes at `addr`. An address still recorded was freed without our
 * seeing it (a free path not probed): its old record goes first, so no address counts twice. */
static __always_inline void record(void *ctx, __u64 addr, __u64 size, __u32 kind)
{
	struct alloc_info info = {};

	if (kind != KIND_KERNEL || wa_missing_free)
		free_addr(addr, kind);
	info.size = size;
	info.timestamp_ns = bpf_ktime_get_ns();
	info.stack_id = bpf_get_stackid(ctx, &stack_traces, user_stacks ? BPF_F_USER_STACK : 0);
	if (bpf_map_update_elem(&allocs, &addr, &info, BPF_ANY)) {
		__sync_fetch_and_add(&lost_allocs, 1);
		return;
	}
	combined_add(info.stack_id, size);
	if (user_stacks)
		notice_process(&seen, &new_pids, bpf_get_current_pid_tgid() >> 32, &lost_notices);
	trace(EV_ALLOC_EXIT, kind, size, addr);
}

static __always_inline __u64 pending_key(__u32 kind)
{
	return (__u64)kind << 32 | (__u32)bpf_get_current_pid_tgid();
}

static __always_inline int alloc_enter(__u64 size, __u32 kind)
{
	__u64 key;

	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (!size_wanted(size))
		return 0;
	key = pending_key(kind);
	if (bpf_map_update_elem(&sizes, &key, &size, BPF_ANY))
		__sync_fetch_and_add(&lost_pending, 1);
	trace(EV_ALLOC_ENTER, kind, size, 0);
	return 0;
}

static __always_inline int alloc_exit(void *ctx, __u64 addr, __u32 kind)
{
	__u64 key = pending_key(kind);
	__u64 *size = bpf_map_lookup_elem(&sizes, &key);
	__u64 sz;

	if (!size)
		return 0; /* entry not seen (filtered, or the probe attached in between) */
	sz = *size;
	bpf_map_delete_elem(&sizes, &key);
	/* NULL, or MAP_FAILED from mmap: nothing allocated. */
	if (addr == 0 || addr == (__u64)-1)
		return 0;
	record(ctx, addr, sz, kind);
	return 0;
}

static __always_inline int user_free(__u64 addr, __u32 kind)
{
	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	return free_addr(addr, kind);
}

/* Each user-mode probe twice: a classic uprobe and a uprobe_multi one; the loader keeps the pair's one that the
 * attach mechanism uses. */
#define UPROBE_PAIR(name, ...)                                                                                     \
	SEC("uprobe") int name(struct pt_regs *ctx) __VA_ARGS__                                                    \
	SEC("uprobe.multi") int name##_multi(struct pt_regs *ctx) __VA_ARGS__
#define URETPROBE_PAIR(name, ...)                                                                                  \
	SEC("uretprobe") int name(struct pt_regs *ctx) __VA_ARGS__                                                 \
	SEC("uretprobe.multi") int name##_multi(struct pt_regs *ctx) __VA_ARGS__

UPROBE_PAIR(malloc_enter, { return alloc_enter(PT_REGS_PARM1(ctx), KIND_MALLOC); })
URETPROBE_PAIR(malloc_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_MALLOC); })
UPROBE_PAIR(calloc_enter, { return alloc_enter(PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx), KIND_CALLOC); })
URETPROBE_PAIR(calloc_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_CALLOC); })
/* realloc is a free of the old block and an allocation of the new one. */
UPROBE_PAIR(realloc_enter, {
	user_free(PT_REGS_PARM1(ctx), KIND_REALLOC);
	return alloc_enter(PT_REGS_PARM2(ctx), KIND_REALLOC);
})
URETPROBE_PAIR(realloc_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_REALLOC); })
UPROBE_PAIR(mmap_enter, { return alloc_enter(PT_REGS_PARM2(ctx), KIND_MMAP); })
URETPROBE_PAIR(mmap_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_MMAP); })
UPROBE_PAIR(posix_memalign_enter, {
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 memptr = PT_REGS_PARM1(ctx);

	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	bpf_map_update_elem(&memptrs, &tid, &memptr, BPF_ANY);
	return alloc_enter(PT_REGS_PARM3(ctx), KIND_POSIX_MEMALIGN);
})
URETPROBE_PAIR(posix_memalign_exit, {
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *memptr = bpf_map_lookup_elem(&memptrs, &tid);
	__u64 where, addr = 0;

	if (!memptr)
		return 0;
	where = *memptr;
	bpf_map_delete_elem(&memptrs, &tid);
	/* Non-zero: an error number, and *memptr untouched. */
	if (PT_REGS_RC(ctx) == 0)
		bpf_probe_read_user(&addr, sizeof(addr), (void *)where);
	return alloc_exit(ctx, addr, KIND_POSIX_MEMALIGN);
})
UPROBE_PAIR(aligned_alloc_enter, { return alloc_enter(PT_REGS_PARM2(ctx), KIND_ALIGNED_ALLOC); })
URETPROBE_PAIR(aligned_alloc_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_ALIGNED_ALLOC); })
UPROBE_PAIR(valloc_enter, { return alloc_enter(PT_REGS_PARM1(ctx), KIND_VALLOC); })
URETPROBE_PAIR(valloc_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_VALLOC); })
UPROBE_PAIR(memalign_enter, { return alloc_enter(PT_REGS_PARM2(ctx), KIND_MEMALIGN); })
URETPROBE_PAIR(memalign_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_MEMALIGN); })
UPROBE_PAIR(pvalloc_enter, { return alloc_enter(PT_REGS_PARM1(ctx), KIND_PVALLOC); })
URETPROBE_PAIR(pvalloc_exit, { return alloc_exit(ctx, PT_REGS_RC(ctx), KIND_PVALLOC); })
UPROBE_PAIR(free_enter, { return user_free(PT_REGS_PARM1(ctx), KIND_FREE); })
UPROBE_PAIR(munmap_enter, { return user_free(PT_REGS_PARM1(ctx), KIND_MUNMAP); })

/* Kernel mode. Before 6.0 the allocation tracepoints shared the event classes kmem_alloc and kmem_alloc_node
 * (kmalloc_node and kmem_cache_alloc_node were tracepoints of their own until 6.1), whose records differ from
 * today's: read through CO-RE, the layout chosen by which types the kernel has. */
struct trace_event_raw_kmem_alloc___old {
	const void *ptr;
	size_t bytes_alloc;
} __attribute__((preserve_access_index));

struct trace_event_raw_kmem_alloc_node___old {
	const void *ptr;
	size_t bytes_alloc;
} __attribute__((preserve_access_index));

static __always_inline int kernel_alloc(void *ctx, __u64 addr, __u64 size)
{
	if (!size_wanted(size))
		return 0;
	trace(EV_ALLOC_ENTER, KIND_KERNEL, size, 0);
	if (addr)
		record(ctx, addr, size, KIND_KERNEL);
	return 0;
}

SEC("tracepoint/kmem/kmalloc")
int memleak_kmalloc(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_kmalloc)) {
		struct trace_event_raw_kmalloc *args = ctx;
		return kernel_alloc(ctx, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, bytes_alloc));
	} else {
		struct trace_event_raw_kmem_alloc___old *args = ctx;
		return kernel_alloc(ctx, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, bytes_alloc));
	}
}

SEC("tracepoint/kmem/kmem_cache_alloc")
int memleak_kmem_cache_alloc(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_kmem_cache_alloc)) {
		struct trace_event_raw_kmem_cache_alloc *args = ctx;
		return kernel_alloc(ctx, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, bytes_alloc));
	} else {
		struct trace_event_raw_kmem_alloc___old *args = ctx;
		return kernel_alloc(ctx, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, bytes_alloc));
	}
}

/* The _node variants, separate tracepoints before 6.1: class kmem_alloc_node, renamed kmem_alloc in between. */
static __always_inline int node_alloc(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_kmem_alloc_node___old)) {
		struct trace_event_raw_kmem_alloc_node___old *args = ctx;
		return kernel_alloc(ctx, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, bytes_alloc));
	} else {
		struct trace_event_raw_kmem_alloc___old *args = ctx;
		return kernel_alloc(ctx, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, bytes_alloc));
	}
}

SEC("tracepoint/kmem/kmalloc_node")
int memleak_kmalloc_node(void *ctx)
{
	return node_alloc(ctx);
}

SEC("tracepoint/kmem/kmem_cache_alloc_node")
int memleak_kmem_cache_alloc_node(void *ctx)
{
	return node_alloc(ctx);
}

/* Before 5.12 (kmem_cache_free) and 5.16 (kfree) both frees shared the event class kmem_free. */
struct trace_event_raw_kmem_free___old {
	const void *ptr;
} __attribute__((preserve_access_index));

SEC("tracepoint/kmem/kfree")
int memleak_kfree(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_kfree)) {
		struct trace_event_raw_kfree *args = ctx;
		return free_addr((__u64)BPF_CORE_READ(args, ptr), KIND_KERNEL);
	} else {
		struct trace_event_raw_kmem_free___old *args = ctx;
		return free_addr((__u64)BPF_CORE_READ(args, ptr), KIND_KERNEL);
	}
}

SEC("tracepoint/kmem/kmem_cache_free")
int memleak_kmem_cache_free(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_kmem_cache_free)) {
		struct trace_event_raw_kmem_cache_free *args = ctx;
		return free_addr((__u64)BPF_CORE_READ(args, ptr), KIND_KERNEL);
	} else {
		struct trace_event_raw_kmem_free___old *args = ctx;
		return free_addr((__u64)BPF_CORE_READ(args, ptr), KIND_KERNEL);
	}
}

/* Pages by frame number: the page tracepoints give it for both page interfaces. */
SEC("tracepoint/kmem/mm_page_alloc")
int memleak_mm_page_alloc(struct trace_event_raw_mm_page_alloc *args)
{
	return kernel_alloc(args, BPF_CORE_READ(args, pfn), page_size << BPF_CORE_READ(args, order));
}

SEC("tracepoint/kmem/mm_page_free")
int memleak_mm_page_free(struct trace_event_raw_mm_page_free *args)
{
	return free_addr(BPF_CORE_READ(args, pfn), KIND_KERNEL);
}

SEC("tracepoint/percpu/percpu_alloc_percpu")
int memleak_percpu_alloc_percpu(struct trace_event_raw_percpu_alloc_percpu *args)
{
	return kernel_alloc(args, (__u64)BPF_CORE_READ(args, ptr), BPF_CORE_READ(args, size));
}

SEC("tracepoint/percpu/percpu_free_percpu")
int memleak_percpu_free_percpu(struct trace_event_raw_percpu_free_percpu *args)
{
	return free_addr((__u64)BPF_CORE_READ(args, ptr), KIND_KERNEL);
}
