// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* swapin: pages read back from swap, counted per process (PID and task name) in a hash map (no events).
 *
 * Three ways to see a swap-in, one chosen at load time:
 *  - the kernel function that reads a folio (or, before Linux 6.10, a page) from swap: swap_read_folio or
 *    swap_readpage, with fentry, else a kprobe (BCC's hook). It runs in the task that needs the data (the
 *    faulting task, or swapoff), for every swap-in: from a swap device or file, from zswap, or a page known to be
 *    all zeroes. Counts the folio's pages (BCC counts calls; they differ only for large folios).
 *  - the memory cgroup event counters' tracepoint, memcg:count_memcg_events (Linux 6.14+), where the swap code
 *    counts PSWPIN (read from the device), ZSWPIN (from zswap) and SWPIN_ZERO (a zero-filled page) with the
 *    number of pages, in the same task as the kernel function. It fires for every other memcg event too (each
 *    page fault counts PGFAULT): the program leaves those after one comparison.
 *  - the block layer's block:block_bio_queue tracepoint, for kernels without the memcg one: a read bio whose
 *    completion is the swap code's (bi_end_io == end_swap_bio_read, whose address user space takes from
 *    /proc/kallsyms), or a read of a swap device (not file) whose number user space put in swap_devs (the
 *    synchronous path of zram and similar devices waits with submit_bio_wait, another completion). Counts the
 *    bio's bytes in pages, against the submitting task. It cannot see swap-ins that issue no bio (zswap hits,
 *    zero-filled pages of 6.12+, and devices read through ->rw_page before 6.3): user space warns where it can.
 * Counts are cumulative; user space prints what each process gained in an interval and deletes exited ones. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "maps.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "swapin.h"

#define PAGE_SHIFT 12
/* REQ_OP_READ is 0 in the low bits of bi_opf (the op mask is 8 bits wide since 4.10). */
#define REQ_OP_MASK 0xff

/* Kernel function path: the function's first argument is a folio (swap_read_folio), not a page. */
const volatile bool arg_is_folio = false;
/* memcg path: the vm_event_item values to count (-1: the kernel has no such item). */
const volatile int item_pswpin = -1;
const volatile int item_zswpin = -1;
const volatile int item_swpin_zero = -1;
/* Block path: the address of end_swap_bio_read (0: unknown), and whether bios name their device through
 * bi_bdev (5.12+; swap_devs is matched only then). */
const volatile __u64 swap_end_io = 0;
const volatile bool match_devs = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCESSES);
	__type(key, struct swapin_key);
	__type(value, __u64);
} counts SEC(".maps");

/* Block path: the device numbers (kernel dev_t: major << 20 | minor) of the active swap devices. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SWAP_DEVS);
	__type(key, __u32);
	__type(value, __u8);
} swap_devs SEC(".maps");

/* Pages not counted because `counts` was full (user space reports them). */
__u64 counts_full = 0;

static __always_inline int count(__u64 pages)
{
	struct swapin_key key = { .pid = bpf_get_current_pid_tgid() >> 32 };

	if (!pages)
		return 0;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	counter_add(&counts, &key, pages, &counts_full);
	return 0;
}

/* ---- kernel function: swap_read_folio (or swap_readpage) ---- */

/* The pages of the folio (or page) the function was given. A folio's flags word is its first field (the
 * struct page it overlays starts with it, in every kernel); a large folio has PG_head there, and its order in
 * the low byte of _flags_1 (6.6+, and swap_read_folio is 6.10+). A page (swap_readpage) counts one. */
static __always_inline int count_arg(void *arg)
{
	struct folio *folio = arg;
	unsigned long flags = 0, flags_1 = 0;
	int head;

	if (!arg_is_folio)
		return count(1);
	head = bpf_core_enum_value(enum pageflags, PG_head);
	if (bpf_probe_read_kernel(&flags, sizeof(flags), folio) || !(flags & (1UL << head)))
		return count(1);
	flags_1 = BPF_CORE_READ(folio, _flags_1);
	return count(1ULL << (flags_1 & 0xff));
}

SEC("fentry/swap_read_folio")
int BPF_PROG(swap_read_fentry, void *arg)
{
	return count_arg(arg);
}

SEC("kprobe/swap_read_folio")
int BPF_KPROBE(swap_read_kprobe, void *arg)
{
	return count_arg(arg);
}

/* ---- memcg:count_memcg_events ---- */

TP_BTF_RAW(memcg_event, count_memcg_events, struct mem_cgroup *memcg, int item, unsigned long val)
{
	if (item == item_pswpin || item == item_zswpin || item == item_swpin_zero)
		return count(val);
	return 0;
}

/* ---- block:block_bio_queue ---- */

/* The device of a bio on kernels with bio->bi_bdev (5.12+). */
struct bio___bdev {
	struct block_device *bi_bdev;
} __attribute__((preserve_access_index));

static __always_inline bool swap_dev(struct bio *bio)
{
	struct bio___bdev *b = (void *)bio;
	__u32 dev;

	if (!match_devs || !bpf_core_field_exists(b->bi_bdev))
		return false;
	dev = BPF_CORE_READ(b, bi_bdev, bd_dev);
	return bpf_map_lookup_elem(&swap_devs, &dev) != NULL;
}

static __always_inline int bio_queued(struct bio *bio)
{
	if ((BPF_CORE_READ(bio, bi_opf) & REQ_OP_MASK) != 0)
		return 0; /* not a read */
	if ((__u64)BPF_CORE_READ(bio, bi_end_io) != swap_end_io && !swap_dev(bio))
		return 0;
	return count(BPF_CORE_READ(bio, bi_iter.bi_size) >> PAGE_SHIFT);
}

/* block_bio_queue(bio) since 5.11; (q, bio) before (user space keeps the pair that matches the kernel's BTF). */
TP_BTF_RAW(bio_queue, block_bio_queue, struct bio *bio)
{
	return bio_queued(bio);
}

TP_BTF_RAW(bio_queue_q, block_bio_queue, struct request_queue *q, struct bio *bio)
{
	return bio_queued(bio);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
