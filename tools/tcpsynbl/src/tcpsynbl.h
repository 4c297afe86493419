// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What tcpsynbl.bpf.c and lib.rs share (constants reach Rust as bpf::consts, structs as bpf::types). */
#ifndef __TCPSYNBL_H
#define __TCPSYNBL_H

/* Backlog lengths of 2^31 and more share the last slot. */
#define MAX_SLOTS 32
/* Distinct backlog limits kept; events of more are counted in hists_full and reported. */
#define MAX_BACKLOGS 1024

/* struct hist, the cumulative log2 histogram (bpf/include/hist.h); sum_ns holds the sum of the queue lengths
 * (the _sum of --prometheus). */
#include "hist.h"

#endif
