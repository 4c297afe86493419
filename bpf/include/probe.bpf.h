// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The generic probe of argdist and trace: what to read on each event, what to compute from it and which events to
 * keep, described in rodata by the Rust side (common::probe compiles a BCC probe spec into these arrays), so that
 * one verified program serves every spec and no compiler runs at run time.
 *
 * probe.h defines the limits and the SRC_*, F_* and I_* codes. A fetch reads one value: a tracepoint field (record
 * offset and size), a function argument (pt_regs of a uprobe or kprobe, or the BTF trampoline's array of u64
 * arguments of an fentry or fexit program), the return value, the latency since the function's entry, a value the
 * entry program saved, the PID, TID or UID; then follows up to MAX_DEREF pointers (struct members, `a->b->c`) in
 * user or kernel memory. Sizes below 8 are zero- or sign-extended to 64 bits.
 *
 * The expression program is a small stack machine (I_*) over the fetched values: C's arithmetic, bitwise and
 * logical operators, comparisons, casts and STRCMP. I_OUT stores a result (a format argument, a key) and I_KEEP
 * drops the event when the predicate is 0. The loop is unrolled and every opcode is a constant of the frozen
 * rodata, so the verifier follows only the instructions the program really has: the stack pointer is a known
 * constant at each step, and the stack array needs no variable-offset access (which 5.10 refuses). The binary
 * operators, STRCMP and the program itself are BPF subprograms (not inlined), which keeps the unrolled loop small enough to unroll;
 * the verifier checks a static subprogram at each call with the caller's constants. */
#ifndef __COREBPF_PROBE_BPF_H
#define __COREBPF_PROBE_BPF_H

#include "probe.h"
#include "filter.bpf.h"
#include <bpf/usdt.bpf.h>

struct fetch {
	__u32 src;
	__u32 offset;
	__u32 size;
	__u32 flags;
	__u32 n_deref;
	__s32 deref[MAX_DEREF];
};

struct vm_insn {
	__u8 op;
	__u8 arg;
	__u8 flags;
	__u8 pad[5];
	__s64 imm;
};

const volatile __u32 n_fetch = 0;
const volatile struct fetch fetches[MAX_FETCH] = {};
const volatile __u32 n_insns = 0;
const volatile struct vm_insn insns[MAX_INSNS] = {};
const volatile char lits[MAX_LITS][LIT_MAX] = {};
/* The entry program's own fetches, saved per thread for the return program (SRC_ENTRY). */
const volatile __u32 n_entry = 0;
const volatile struct fetch entry_fetches[MAX_ENTRY] = {};
/* The return program needs the entry program's time or values ($latency, $entry). */
const volatile bool need_start = false;
/* fexit: the return value's place in the trampoline's context (after the arguments: their count). */
const volatile __u32 retval_slot = 0;

struct probe_start {
	__u64 ts;
	__u64 vals[MAX_ENTRY];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct probe_start);
} starts SEC(".maps");

/* -p and -t; the thread id in `*tid`. */
static __always_inline bool probe_wanted(__u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();

	*tid = (__u32)id;
	return current_ids_wanted(id);
}

static __always_inline __u64 probe_extend(__u64 v, __u32 size, bool is_signed)
{
	if (size >= 8 || size == 0)
		return v;
	__u32 shift = 64 - size * 8;
	if (is_signed)
		return (__u64)(((__s64)(v << shift)) >> shift);
	return (v << shift) >> shift;
}

/* Argument n from the registers. Read through bpf_probe_read_kernel (the _CORE forms): with direct loads the
 * compiler folds the switch into one load at a computed context offset, which the verifier refuses. */
static __always_inline __u64 probe_arg(struct pt_regs *regs, __u32 n)
{
	switch (n) {
	case 0: return PT_REGS_PARM1_CORE(regs);
	case 1: return PT_REGS_PARM2_CORE(regs);
	case 2: return PT_REGS_PARM3_CORE(regs);
	case 3: return PT_REGS_PARM4_CORE(regs);
	case 4: return PT_REGS_PARM5_CORE(regs);
	default: return PT_REGS_PARM6_CORE(regs);
	}
}

/* Slot n of an fentry or fexit program's context (the function's arguments as u64, then for fexit the return
 * value). Read through bpf_probe_read_kernel for the same reason as probe_arg: a load at a computed context offset
 * is refused. */
static __always_inline __u64 probe_slot(__u64 *slots, __u32 n)
{
	__u64 v = 0;

	if (n < MAX_SLOTS)
		bpf_probe_read_kernel(&v, sizeof(v), slots + n);
	return v;
}

/* Reads `size` (1 to 8) bytes at `addr` from user or kernel memory; 0 where it cannot be read. A kernel read
 * that fails is tried in user memory: a kernel function's pointer parameter may point into user space (a
 * syscall's `struct timespec *`), and BTF does not always mark it __user. (x86 and arm64 keep the two apart.) */
static __always_inline __u64 probe_read_mem(__u64 addr, __u32 size, bool user)
{
	__u64 v = 0;

	if (size > 8)
		size = 8;
	if (size == 0)
		return 0;
	if (user || bpf_probe_read_kernel(&v, size, (void *)addr) < 0)
		bpf_probe_read_user(&v, size, (void *)addr);
	return v;
}

/* One fetch's value: its source, then its pointers followed, then extended to 64 bits. */
static __always_inline __u64 probe_fetch_one(const volatile struct fetch *f, void *record, struct pt_regs *regs,
					     __u64 *slots, __u32 tid, struct probe_start *start)
{
	__u64 v = 0;
	__u32 size = f->size, n_deref = f->n_deref, flags = f->flags;

	switch (f->src) {
	case SRC_RECORD:
		if (record)
			v = probe_read_mem((__u64)record + f->offset, n_deref ? 8 : size, false);
		break;
	case SRC_ARG:
		if (regs)
			v = probe_arg(regs, f->offset);
		else if (slots)
			v = probe_slot(slots, f->offset);
		break;
	case SRC_RETVAL:
		if (regs)
			v = PT_REGS_RC(regs);
		else if (slots)
			v = probe_slot(slots, retval_slot);
		break;
	case SRC_LATENCY:
		if (start)
			v = bpf_ktime_get_ns() - start->ts;
		break;
	case SRC_PID:
		v = bpf_get_current_pid_tgid() >> 32;
		break;
	case SRC_TID:
		v = tid;
		break;
	case SRC_UID:
		v = (__u32)bpf_get_current_uid_gid();
		break;
	case SRC_ENTRY:
		if (start && f->offset < MAX_ENTRY)
			v = start->vals[f->offset & (MAX_ENTRY - 1)];
		break;
	case SRC_TASK:
		v = (__u64)bpf_get_current_task();
		break;
	case SRC_USDT: {
		long arg = 0;

		if (regs && !bpf_usdt_arg(regs, f->offset, &arg))
			v = arg;
		break;
	}
	}
#pragma clang loop unroll(full)
	for (int k = 0; k < MAX_DEREF; k++) {
		/* f->n_deref is read from rodata each time (not kept in a register), so the trip count stays MAX_DEREF
		 * for the compiler and the loop unrolls. */
		if (k >= f->n_deref)
			break;
		if (k == n_deref - 1 && (flags & F_ADDR))
			v += f->deref[k];
		else
			v = probe_read_mem(v + f->deref[k], k == n_deref - 1 ? size : 8, flags & F_DEREF_USER);
	}
	return probe_extend(v, size, flags & F_SIGNED);
}

/* The entry program of a $latency or $entry probe: the time and the entry values, per thread. */
static __always_inline int probe_record_start(struct pt_regs *regs, __u64 *slots)
{
	struct probe_start s = {};
	__u32 tid;

	if (!probe_wanted(&tid))
		return 0;
	s.ts = bpf_ktime_get_ns();
#pragma clang loop unroll(full)
	for (int i = 0; i < MAX_ENTRY; i++) {
		if (i >= n_entry)
			break;
		s.vals[i] = probe_fetch_one(&entry_fetches[i], NULL, regs, slots, tid, NULL);
	}
	bpf_map_update_elem(&starts, &tid, &s, BPF_ANY);
	return 0;
}

/* Fills vals[] for this event: `record` is a tracepoint's record, else `regs` a function's registers (uprobe,
 * kprobe), else `slots` an fentry or fexit program's context. False when the event is to be skipped (a return
 * without its entry). */
static __always_inline bool probe_fetch(void *record, struct pt_regs *regs, __u64 *slots, __u32 tid, __u64 *vals)
{
	struct probe_start start = {}, *s = NULL;

	if (need_start) {
		s = bpf_map_lookup_elem(&starts, &tid);
		if (!s)
			return false;
		start = *s;
		s = &start;
		bpf_map_delete_elem(&starts, &tid);
	}
#pragma clang loop unroll(full)
	for (int i = 0; i < MAX_FETCH; i++) {
		if (i >= n_fetch)
			break;
		vals[i] = probe_fetch_one(&fetches[i], record, regs, slots, tid, s);
	}
	return true;
}

/* Reads the string a fetched value points to (or, for a __data_loc field, holds the place of) into dst. */
static __always_inline void probe_string(char *dst, __u32 size, void *record, __u32 fetch, __u64 value)
{
	__u32 flags;

	if (fetch >= MAX_FETCH)
		return;
	flags = fetches[fetch].flags;
	if (size > STR_MAX)
		size = STR_MAX;
	if (flags & F_COMM) {
		bpf_get_current_comm(dst, size < 16 ? size : 16);
	} else if (flags & F_DATA_LOC) {
		if (record)
			bpf_probe_read_kernel_str(dst, size, record + (value & 0xffff));
	} else if ((flags & F_INLINE) && !fetches[fetch].n_deref) {
		if (record)
			bpf_probe_read_kernel_str(dst, size, record + fetches[fetch].offset);
	} else if (flags & F_STR_USER) {
		bpf_probe_read_user_str(dst, size, (void *)value);
	} else if (bpf_probe_read_kernel_str(dst, size, (void *)value) < 0) {
		/* As probe_read_mem: a kernel function's `char *` may be a user string. */
		bpf_probe_read_user_str(dst, size, (void *)value);
	}
}

/* STRCMP: whether the string of fetch `fetch` is literal `lit`, `len` bytes with its NUL. */
static __noinline bool probe_strcmp(void *record, __u32 fetch, __u64 value, __u32 lit, __u32 len)
{
	char buf[LIT_MAX] = {};
	bool same = true;

	if (lit >= MAX_LITS)
		return false;
	probe_string(buf, LIT_MAX, record, fetch, value);
#pragma clang loop unroll(full)
	for (int k = 0; k < LIT_MAX; k++) {
		if (k < len && buf[k] != lits[lit][k])
			same = false;
	}
	return same;
}

static __noinline __u64 probe_binary(__u8 op, __u64 a, __u64 b, bool is_signed)
{
	__s64 sa = a, sb = b;

	switch (op) {
	case I_ADD: return a + b;
	case I_SUB: return a - b;
	case I_MUL: return a * b;
	case I_DIV:
	case I_MOD: {
		/* BPF divides unsigned only (before the v4 ISA): divide the magnitudes and fix the sign, as C does. */
		bool neg_a = is_signed && sa < 0, neg_b = is_signed && sb < 0;
		__u64 ua = neg_a ? -a : a, ub = neg_b ? -b : b, r;

		if (ub == 0)
			return 0;
		if (op == I_DIV) {
			r = ua / ub;
			return neg_a != neg_b ? -r : r;
		}
		r = ua % ub;
		return neg_a ? -r : r;
	}
	case I_AND: return a & b;
	case I_OR: return a | b;
	case I_XOR: return a ^ b;
	case I_SHL: return a << (b & 63);
	case I_SHR: return is_signed ? (__u64)(sa >> (b & 63)) : a >> (b & 63);
	case I_EQ: return a == b;
	case I_NE: return a != b;
	case I_LT: return is_signed ? sa < sb : a < b;
	case I_LE: return is_signed ? sa <= sb : a <= b;
	case I_GT: return is_signed ? sa > sb : a > b;
	case I_GE: return is_signed ? sa >= sb : a >= b;
	case I_LAND: return a && b;
	default: return a || b;
	}
}

/* Runs the expression program over vals[]: the results into outs[], false when the predicate drops the event. */
static __noinline bool probe_eval(void *record, __u64 *vals, __u64 *outs)
{
	__u64 st[VM_DEPTH] = {};
	__u32 sp = 0;

#pragma clang loop unroll(full)
	for (int i = 0; i < MAX_INSNS; i++) {
		__u8 op = insns[i].op, arg = insns[i].arg, flags = insns[i].flags;
		__s64 imm = insns[i].imm;
		__u64 a, b;

		if (i >= n_insns)
			break;
		switch (op) {
		case I_VAL:
			if (arg >= MAX_FETCH || sp >= VM_DEPTH)
				return false;
			st[sp++] = vals[arg];
			break;
		case I_IMM:
			if (sp >= VM_DEPTH)
				return false;
			st[sp++] = imm;
			break;
		case I_STRCMP:
			if (arg >= MAX_FETCH || sp >= VM_DEPTH)
				return false;
			st[sp++] = probe_strcmp(record, arg, vals[arg], flags, imm);
			break;
		case I_CAST:
			if (sp < 1)
				return false;
			st[sp - 1] = probe_extend(st[sp - 1], arg, flags & IF_SIGNED);
			break;
		case I_NEG:
			if (sp < 1)
				return false;
			st[sp - 1] = -st[sp - 1];
			break;
		case I_NOT:
			if (sp < 1)
				return false;
			st[sp - 1] = !st[sp - 1];
			break;
		case I_BNOT:
			if (sp < 1)
				return false;
			st[sp - 1] = ~st[sp - 1];
			break;
		case I_OUT:
			if (sp < 1 || arg >= MAX_OUT)
				return false;
			outs[arg] = st[--sp];
			break;
		case I_KEEP:
			if (sp < 1)
				return false;
			if (!st[--sp])
				return false;
			break;
		default:
			if (sp < 2)
				return false;
			b = st[--sp];
			a = st[sp - 1];
			st[sp - 1] = probe_binary(op, a, b, flags & IF_SIGNED);
			break;
		}
	}
	return true;
}

/* The generic programs every probe tool loads, over its handler `handle(tracepoint ctx, pt_regs, trampoline
 * args)`: the names are the ones common::probe::attach selects (probe_tracepoint, probe_entry, probe_return,
 * probe_start, probe_fentry, probe_fexit, probe_fentry_start, probe_usdt). uprobes and kprobes are both kprobe
 * programs; a USDT probe is a uprobe whose arguments libbpf's usdt.bpf.h reads. */
#define PROBE_PROGRAMS(handle)                                                                                  \
	SEC("tracepoint") int probe_tracepoint(void *ctx) { return handle(ctx, NULL, NULL); }                  \
	SEC("kprobe") int probe_entry(struct pt_regs *ctx) { return handle(NULL, ctx, NULL); }                  \
	SEC("kretprobe") int probe_return(struct pt_regs *ctx) { return handle(NULL, ctx, NULL); }              \
	SEC("kprobe") int probe_start(struct pt_regs *ctx) { return probe_record_start(ctx, NULL); }            \
	SEC("fentry") int probe_fentry(__u64 *ctx) { return handle(NULL, NULL, ctx); }                          \
	SEC("fexit") int probe_fexit(__u64 *ctx) { return handle(NULL, NULL, ctx); }                            \
	SEC("fentry") int probe_fentry_start(__u64 *ctx) { return probe_record_start(NULL, ctx); }               \
	SEC("usdt") int probe_usdt(struct pt_regs *ctx) { return handle(NULL, ctx, NULL); }

#endif
