// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* cachestat: what the BPF side and user space share. */
#ifndef __CACHESTAT_H
#define __CACHESTAT_H

/* The counters (keys of the per-CPU `counts` array), cumulative; user space differences them every interval. */
#define C_ADDED 0    /* pages (tracepoints) or calls (kernel functions) added to the page cache */
#define C_ACCESSED 1 /* pages (tracepoints) or calls (kernel functions) of page cache accesses */
#define C_DIRTIED 2  /* pages (tracepoints) or calls (kernel functions) that became dirty */
#define C_BUFDIRTY 3 /* calls of mark_buffer_dirty (kernel functions only) */
#define C_MAX 4

/* Tasks whose last read or fault-around window is remembered (to count each page once per read). */
#define MAX_TASKS 10240

#endif /* __CACHESTAT_H */
