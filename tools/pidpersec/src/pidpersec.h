// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What pidpersec.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __PIDPERSEC_H
#define __PIDPERSEC_H

/* Seconds between two lines (BCC's fixed interval). */
#define INTERVAL_SECS 1

#endif
