// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* cachestat: page cache additions, accesses and dirtyings, counted in a per-CPU array (no events).
 *
 * Two paths, one chosen at load time:
 *  - kernel functions (fentry, else kprobes), as BCC: one count per call of the page cache's add function
 *    (filemap_add_folio or add_to_page_cache_lru), its access function (folio_mark_accessed or
 *    mark_page_accessed), its dirty accounting (folio_account_dirtied, account_page_dirtied or __folio_mark_dirty)
 *    and mark_buffer_dirty; user space picks the names from BTF.
 *  - tracepoints (tp_btf, else raw_tp), for kernels that trace no kernel function: filemap:mm_filemap_add_to_page_cache
 *    and writeback:writeback_dirty_folio count the pages of each folio; filemap:mm_filemap_get_pages (buffered
 *    reads) counts the pages of each read's range, clamped to the file's size, once per read (the later calls of
 *    one read for the rest of the same range add nothing, and a read that starts in the page the task's previous
 *    read of the file ended in does not count that page again, as filemap_read marks it accessed once);
 *    filemap:mm_filemap_map_pages (fault-around of mapped files) counts its window, and mm_filemap_fault one
 *    page unless it lies in the window the task's last fault-around just counted. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "cachestat.h"

#define PAGE_SHIFT 12

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* Tracepoint path: per task, the last read's range and the last fault-around window counted. */
struct last_use {
	void *read_mapping;
	__u64 read_first;
	__u64 read_last;     /* the last page counted (clamped to the file's size) */
	__u64 read_asked;    /* the last page the read asked for, as the tracepoint gives it */
	void *map_mapping;
	__u64 map_first;
	__u64 map_last;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct last_use);
} last_uses SEC(".maps");

static __always_inline int count(__u32 key, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &key);

	if (v)
		*v += n;
	return 0;
}

/* ---- kernel functions: fentry ---- */

SEC("fentry/filemap_add_folio")
int BPF_PROG(add_fentry) { return count(C_ADDED, 1); }
SEC("fentry/folio_mark_accessed")
int BPF_PROG(access_fentry) { return count(C_ACCESSED, 1); }
SEC("fentry/folio_account_dirtied")
int BPF_PROG(dirtied_fentry) { return count(C_DIRTIED, 1); }
SEC("fentry/mark_buffer_dirty")
int BPF_PROG(bufdirty_fentry) { return count(C_BUFDIRTY, 1); }

/* ---- kernel functions: kprobes ---- */

SEC("kprobe/filemap_add_folio")
int BPF_KPROBE(add_kprobe) { return count(C_ADDED, 1); }
SEC("kprobe/folio_mark_accessed")
int BPF_KPROBE(access_kprobe) { return count(C_ACCESSED, 1); }
SEC("kprobe/folio_account_dirtied")
int BPF_KPROBE(dirtied_kprobe) { return count(C_DIRTIED, 1); }
SEC("kprobe/mark_buffer_dirty")
int BPF_KPROBE(bufdirty_kprobe) { return count(C_BUFDIRTY, 1); }

/* ---- tracepoints ---- */

/* The folio's order in its second page's flags (6.7+; the tracepoint path needs 6.11+ anyway). */
struct folio___flags1 {
	unsigned long _flags_1;
} __attribute__((preserve_access_index));

/* How many pages a folio holds: 1 unless its head flag is set, else 2^order. */
static __always_inline __u64 folio_pages(void *folio)
{
	struct folio___flags1 *f = folio;
	unsigned long flags = 0, flags1 = 0;
	int head;

	if (!bpf_core_enum_value_exists(enum pageflags, PG_head) || !bpf_core_field_exists(f->_flags_1))
		return 1;
	head = bpf_core_enum_value(enum pageflags, PG_head);
	/* The page flags are the folio's first word on every kernel. */
	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1UL << (head & 63))))
		return 1;
	flags1 = BPF_CORE_READ(f, _flags_1);
	return 1ULL << ((flags1 & 0xff) & 31);
}

/* The last page of a file, from its size; -1 (nothing) for an empty file. */
static __always_inline __s64 last_page(struct address_space *mapping)
{
	__s64 size = BPF_CORE_READ(mapping, host, i_size);

	return size > 0 ? (size - 1) >> PAGE_SHIFT : -1;
}

static __always_inline struct last_use *task_last_use(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct last_use zero = {}, *u;

	u = bpf_map_lookup_elem(&last_uses, &tid);
	if (u)
		return u;
	bpf_map_update_elem(&last_uses, &tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&last_uses, &tid);
}

TP_BTF_RAW(added, mm_filemap_add_to_page_cache, struct folio *folio)
{
	return count(C_ADDED, folio_pages(folio));
}

TP_BTF_RAW(dirtied, writeback_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	return count(C_DIRTIED, folio_pages(folio));
}

TP_BTF_RAW(get_pages, mm_filemap_get_pages, struct address_space *mapping, unsigned long index,
	   unsigned long asked)
{
	struct last_use *u = task_last_use();
	__s64 end = last_page(mapping);
	__u64 first = index, last = asked;

	if (end < 0)
		return 0;
	if (last > (__u64)end)
		last = end;
	if (!u) {
		if (first <= last)
			count(C_ACCESSED, last - first + 1);
		return 0;
	}
	if (u->read_mapping == mapping && u->read_asked == asked && first > u->read_first &&
	    first <= u->read_last + 1) {
		/* The same read going on for the rest of its range: counted by its first call. */
		if (last > u->read_last) {
			count(C_ACCESSED, last - u->read_last);
			u->read_last = last;
		}
		return 0;
	}
	/* A read starting in the page the previous one ended in: that page was counted then. */
	if (u->read_mapping == mapping && first == u->read_last)
		first++;
	if (first <= last)
		count(C_ACCESSED, last - first + 1);
	u->read_mapping = mapping;
	u->read_first = index;
	u->read_last = last;
	u->read_asked = asked;
	return 0;
}

TP_BTF_RAW(map_pages, mm_filemap_map_pages, struct address_space *mapping, unsigned long first,
	   unsigned long last)
{
	struct last_use *u = task_last_use();
	__s64 end = last_page(mapping);

	if (end < 0)
		return 0;
	if (last > (__u64)end)
		last = end;
	if (first > last)
		return 0;
	count(C_ACCESSED, last - first + 1);
	if (u) {
		u->map_mapping = mapping;
		u->map_first = first;
		u->map_last = last;
	}
	return 0;
}

TP_BTF_RAW(fault, mm_filemap_fault, struct address_space *mapping, unsigned long index)
{
	struct last_use *u = task_last_use();

	if (u && u->map_mapping == mapping && index >= u->map_first && index <= u->map_last) {
		/* Counted in the fault-around window just before; forget it so a later fault counts. */
		u->map_mapping = NULL;
		return 0;
	}
	return count(C_ACCESSED, 1);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
