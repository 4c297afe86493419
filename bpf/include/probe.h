// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Limits and codes of the generic probe (probe.bpf.h) of argdist and trace. Each tool links this file into its
 * src/ (src/probe.h), so the build helper turns its #defines into the tool's bpf::consts, which
 * common::probe::probe_rodata! uses to fill the rodata: the numbers live only here. */
#ifndef __COREBPF_PROBE_H
#define __COREBPF_PROBE_H

/* Values one probe reads per event (the leaves of its expressions and predicate). */
#define MAX_FETCH 10
/* Results one probe computes per event: trace's format arguments, argdist's key expressions. */
#define MAX_OUT 10
/* Instructions of one probe's expression program (its outputs and its predicate), and its stack depth. */
#define MAX_INSNS 48
#define VM_DEPTH 8
/* String literals of STRCMP and the longest one (its terminating NUL included). */
#define MAX_LITS 2
#define LIT_MAX 32
/* Values an entry program saves for its return program ($entry(...), or a parameter named in a return probe). */
#define MAX_ENTRY 4
/* Pointers one value is reached through (`a->b->c.d` is two reads after the first value). */
#define MAX_DEREF 4
/* The longest string kept (-z and -Z are capped at this). */
#define STR_MAX 256
/* Slots of an fentry/fexit context: the kernel's most arguments (MAX_BPF_FUNC_ARGS) and the return value. */
#define MAX_SLOTS 13
/* Threads with a call in flight ($latency, $entry). */
#define MAX_THREADS 10240

/* Where a fetched value comes from. */
#define SRC_RECORD 1  /* a tracepoint field: `offset` into the record */
#define SRC_ARG 2     /* function argument number `offset` (0-based) */
#define SRC_RETVAL 3  /* the return value */
#define SRC_LATENCY 4 /* ns since the function's entry */
#define SRC_PID 5
#define SRC_TID 6
#define SRC_UID 7
#define SRC_ENTRY 8   /* entry value number `offset`, saved by the entry program ($entry(...) in a return probe) */
#define SRC_USDT 9    /* USDT argument number `offset` (0-based), as its note describes it */
#define SRC_TASK 10   /* the current task (`$task`) */

/* fetch.flags */
#define F_SIGNED 1
#define F_STR_USER 2   /* the value is a pointer to a user string */
#define F_STR_KERNEL 4 /* the value is a pointer to a kernel string */
#define F_DATA_LOC 8   /* a __data_loc field: the string is in the record at (value & 0xffff) */
#define F_INLINE 16    /* a char array field: the string is the field itself */
#define F_DEREF_USER 32 /* the pointers of `deref` point into user memory (else kernel memory) */
#define F_ADDR 64      /* the last `deref` step gives an address (of an array member), not a read */
#define F_COMM 128     /* the string is the current task's command name (`$COMM`) */

/* Instructions of the expression program (insn.op), a stack machine over 64-bit values. */
#define I_VAL 1    /* push fetched value `arg` */
#define I_IMM 2    /* push `imm` */
#define I_STRCMP 3 /* push 1 if the string of fetch `arg` equals literal `flags` (`imm` bytes, NUL included) */
#define I_CAST 4   /* truncate the top to `arg` bytes, sign-extended if `flags` & IF_SIGNED */
#define I_NEG 5
#define I_NOT 6    /* logical ! */
#define I_BNOT 7   /* bitwise ~ */
#define I_ADD 8    /* binary operators: pop b, pop a, push a OP b */
#define I_SUB 9
#define I_MUL 10
#define I_DIV 11
#define I_MOD 12
#define I_AND 13
#define I_OR 14
#define I_XOR 15
#define I_SHL 16
#define I_SHR 17
#define I_EQ 18
#define I_NE 19
#define I_LT 20
#define I_LE 21
#define I_GT 22
#define I_GE 23
#define I_LAND 24
#define I_LOR 25
#define I_OUT 26   /* pop into result `arg` */
#define I_KEEP 27  /* pop: the event is dropped if it is 0 (the predicate) */
/* insn.flags */
#define IF_SIGNED 1 /* signed division, remainder, right shift, comparison or cast */

/* No such slot (a key without a string). */
#define NONE 255

#endif
