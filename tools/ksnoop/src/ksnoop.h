// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What ksnoop.bpf.c and the Rust side share: the description of each traced function (written into .rodata before
 * load) and the records sent on the ring buffer. */
#ifndef __KSNOOP_H
#define __KSNOOP_H

/* Functions traced at once: each has its own copy of the four programs (fentry, fexit, kprobe, kretprobe). */
#define MAX_FUNCS 8
/* Arguments a value can be taken from (the registers a kprobe reads), and the slot of the return value. */
#define MAX_ARGS 5
#define BASE_RETURN 5
/* Values traced per function: every argument and the return value. */
#define MAX_VALUES 6
/* Bytes of one value copied into a record (a longer struct is cut, and says so). */
#define MAX_DATA 2048
/* Traced calls nested in one task that are followed (stack mode, held entries); deeper ones are not traced. */
#define MAX_DEPTH 16
/* Tasks followed at once (stack mode, held entries). */
#define MAX_TASKS 8192

/* value_spec.flags */
#define VAL_PTR 1    /* a pointer: the record holds what it points to */
#define VAL_MEMBER 2 /* a member of the struct the argument points to, at `offset` */

/* value_spec.pred */
#define PRED_NONE 0
#define PRED_EQ 1
#define PRED_NE 2
#define PRED_LT 3
#define PRED_LE 4
#define PRED_GT 5
#define PRED_GE 6

/* record.kind */
#define REC_ENTRY 1
#define REC_RETURN 2
#define REC_DISCARD 3 /* the held entry at this depth will not be shown */

/* record.flags */
#define REC_HOLD 1     /* an entry to keep until its return (predicates on both) or its chain completes (-s) */
#define REC_COMPLETE 2 /* the last function of the -s chain: show the held entries under it first */

struct value_spec {
	__u64 pred_value;
	__u32 offset;   /* of the member, in bytes */
	__u32 size;     /* bytes copied into the record (0: none) */
	__u32 data_off; /* where they go in the record's data */
	__u8 base;      /* argument 0..MAX_ARGS-1, or BASE_RETURN */
	__u8 flags;
	__u8 pred;
	__u8 pred_size; /* bytes of the compared value: 1, 2, 4 or 8 */
	__u8 pred_signed;
	__u8 pad[7];
};

struct func_spec {
	struct value_spec values[MAX_VALUES];
	__u32 nr_values;
	__u32 nr_args;    /* the function's arity: where fexit finds the return value */
	__u32 entry_len;  /* data bytes of an entry record */
	__u32 return_len; /* and of a return record */
	__u32 has_entry;  /* an entry record is sent (values or predicates at entry, or -s) */
	__u32 has_return;
	__u32 hold;       /* predicates over entry and return values: entries are held until the return */
	__u32 pad;
};

struct record {
	__u64 time_ns;
	__u64 args[MAX_VALUES]; /* the arguments and the return value, as read (BPF side only) */
	__u64 raw[MAX_VALUES]; /* each value: the pointer, or the integer */
	__s32 err[MAX_VALUES]; /* the error reading what a pointer points to, or 0 */
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 len; /* bytes of data */
	__u8 slot;
	__u8 kind;
	__u8 depth;
	__u8 flags;
	__u32 pad;
	__u8 data[MAX_VALUES * MAX_DATA];
};

/* The traced calls of one task, innermost last (stack mode and held entries). */
struct frames {
	__u8 depth;
	__u8 slot[MAX_DEPTH];
	__u8 ok[MAX_DEPTH];   /* its entry passed (predicates, and the -s order) */
	__u8 done[MAX_DEPTH]; /* the -s chain reached its last function under this call */
};

#endif
