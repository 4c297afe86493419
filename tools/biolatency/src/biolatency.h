// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by biolatency.bpf.c and main.rs (through the skeleton's generated `types`). */
#ifndef __BIOLATENCY_H
#define __BIOLATENCY_H

/* 2^32 usecs is over an hour: enough slots for any I/O. */
#define MAX_SLOTS 32
/* I/Os timed at once (the start map); more are counted as not timed. */
#define MAX_IN_FLIGHT 10240
/* Histograms at most, with -D and/or -F (the hists map is sized from the flags, up to this). */
#define MAX_HISTS 10240
/* Distinct sets of request flags -F may see (operation x a few flag bits). */
#define FLAG_SETS 256

/* One histogram per key: all-zero key without -D/-F, else the disk and/or the request flags. */
struct hist_key {
	__u64 cmd_flags;
	__u32 dev;
	__u32 _pad;
};

/* struct hist, the cumulative histogram (bpf/include/hist.h). */
#include "hist.h"

#endif
