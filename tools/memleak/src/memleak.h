// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What memleak.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __MEMLEAK_H
#define __MEMLEAK_H

/* Outstanding allocations tracked at once (BCC's size); more are counted in lost_allocs. */
#define MAX_ALLOCS 1000000
/* Distinct stacks with combined totals; more are counted in lost_combined. */
#define MAX_COMBINED 10240
/* Pending calls (entered, not yet returned). */
#define MAX_PENDING 10240

/* The allocator a pending call is in: part of its key, so that one allocator calling another (realloc(NULL, n)
 * calls malloc) keeps both calls apart. KIND_FREE only names -t's events. */
#define KIND_KERNEL 0
#define KIND_MALLOC 1
#define KIND_CALLOC 2
#define KIND_REALLOC 3
#define KIND_MMAP 4
#define KIND_POSIX_MEMALIGN 5
#define KIND_VALLOC 6
#define KIND_MEMALIGN 7
#define KIND_PVALLOC 8
#define KIND_ALIGNED_ALLOC 9
#define KIND_FREE 10
#define KIND_MUNMAP 11

/* -t's events. */
#define EV_ALLOC_ENTER 1
#define EV_ALLOC_EXIT 2
#define EV_FREE 3

/* One outstanding allocation, by address (a page frame number for the page allocator). */
struct alloc_info {
	__u64 size;
	__u64 timestamp_ns;
	__s32 stack_id;
	__u32 pad;
};

/* The outstanding allocations of one stack, kept as they happen (--combined-only). */
struct combined_info {
	__u64 total_size;
	__u64 number_of_allocs;
};

/* One allocator call or free, for -t. */
struct alloc_event {
	__u32 type;
	__u32 kind;
	__u32 pid;
	__u32 tid;
	__u64 size;
	__u64 addr;
};

#endif
