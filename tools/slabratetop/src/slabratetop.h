// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What slabratetop.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __SLABRATETOP_H
#define __SLABRATETOP_H

/* A cache's name as the kernel keeps it, cut to this many bytes with its NUL (BCC's width). */
#define CACHE_NAME_LEN 32
/* Rows (caches, or allocating functions on kernels before 6.1) counted at once; more are counted in rows_full. */
#define MAX_ROWS 4096

/* A row of the screen: the cache by name (6.1 and later), else the allocating function by address. */
struct cache_key {
	char name[CACHE_NAME_LEN];
	__u64 call_site;	/* 0 when the name is known */
};

/* A row's allocations so far, cumulative (user space prints differences). */
struct cache_stat {
	__u64 allocs;
	__u64 bytes;		/* the cache's object size (with its metadata) per allocation, as the kernel hands out */
};

#endif
