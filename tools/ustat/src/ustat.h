// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by ustat.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __USTAT_H
#define __USTAT_H

/* The six columns, in BCC's order; a probe's USDT cookie is its column. */
#define CAT_METHOD 0
#define CAT_GC 1
#define CAT_OBJNEW 2
#define CAT_CLOAD 3
#define CAT_EXCP 4
#define CAT_THREAD 5
#define NCATS 6

/* Processes counted at once. */
#define MAX_PROCS 10240

/* One process's events so far, per column (cumulative: the front end takes differences). */
struct counts {
	__u64 n[NCATS];
};

#endif
