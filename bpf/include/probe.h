// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Limits and codes of the generic probe (probe.bpf.h) of argdist and trace. Each tool links this file into its
 * src/ (src/probe.h), so the build helper turns its #defines into the tool's bpf::consts, which
 * common::probe::probe_rodata! uses to fill the rodata: the numbers live only here. */
#ifndef __COREBPF_PROBE_H
#define __COREBPF_PROBE_H

/* Values one probe fetches (key expressions and filter operands together). */
#define MAX_FETCH 6
/* Comparisons in one filter. */
#define MAX_CMPS 4
/* The longest string kept (-z is capped at this). */
#define STR_MAX 128
/* Slots of an fentry/fexit context: the kernel's most arguments (MAX_BPF_FUNC_ARGS) and the return value. */
#define MAX_SLOTS 13
/* Threads with a call in flight ($latency). */
#define MAX_THREADS 10240

/* Where a fetched value comes from. */
#define SRC_RECORD 1  /* a tracepoint field: `offset` into the record */
#define SRC_ARG 2     /* function argument number `offset` (0-based) */
#define SRC_RETVAL 3  /* the return value */
#define SRC_LATENCY 4 /* ns since the function's entry */
#define SRC_PID 5
#define SRC_TID 6
#define SRC_UID 7

/* fetch.flags */
#define F_SIGNED 1
#define F_STR_USER 2   /* the value is a pointer to a user string */
#define F_STR_KERNEL 4 /* the value is a pointer to a kernel string */
#define F_DATA_LOC 8   /* a __data_loc field: the string is in the record at (value & 0xffff) */
#define F_INLINE 16    /* a char array field: the string is the field itself */

/* cmp.op */
#define OP_EQ 0
#define OP_NE 1
#define OP_LT 2
#define OP_LE 3
#define OP_GT 4
#define OP_GE 5
/* cmp.flags */
#define C_SIGNED 1
#define C_RHS_FETCH 2 /* the right operand is fetch `rhs`, not a constant */
#define C_OR_NEXT 4   /* `||` follows: this comparison ends an && group */

/* No such slot (a key without a string). */
#define NONE 255

#endif
