// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by ugc.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __UGC_H
#define __UGC_H

/* Bytes kept of a HotSpot memory manager's or pool's name, with its NUL. */
#define NAME_LEN 64
/* Collections in progress tracked at once (per thread and probe pair). */
#define MAX_STARTS 10240

/* What a probe pair's arguments carry (the probe's USDT cookie is PAIR | KIND << 8). */
#define KIND_PLAIN 0
#define KIND_JAVA_POOL 1
#define KIND_PYTHON_GEN 2
#define KIND_NODE_TYPE 3

/* One finished collection (or phase): from the end probe of a pair whose begin probe the same thread hit. */
struct event {
	__u64 ts;		/* bpf_ktime_get_ns() at the end probe */
	__u64 elapsed_ns;	/* end minus begin */
	__u64 field1;		/* Java pool: used bytes before; Python: generation; Node: type flags */
	__u64 field2;		/* Java pool: max bytes before; Python: objects collected */
	__u64 field3;		/* Java pool: used bytes after */
	__u64 field4;		/* Java pool: max bytes after */
	__u32 pid;
	__u32 tid;
	__u32 pair;		/* index of the probe pair in the front end's list */
	__u32 _pad;
	char manager[NAME_LEN];	/* Java pool: the memory manager's name */
	char pool[NAME_LEN];	/* Java pool: the pool's name */
};

#endif
