// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by uobjnew.bpf.c and the Rust front end (through the skeleton's `types`/`consts`). */
#ifndef __UOBJNEW_H
#define __UOBJNEW_H

/* Bytes kept of a type's name, with its NUL (a power of two). */
#define NAME_LEN 128
/* Types (or, for C, block sizes) counted at once. */
#define MAX_TYPES 16384

/* How a probe passes what was allocated (its USDT cookie). */
#define ALLOC_JAVA 0	/* HotSpot's object__alloc: thread, class, class length, size */
#define ALLOC_RUBY 1	/* Ruby's object__create: class name (a C string) */
#define ALLOC_TCL 2	/* Tcl's obj__create: no type */

/* What was allocated: a type's name, or (C) the block's size. */
struct alloc_key {
	__u64 size;
	char name[NAME_LEN];
};

/* Allocations of one type so far, cumulative. */
struct alloc_val {
	__u64 allocs;
	__u64 bytes;
};

#endif
