// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by wqlat.bpf.c and the Rust side (through the skeleton's `types`/`consts`). */
#ifndef __WQLAT_H
#define __WQLAT_H

/* Log2 slots: with -N, 2^40 ns (18 minutes) and more share the last one. */
#define MAX_SLOTS 40
/* A workqueue's name: 24 bytes before 6.10, 32 since. */
#define WQ_NAME_LEN 32
/* Work items queued and not yet started, timed at once (the start map); more are counted as not timed. */
#define MAX_QUEUED 16384
/* Histograms at most with -W (one per workqueue name). */
#define MAX_WQS 1024
/* -w: workqueues looked at, at most, for one of that name (the kernel's list of them, walked once). */
#define MAX_WALK 1024

/* -w: what the walk of the kernel's workqueues found (wq_search): not walked yet (no work item queued since the
 * programs were attached), found, absent (the whole list was walked and no workqueue has the name), or unknown
 * (the walk did not come round: more than MAX_WALK, or the list changed under it). */
#define WQ_SEARCH_PENDING 0
#define WQ_SEARCH_FOUND 1
#define WQ_SEARCH_ABSENT 2
#define WQ_SEARCH_UNKNOWN 3

/* The histogram's key: the workqueue's name with -W, else all zeros (one histogram). */
struct wq_key {
	char name[WQ_NAME_LEN];
};

/* A work item waiting to run: when it was queued, and on which workqueue. */
struct queued {
	__u64 ts;
	struct wq_key wq;
};

/* struct hist, the cumulative log2 histogram (bpf/include/hist.h). */
#include "hist.h"

#endif
