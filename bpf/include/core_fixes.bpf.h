// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* CO-RE accessors for kernel fields that moved or were renamed between kernel versions. Each helper reads the
 * field where the running kernel has it, decided at load time by libbpf from the kernel's BTF. They read with
 * TP_READ (tp_btf_raw.bpf.h): pass them tracepoint arguments, or fields read from them. */
#ifndef __COREBPF_CORE_FIXES_BPF_H
#define __COREBPF_CORE_FIXES_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_core_read.h>
#include "tp_btf_raw.bpf.h"

/* The kernel's dev_t encoding: 12 bits of major, 20 of minor. */
#define MINORBITS 20
#define MKDEV(ma, mi) (((__u32)(ma) << MINORBITS) | (__u32)(mi))

/* Before 5.17 a request named its disk in rq->rq_disk; since, through rq->q->disk. */
struct request___with_rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

struct request_queue___with_disk {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct request___with_q {
	struct request_queue___with_disk *q;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *get_disk(void *request)
{
	struct request___with_rq_disk *old = request;
	struct request___with_q *new = request;

	if (bpf_core_field_exists(old->rq_disk))
		return TP_READ(old, rq_disk);
	return TP_READ(new, q, disk);
}

/* The kernel device number of the disk a request is for, 0 if it has none. */
static __always_inline __u32 request_dev(struct request *rq)
{
	struct gendisk *disk = get_disk(rq);

	if (!disk)
		return 0;
	return MKDEV(TP_READ(disk, major), TP_READ(disk, first_minor));
}

/* task_struct's `state` was renamed `__state` (and made an unsigned int) in 5.14. */
struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

/* A task's state (TASK_RUNNING is 0; other values are a bitmask). */
static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return TP_READ(t, __state);
	return TP_READ((struct task_struct___pre_5_14 *)t, state);
}

#endif
