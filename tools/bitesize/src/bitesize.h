// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What bitesize.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __BITESIZE_H
#define __BITESIZE_H

/* Request sizes of 2^31 KiB and more share the last slot. */
#define MAX_SLOTS 32
/* Distinct process names kept; requests of more are counted in hists_full and reported. */
#define MAX_NAMES 1024
#define NAME_LEN 16

/* A histogram's key: the submitter's name, and with --container-label its cgroup v2 ID (else 0), so that one
 * name in two containers is two series. */
struct name_key {
	char comm[NAME_LEN];
	__u64 cgroup_id;
};

/* struct hist, the cumulative log2 histogram (bpf/include/hist.h); sum_ns is unused here (a size, not a time). */
#include "hist.h"

#endif
