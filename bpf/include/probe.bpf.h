// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The generic probe of argdist and trace: what to fetch on each event and which events to keep, described in
 * rodata by the Rust side (common::probe turns a BCC probe spec into these arrays), so that one verified program
 * serves every spec and no compiler runs at run time.
 *
 * probe.h defines the limits and the SRC_*, F_*, OP_* and C_* codes. A fetch reads one
 * value: a tracepoint field (record offset and size), a function argument (pt_regs of a uprobe or kprobe, or the
 * BTF trampoline's array of u64 arguments of an fentry or fexit program), the return value, the
 * latency since the function's entry (an entry program stores the time per thread), the PID, TID or UID; sizes
 * below 8 are zero- or sign-extended to 64 bits. The filter is an OR of AND groups of comparisons (`a && b || c`),
 * each of a fetched value with a constant or another fetched value, evaluated in a bounded loop. */
#ifndef __COREBPF_PROBE_BPF_H
#define __COREBPF_PROBE_BPF_H

#include "probe.h"
#include "filter.bpf.h"

struct fetch {
	__u32 src;
	__u32 offset;
	__u32 size;
	__u32 flags;
};

struct cmp {
	__u8 lhs;
	__u8 rhs_fetch;
	__u8 op;
	__u8 flags;
	__u32 pad;
	__s64 rhs;
};

const volatile __u32 n_fetch = 0;
const volatile struct fetch fetches[MAX_FETCH] = {};
const volatile __u32 n_cmps = 0;
const volatile struct cmp cmps[MAX_CMPS] = {};
/* Some fetch is $latency: the return program needs the entry time. */
const volatile bool need_start = false;
/* fexit: the return value's place in the trampoline's context (after the arguments: their count). */
const volatile __u32 retval_slot = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, __u64);
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

/* The entry program of a $latency probe. */
static __always_inline int probe_record_start(void)
{
	__u32 tid;
	__u64 now;

	if (!probe_wanted(&tid))
		return 0;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&starts, &tid, &now, BPF_ANY);
	return 0;
}

/* Fills vals[] for this event: `record` is a tracepoint's record, else `regs` a function's registers (uprobe,
 * kprobe), else `slots` an fentry or fexit program's context. False when the event is to be skipped (a return
 * without its entry). */
static __always_inline bool probe_fetch(void *record, struct pt_regs *regs, __u64 *slots, __u32 tid, __u64 *vals)
{
	__u64 start = 0;

	if (need_start) {
		__u64 *s = bpf_map_lookup_elem(&starts, &tid);
		if (!s)
			return false;
		start = *s;
		bpf_map_delete_elem(&starts, &tid);
	}
#pragma unroll
	for (int i = 0; i < MAX_FETCH; i++) {
		__u64 v = 0;
		__u32 size = fetches[i].size;

		if (i >= n_fetch)
			break;
		switch (fetches[i].src) {
		case SRC_RECORD:
			if (size > 8)
				size = 8;
			if (record)
				bpf_probe_read_kernel(&v, size, record + fetches[i].offset);
			break;
		case SRC_ARG:
			if (regs)
				v = probe_arg(regs, fetches[i].offset);
			else if (slots)
				v = probe_slot(slots, fetches[i].offset);
			break;
		case SRC_RETVAL:
			if (regs)
				v = PT_REGS_RC(regs);
			else if (slots)
				v = probe_slot(slots, retval_slot);
			break;
		case SRC_LATENCY:
			v = bpf_ktime_get_ns() - start;
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
		}
		vals[i] = probe_extend(v, size, fetches[i].flags & F_SIGNED);
	}
	return true;
}

static __always_inline bool probe_compare(__u64 l, __u64 r, __u8 op, bool is_signed)
{
	__s64 sl = l, sr = r;

	switch (op) {
	case OP_EQ: return l == r;
	case OP_NE: return l != r;
	case OP_LT: return is_signed ? sl < sr : l < r;
	case OP_LE: return is_signed ? sl <= sr : l <= r;
	case OP_GT: return is_signed ? sl > sr : l > r;
	default: return is_signed ? sl >= sr : l >= r;
	}
}

/* The filter over the fetched values: an OR of AND groups. */
static __always_inline bool probe_filter(__u64 *vals)
{
	bool any = false, group = true;

	if (n_cmps == 0)
		return true;
#pragma unroll
	for (int i = 0; i < MAX_CMPS; i++) {
		__u8 lhs = cmps[i].lhs, rhsf = cmps[i].rhs_fetch, flags = cmps[i].flags;
		__u64 l, r;

		if (i >= n_cmps)
			break;
		if (lhs >= MAX_FETCH || rhsf >= MAX_FETCH)
			return false;
		l = vals[lhs];
		r = (flags & C_RHS_FETCH) ? vals[rhsf] : (__u64)cmps[i].rhs;
		group = group && probe_compare(l, r, cmps[i].op, flags & C_SIGNED);
		if (flags & C_OR_NEXT) {
			any = any || group;
			group = true;
		}
	}
	return any || group;
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
	if (flags & F_DATA_LOC) {
		if (record)
			bpf_probe_read_kernel_str(dst, size, record + (value & 0xffff));
	} else if (flags & F_INLINE) {
		if (record)
			bpf_probe_read_kernel_str(dst, size, record + fetches[fetch].offset);
	} else if (flags & F_STR_USER) {
		bpf_probe_read_user_str(dst, size, (void *)value);
	} else {
		bpf_probe_read_kernel_str(dst, size, (void *)value);
	}
}

/* The generic programs every probe tool loads, over its handler `handle(tracepoint ctx, pt_regs, trampoline
 * args)`: the names are the ones common::probe::attach selects (probe_tracepoint, probe_entry, probe_return,
 * probe_start, probe_fentry, probe_fexit, probe_fentry_start). uprobes and kprobes are both kprobe programs. */
#define PROBE_PROGRAMS(handle)                                                                                  \
	SEC("tracepoint") int probe_tracepoint(void *ctx) { return handle(ctx, NULL, NULL); }                  \
	SEC("kprobe") int probe_entry(struct pt_regs *ctx) { return handle(NULL, ctx, NULL); }                  \
	SEC("kretprobe") int probe_return(struct pt_regs *ctx) { return handle(NULL, ctx, NULL); }              \
	SEC("kprobe") int probe_start(struct pt_regs *ctx) { return probe_record_start(); }                     \
	SEC("fentry") int probe_fentry(__u64 *ctx) { return handle(NULL, NULL, ctx); }                          \
	SEC("fexit") int probe_fexit(__u64 *ctx) { return handle(NULL, NULL, ctx); }                            \
	SEC("fentry") int probe_fentry_start(__u64 *ctx) { return probe_record_start(); }

#endif
