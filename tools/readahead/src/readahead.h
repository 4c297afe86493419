// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What readahead.bpf.c and the Rust side share (constants reach Rust as bpf::consts::NAME). */
#ifndef __READAHEAD_H
#define __READAHEAD_H

/* Age slots in milliseconds: 2^31 ms (24 days) and more share the last one. */
#define MAX_SLOTS 32
/* Read-ahead folios waiting for their first use, at most (an LRU map: the oldest are forgotten first). */
#define MAX_BIRTHS 65536
/* Files with read-ahead folios waiting (tracepoint path), at most. */
#define MAX_FILES 8192
/* Tasks inside a read-ahead at once, at most. */
#define MAX_TASKS 10240
/* Tracepoint path: page indexes looked at per use event (a read or a fault over a range of the file). */
#define MAX_SCAN 2048
/* Tracepoint path: the largest folio order looked for when a use starts inside a folio. */
#define MAX_FOLIO_ORDER 10

/* A read-ahead folio: its address (fentry, kprobe), or its file and index (tracepoints). */
struct birth_key {
	__u64 dev;
	__u64 ino;
	__u64 index;
};

struct birth {
	__u64 ts;
	__u64 pages;
};

/* struct hist, the cumulative log2 histogram (bpf/include/hist.h): count and slots count pages. */
#include "hist.h"

#endif
