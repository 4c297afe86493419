/* SPDX-License-Identifier: GPL-2.0 */
/* What pidpersec.bpf.c and the Rust side share (bpf::consts and bpf::types). */
#ifndef __PIDPERSEC_H
#define __PIDPERSEC_H

/* Seconds between two lines (BCC's fixed interval). */
#define INTERVAL_SECS 1

#endif
