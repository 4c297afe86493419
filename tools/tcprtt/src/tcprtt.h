// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What tcprtt.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __TCPRTT_H
#define __TCPRTT_H

/* Round-trip times of 2^31 units and more share the last slot. */
#define MAX_SLOTS 32
/* Distinct addresses with -b/-B; packets of more are counted in hists_full and reported. */
#define MAX_HISTS 10240
/* -b / -B: one histogram per local / remote address (else one for all). */
#define BY_NONE 0
#define BY_LADDR 1
#define BY_RADDR 2

/* A histogram's key: the address (16 bytes, network order, IPv4 in the first 4) and its family; all zero for the
 * single histogram. */
struct hist_key {
	__u8 addr[16];
	__u16 family;
	__u16 pad;
};

/* struct hist (bpf/include/hist.h): count, sum_ns (here the sum of the smoothed RTTs, in the histogram's unit,
 * for -e's mean) and the log2 slots. */
#include "hist.h"

#endif
