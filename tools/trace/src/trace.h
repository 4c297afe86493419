// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* trace's event record, shared with the Rust side (which reads it by these offsets); the generic probe's limits
 * and codes are in probe.h (a link to bpf/include/probe.h). */
#ifndef __TRACE_H
#define __TRACE_H

#include "probe.h"

/* Strings one event carries (%s arguments). */
#define MAX_STRS 4
#define TASK_COMM_LEN 16

/* Frames of each stack an event carries (-K, -U): the kernel's default perf_event_max_stack. */
#define MAX_FRAMES 127

/* One event: the header, every result of the probe's expressions (outs), the strings, then (only with -K or -U:
 * the record is reserved shorter without them) the stacks' frames. kstack_len and ustack_len are bpf_get_stack's
 * results: the bytes of frames, or a negative error. */
struct event {
	__u64 ts;
	__u32 tgid;
	__u32 tid;
	__u32 cpu;
	__u32 probe;
	char comm[TASK_COMM_LEN];
	__s32 kstack_len;
	__s32 ustack_len;
	__u64 vals[MAX_OUT];
	char strs[MAX_STRS][STR_MAX];
	__u64 kstack[MAX_FRAMES];
	__u64 ustack[MAX_FRAMES];
	/* With -U at a uprobe on a function's entry: its return address, which the user stack's walk misses (see
	 * entry_caller() in arch.bpf.h); else 0. */
	__u64 entry_caller;
};

/* Byte offsets of the record's parts, for the Rust side. */
#define EV_TS 0
#define EV_TGID 8
#define EV_TID 12
#define EV_CPU 16
#define EV_PROBE 20
#define EV_COMM 24
#define EV_KSTACK_LEN 40
#define EV_USTACK_LEN 44
#define EV_VALS 48
#define EV_STRS 128
#define EV_KSTACK 1152
#define EV_USTACK 2168
#define EV_ENTRY_CALLER 3184
#define EV_SIZE 3192

#endif
