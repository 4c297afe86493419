// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What dcstat.bpf.c and the Rust side share (constants reach Rust as bpf::consts). */
#ifndef __DCSTAT_H
#define __DCSTAT_H

/* The counters (keys of the per-CPU `stats` array), in BCC's column order. */
#define S_REFS 0 /* path components looked up in the dcache (lookup_fast) */
#define S_SLOW 1 /* lookups that took the slower path (d_lookup, or d_alloc_parallel after lookup_fast failed) */
#define S_MISS 2 /* lookups the dcache could not answer: the file system was asked */
#define S_MAXSTAT 3

/* Threads between a d_lookup that found nothing and the d_alloc_parallel that may follow it (open's path), or
 * between a kprobe at a function's entry and its return: the map's size bounds both. */
#define MAX_THREADS 10240

#endif
