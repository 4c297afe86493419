// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* readahead: pages read ahead into the page cache, which of them were used, and how old each was at its first use.
 *
 * Three paths, one chosen at load time:
 *  - fentry/fexit, else kprobe/kretprobe (BCC's and libbpf-tools' design): a task is marked while it runs a
 *    read-ahead function (page_cache_ra_unbounded or its older names, and page_cache_ra_order); the folios it
 *    allocates meanwhile (filemap_alloc_folio[_noprof], or __page_cache_alloc) are born, keyed by address; their
 *    first folio_mark_accessed (mark_page_accessed) is their use.
 *  - classic tracepoints, for kernels without kprobes or fentry (recent kernels, which have the readahead tracepoints):
 *    readahead:page_cache_ra_unbounded and page_cache_ra_order mark the task with the file and the window of
 *    page indexes the read-ahead fills; filemap:mm_filemap_add_to_page_cache by that task, in that file and window,
 *    is a birth, keyed by (device, inode, index); filemap:mm_filemap_get_pages (read), mm_filemap_map_pages and
 *    mm_filemap_fault (mmap) are uses of a range of the file: the births in it are used; a fault on a page not
 *    cached yet uses the folio its own read-ahead adds for that page.
 * Counts are in pages (a folio of order n counts 2^n), cumulative and never cleared. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "bits.bpf.h"
#include "readahead.h"

/* fentry/kprobe path: the allocation function takes the folio order as its second argument (not __page_cache_alloc). */
const volatile bool alloc_has_order = true;

/* Pages read ahead, pages used, and the ages of the used ones (hist.count == used pages). */
__u64 total_pages = 0;
struct hist hist = {};
/* Births that could not be recorded (map update failed). */
__u64 births_failed = 0;

struct ra_task {
	__u32 depth;
	__u32 order;
	__u64 dev;
	__u64 ino;
	__u64 start;
	__u64 end;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct ra_task);
} in_ra SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_BIRTHS);
	__type(key, struct birth_key);
	__type(value, struct birth);
} births SEC(".maps");

/* Tracepoint path: the page a task faults on, while it is not in the page cache yet. mm_filemap_fault comes
 * before the fault's read-ahead; the folio that read-ahead adds for that page is used at once. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct birth_key);
} faulting SEC(".maps");

/* Tracepoint path: per file (device, inode), one past the highest page index born, to bound the scans. */
struct file_key {
	__u64 dev;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_FILES);
	__type(key, struct file_key);
	__type(value, __u64);
} files SEC(".maps");

static __always_inline void born(struct birth_key *key, __u64 pages)
{
	struct birth b = { .ts = bpf_ktime_get_ns(), .pages = pages };

	if (bpf_map_update_elem(&births, key, &b, BPF_ANY)) {
		__sync_fetch_and_add(&births_failed, 1);
		return;
	}
	__sync_fetch_and_add(&total_pages, pages);
}

/* The first use of a born folio: its age into the histogram, and it is forgotten. Returns its pages (0: none). */
static __always_inline __u64 used(struct birth_key *key, __u64 now)
{
	struct birth *b = bpf_map_lookup_elem(&births, key);
	__u64 pages, slot;
	__s64 age;

	if (!b)
		return 0;
	pages = b->pages;
	age = (__s64)(now - b->ts);
	if (bpf_map_delete_elem(&births, key))
		return pages; /* another CPU took it first */
	slot = age > 0 ? log2l((__u64)age / 1000000) : 0;
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist.slots[slot], pages);
	__sync_fetch_and_add(&hist.count, pages);
	__sync_fetch_and_add(&hist.sum_ns, (age > 0 ? (__u64)age : 0) * pages);
	return pages;
}

/* ---- fentry/fexit and kprobe/kretprobe ---- */

static __always_inline void ra_enter(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ra_task zero = {}, *t;

	t = bpf_map_lookup_elem(&in_ra, &tid);
	if (t) {
		t->depth++;
		return;
	}
	zero.depth = 1;
	bpf_map_update_elem(&in_ra, &tid, &zero, BPF_ANY);
}

static __always_inline void ra_exit(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ra_task *t = bpf_map_lookup_elem(&in_ra, &tid);

	if (!t)
		return;
	if (t->depth > 1)
		t->depth--;
	else
		bpf_map_delete_elem(&in_ra, &tid);
}

static __always_inline void allocated(void *folio, __u32 order)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct birth_key key = { .index = (__u64)folio };

	if (!folio || !bpf_map_lookup_elem(&in_ra, &tid))
		return;
	born(&key, 1ULL << (order & 31));
}

static __always_inline void accessed(void *folio)
{
	struct birth_key key = { .index = (__u64)folio };

	used(&key, bpf_ktime_get_ns());
}

/* The read-ahead function (page_cache_ra_unbounded or an older name), and page_cache_ra_order where it exists. */
SEC("fentry/page_cache_ra_unbounded")
int BPF_PROG(ra_fentry)
{
	ra_enter();
	return 0;
}

SEC("fexit/page_cache_ra_unbounded")
int BPF_PROG(ra_fexit)
{
	ra_exit();
	return 0;
}

SEC("fentry/page_cache_ra_order")
int BPF_PROG(ra_order_fentry)
{
	ra_enter();
	return 0;
}

SEC("fexit/page_cache_ra_order")
int BPF_PROG(ra_order_fexit)
{
	ra_exit();
	return 0;
}

/* filemap_alloc_folio[_noprof](gfp, order) or __page_cache_alloc(gfp): the new folio or page. */
SEC("fexit/filemap_alloc_folio")
int alloc_fexit(__u64 *ctx)
{
	if (alloc_has_order)
		allocated((void *)ctx[2], (__u32)ctx[1]);
	else
		allocated((void *)ctx[1], 0);
	return 0;
}

SEC("fentry/folio_mark_accessed")
int accessed_fentry(__u64 *ctx)
{
	accessed((void *)ctx[0]);
	return 0;
}

SEC("kprobe/page_cache_ra_unbounded")
int BPF_KPROBE(ra_kprobe)
{
	ra_enter();
	return 0;
}

SEC("kretprobe/page_cache_ra_unbounded")
int BPF_KRETPROBE(ra_kretprobe)
{
	ra_exit();
	return 0;
}

/* The order is an argument, gone at the return: kept in the task's mark at the entry. */
SEC("kprobe/filemap_alloc_folio")
int BPF_KPROBE(alloc_kprobe, __u64 gfp, __u64 order)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ra_task *t = bpf_map_lookup_elem(&in_ra, &tid);

	if (t)
		t->order = alloc_has_order ? (__u32)order : 0;
	return 0;
}

SEC("kretprobe/filemap_alloc_folio")
int BPF_KRETPROBE(alloc_kretprobe, void *folio)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ra_task *t = bpf_map_lookup_elem(&in_ra, &tid);

	if (t)
		allocated(folio, t->order);
	return 0;
}

SEC("kprobe/folio_mark_accessed")
int BPF_KPROBE(accessed_kprobe, void *folio)
{
	accessed(folio);
	return 0;
}

/* ---- classic tracepoints ---- */

static __always_inline void ra_window(__u64 dev, __u64 ino, __u64 index, __u64 nr)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	/* The kernel may align the first index down to the mapping's smallest folio. */
	struct ra_task t = { .dev = dev, .ino = ino, .start = index & ~((1ULL << MAX_FOLIO_ORDER) - 1),
			     .end = index + nr };

	bpf_map_update_elem(&in_ra, &tid, &t, BPF_ANY);
}

SEC("tracepoint/readahead/page_cache_ra_unbounded")
int ra_unbounded_tp(struct trace_event_raw_page_cache_ra_unbounded *ctx)
{
	ra_window(ctx->s_dev, ctx->i_ino, ctx->index, ctx->nr_to_read);
	return 0;
}

SEC("tracepoint/readahead/page_cache_ra_order")
int ra_order_tp(struct trace_event_raw_page_cache_ra_order *ctx)
{
	ra_window(ctx->s_dev, ctx->i_ino, ctx->index, ctx->size);
	return 0;
}

SEC("tracepoint/filemap/mm_filemap_add_to_page_cache")
int add_tp(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct birth_key key = { .dev = ctx->s_dev, .ino = ctx->i_ino, .index = ctx->index };
	struct file_key fk = { .dev = key.dev, .ino = key.ino };
	struct birth_key *fault;
	struct ra_task *t;
	__u64 pages = 1, end, *known;
	__u32 order = 0;

	t = bpf_map_lookup_elem(&in_ra, &tid);
	if (!t || t->dev != key.dev || t->ino != key.ino || key.index < t->start || key.index >= t->end)
		return 0;
	if (bpf_core_field_exists(ctx->order))
		order = BPF_CORE_READ(ctx, order);
	pages = 1ULL << (order & 31);
	born(&key, pages);
	fault = bpf_map_lookup_elem(&faulting, &tid);
	if (fault && fault->dev == key.dev && fault->ino == key.ino && fault->index >= key.index &&
	    fault->index < key.index + pages) {
		bpf_map_delete_elem(&faulting, &tid);
		used(&key, bpf_ktime_get_ns());
		return 0;
	}
	end = key.index + pages;
	known = bpf_map_lookup_elem(&files, &fk);
	if (!known)
		bpf_map_update_elem(&files, &fk, &end, BPF_NOEXIST);
	else if (*known < end)
		*known = end;
	return 0;
}

struct scan {
	struct birth_key key;
	__u64 last;
	__u64 now;
};

static long scan_one(__u64 i, struct scan *s)
{
	__u64 pages;

	if (s->key.index > s->last)
		return 1;
	pages = used(&s->key, s->now);
	s->key.index += pages ? pages : 1;
	return 0;
}

/* Pages [first, last] of a file are used: every born folio in that range, and the one the range starts inside. */
static __always_inline void use_range(__u64 dev, __u64 ino, __u64 first, __u64 last)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct file_key fk = { .dev = dev, .ino = ino };
	struct scan s = { .key = { .dev = dev, .ino = ino }, .now = bpf_ktime_get_ns() };
	__u64 *end;
	int order;

	/* A task that uses pages has finished any read-ahead it was in, and any fault before it. */
	bpf_map_delete_elem(&in_ra, &tid);
	bpf_map_delete_elem(&faulting, &tid);
	end = bpf_map_lookup_elem(&files, &fk);
	if (!end || first >= *end)
		return;
	if (last >= *end)
		last = *end - 1;
	/* Folios are aligned to their size in the page cache: a folio holding `first` starts at first rounded down.
	 * The scan goes on after it. */
	s.last = last;
	for (order = 1; order <= MAX_FOLIO_ORDER; order++) {
		__u64 head = first & ~((1ULL << order) - 1), pages;

		if (head == first)
			continue;
		s.key.index = head;
		pages = used(&s.key, s.now);
		if (pages) {
			first = head + pages;
			break;
		}
	}
	s.key.index = first;
	bpf_loop(MAX_SCAN, scan_one, &s, 0);
}

SEC("tracepoint/filemap/mm_filemap_get_pages")
int get_pages_tp(struct trace_event_raw_mm_filemap_op_page_cache_range *ctx)
{
	use_range(ctx->s_dev, ctx->i_ino, ctx->index, ctx->last_index);
	return 0;
}

SEC("tracepoint/filemap/mm_filemap_map_pages")
int map_pages_tp(struct trace_event_raw_mm_filemap_op_page_cache_range *ctx)
{
	use_range(ctx->s_dev, ctx->i_ino, ctx->index, ctx->last_index);
	return 0;
}

SEC("tracepoint/filemap/mm_filemap_fault")
int fault_tp(struct trace_event_raw_mm_filemap_fault *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct birth_key key = { .dev = ctx->s_dev, .ino = ctx->i_ino, .index = ctx->index };

	use_range(key.dev, key.ino, key.index, key.index);
	/* If the page is not cached yet, this fault reads it (ahead): see add_tp. */
	bpf_map_update_elem(&faulting, &tid, &key, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
