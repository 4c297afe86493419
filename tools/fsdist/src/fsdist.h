// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What fsdist.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __FSDIST_H
#define __FSDIST_H

/* log2 slots of each operation's histogram (microseconds, or milliseconds with -m) */
#define MAX_SLOTS 32
/* The operations, as fsop.h numbers them (read, write, open, fsync, getattr). */
#define OPS 5

#include "hist.h"

#endif
