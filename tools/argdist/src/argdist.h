// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Limits and codes of argdist's object, shared with the Rust side; the generic probe's own (fetch sources,
 * operators) are in probe.h (a link to bpf/include/probe.h, so that they reach the Rust side too). */
#ifndef __ARGDIST_H
#define __ARGDIST_H

#include "probe.h"

/* Expressions in one key (-C): -H has one. */
#define MAX_KEYS 4
/* log2 slots of a -H histogram. */
#define HIST_SLOTS 64
/* Distinct keys a -C count keeps. */
#define MAX_ENTRIES 10240
/* What one object keeps: a log2 histogram (-H) or counts by key (-C). */
#define MODE_HIST 1
#define MODE_COUNT 2

/* One expression of a key: its value is the expression program's result of the same number; a string (char*)
 * is instead read through fetch `fetch` into the key's string `str`. */
struct key_expr {
	__u8 fetch;
	__u8 str;
	__u16 pad;
};

#endif
