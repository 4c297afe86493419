// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What template.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME (one home for each fact shared by C and Rust). */
#ifndef __TEMPLATE_H
#define __TEMPLATE_H

/* Read sizes of 2^31 bytes and more share the last slot. */
#define MAX_SLOTS 32
/* Distinct process names kept; reads of more are counted in hists_full and reported. */
#define MAX_NAMES 1024
#define NAME_LEN 16

struct name_key {
	char comm[NAME_LEN];
};

/* struct hist, the cumulative log2 histogram (bpf/include/hist.h); sum_ns is unused here (a size, not a time). */
#include "hist.h"

#endif
