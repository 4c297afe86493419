// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The file system operations fsop.bpf.h times, shared by fsslower and fsdist (C side; common::domain::fsop holds
 * the same numbers for Rust, with the kernel functions of each file system). */
#ifndef __COREBPF_FSOP_H
#define __COREBPF_FSOP_H

#define FSOP_READ 0
#define FSOP_WRITE 1
#define FSOP_OPEN 2
#define FSOP_FSYNC 3
#define FSOP_GETATTR 4
#define FSOP_COUNT 5

/* Operations between their start and their end at once (per thread); more are counted in fsop_calls_full. */
#define FSOP_MAX_INFLIGHT 10240
/* File systems (devices) the tracepoint path's getattr recognises from a stat result. */
#define FSOP_MAX_DEVS 256

#endif
