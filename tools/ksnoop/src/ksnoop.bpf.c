// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* ksnoop: the arguments and return values of kernel functions, at each entry and return, as the function's BTF
 * signature describes them.
 *
 * Each traced function has a slot K (up to MAX_FUNCS) with its own copy of four programs: fentry_K and fexit_K
 * (BPF trampolines; arguments read from the context), kprobe_K and kretprobe_K (registers); user space loads and
 * attaches one pair. funcs[K] in .rodata says which values to take: an argument or the return value, itself (an
 * integer) or what it points to, or a member of the struct it points to (and what that member points to), with
 * an optional comparison. Everything there is a constant to the verifier, so each program keeps only the branches
 * of its own function. A call whose comparisons all hold sends a record (the raw values and the bytes copied) on
 * the ring buffer; user space prints them with libbpf's btf_dump.
 *
 * When a function compares values of both its entry and its return, or with -s (a chain of functions, each
 * called under the one before), the entry cannot be judged alone: per task, a stack of the traced calls in flight
 * (`tasks`) says whether each entry passed and whether the chain reached its last function under it. Such
 * entries are sent marked "hold"; user space keeps them until the return (or the chain's last entry) says to show
 * them, or a "discard" record says to drop them. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "ksnoop.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile struct func_spec funcs[MAX_FUNCS] = {};
const volatile __u32 nr_funcs = 0;
/* -s: the functions must be called in order, each under the one before. */
const volatile bool stack_mode = false;
/* Keep the per-task stack of calls (stack mode, or a function whose entries are held). */
const volatile bool track = false;

/* Records the ring buffer had no room for; calls not followed because `tasks` was full. */
__u64 lost = 0;
__u64 untracked = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct record);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct frames);
} tasks SEC(".maps");

/* Makes struct record visible to the skeleton's generated `types` module. */
struct record _record_type = {};

static const struct frames no_frames;

/* True if `raw`, cut to the compared width (and sign-extended for a signed type), passes the comparison. */
static __always_inline bool compare(const volatile struct value_spec *v, __u64 raw)
{
	__u64 want = v->pred_value, x = raw;
	bool lt, eq;

	if (v->pred == PRED_NONE)
		return true;
	if (v->pred_size < 8) {
		__u32 shift = 64 - 8 * v->pred_size;

		x <<= shift;
		x = v->pred_signed ? (__u64)((__s64)x >> shift) : x >> shift;
	}
	eq = x == want;
	lt = v->pred_signed ? (__s64)x < (__s64)want : x < want;
	switch (v->pred) {
	case PRED_EQ: return eq;
	case PRED_NE: return !eq;
	case PRED_LT: return lt;
	case PRED_LE: return lt || eq;
	case PRED_GT: return !lt && !eq;
	case PRED_GE: return !lt;
	}
	return false;
}

/* Fills the record with the values of one side (entry or return) of function `f`, from the arguments and return
 * value in `a`; false as soon as a comparison fails. */
static __always_inline bool collect(const volatile struct func_spec *f, struct record *r, bool entry)
{
#pragma unroll
	for (int i = 0; i < MAX_VALUES; i++) {
		const volatile struct value_spec *v = &f->values[i];
		__u64 raw, addr;
		void *src;
		long err = 0;

		if (i >= f->nr_values)
			break;
		if ((v->base == BASE_RETURN) == entry)
			continue;
		if (v->base >= MAX_VALUES)
			continue;
		raw = r->args[v->base];
		src = &r->args[v->base];
		if (v->flags & VAL_MEMBER) {
			addr = raw + v->offset;
			raw = 0;
			if (v->flags & VAL_PTR) {
				err = bpf_probe_read_kernel(&raw, sizeof(raw), (void *)addr);
				src = (void *)raw;
			} else {
				if (v->size <= sizeof(raw))
					err = bpf_probe_read_kernel(&raw, v->size, (void *)addr);
				src = (void *)addr;
			}
		} else if (v->flags & VAL_PTR) {
			src = (void *)raw;
		}
		r->raw[i] = raw;
		if (!compare(v, raw))
			return false;
		if (!err && v->size > 0 && v->size <= MAX_DATA && v->data_off <= sizeof(r->data) - MAX_DATA)
			err = bpf_probe_read_kernel(&r->data[v->data_off], v->size, src);
		r->err[i] = err;
	}
	return true;
}

static __always_inline void send(struct record *r, __u32 k, __u64 id, __u8 kind, __u8 depth, __u8 flags, __u32 len)
{
	r->time_ns = bpf_ktime_get_ns();
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->cpu = bpf_get_smp_processor_id();
	r->slot = k;
	r->kind = kind;
	r->depth = depth;
	r->flags = flags;
	r->len = len;
	if (len > sizeof(r->data))
		return;
	ringbuf_output(&events, r, __builtin_offsetof(struct record, data) + len, &lost);
}

/* The entry (the scratch record's args[] hold the arguments) or the return (args[BASE_RETURN] the return value) of
 * the function in slot k. One subprogram that every slot program calls, with integers only (5.10 refuses other
 * arguments from fentry programs): the verifier still follows it with the caller's constant k. */
static __noinline int handle(__u32 k, bool entry)
{
	const volatile struct func_spec *f = &funcs[k];
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;
	bool last = k + 1 == nr_funcs;
	struct frames *fr;
	struct record *r;
	__u8 d, below, flags = 0;
	bool ok;

	if (!tgid_wanted(id >> 32))
		return 0;
	r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return 0;
	if (!track) {
		if (!(entry ? f->has_entry : f->has_return))
			return 0;
		if (collect(f, r, entry))
			send(r, k, id, entry ? REC_ENTRY : REC_RETURN, 0, 0, entry ? f->entry_len : f->return_len);
		return 0;
	}

	fr = bpf_map_lookup_elem(&tasks, &tid);
	if (!fr && entry) {
		bpf_map_update_elem(&tasks, &tid, &no_frames, BPF_NOEXIST);
		fr = bpf_map_lookup_elem(&tasks, &tid);
		if (!fr)
			__sync_fetch_and_add(&untracked, 1);
	}
	if (!fr)
		return 0;

	if (entry) {
		d = fr->depth;
		if (d >= MAX_DEPTH) {
			__sync_fetch_and_add(&untracked, 1);
			return 0;
		}
		ok = true;
		if (stack_mode && k > 0) {
			below = (d - 1) & (MAX_DEPTH - 1);
			ok = d > 0 && fr->slot[below] == k - 1 && fr->ok[below];
		}
		if (ok)
			ok = collect(f, r, true);
		fr->slot[d & (MAX_DEPTH - 1)] = k;
		fr->ok[d & (MAX_DEPTH - 1)] = ok;
		fr->done[d & (MAX_DEPTH - 1)] = 0;
		fr->depth = d + 1;
		if (!ok)
			return 0;
		if (stack_mode && last) {
			/* The chain is whole: every call below this one returns shown. */
#pragma unroll
			for (int j = 0; j < MAX_DEPTH; j++)
				if (j <= d)
					fr->done[j] = 1;
			flags = REC_COMPLETE;
		} else if (stack_mode || f->hold) {
			flags = REC_HOLD;
		}
		if (f->has_entry)
			send(r, k, id, REC_ENTRY, d, flags, f->entry_len);
		return 0;
	}

	d = fr->depth;
	if (d == 0 || d > MAX_DEPTH)
		return 0;
	d--;
	fr->depth = d;
	if (fr->slot[d & (MAX_DEPTH - 1)] != k || !fr->ok[d & (MAX_DEPTH - 1)])
		return 0;
	if ((stack_mode && !fr->done[d & (MAX_DEPTH - 1)]) || !collect(f, r, false)) {
		if (f->hold || (stack_mode && !last))
			send(r, k, id, REC_DISCARD, d, 0, 0);
		return 0;
	}
	if (f->has_return || f->hold)
		send(r, k, id, REC_RETURN, d, 0, f->return_len);
	return 0;
}

/* The context word at byte offset `off`, read with that constant offset in the instruction (the verifier refuses
 * a context pointer moved by arithmetic). */
#define CTX_AT(ctx, off)                                                                                           \
	({                                                                                                         \
		__u64 __v;                                                                                         \
		asm volatile("%[v] = *(u64 *)(%[c] + " #off ")" : [v] "=r"(__v) : [c] "r"(ctx));                   \
		__v;                                                                                               \
	})

/* The scratch record of this CPU, whose args[] the slot programs fill before calling handle(). */
static __always_inline __u64 *scratch_args(void)
{
	__u32 zero = 0;
	struct record *r = bpf_map_lookup_elem(&scratch, &zero);

	return r ? r->args : NULL;
}

/* fentry/fexit: the arguments from the context, as far as the function has them. */
static __always_inline void ctx_args(__u64 *ctx, __u32 k, __u64 *a)
{
	__u32 n = funcs[k].nr_args;

	if (n > 0)
		a[0] = CTX_AT(ctx, 0);
	if (n > 1)
		a[1] = CTX_AT(ctx, 8);
	if (n > 2)
		a[2] = CTX_AT(ctx, 16);
	if (n > 3)
		a[3] = CTX_AT(ctx, 24);
	if (n > 4)
		a[4] = CTX_AT(ctx, 32);
}

/* fexit: the return value follows the arguments (a function has at most 12 in BTF). */
static __always_inline __u64 ctx_ret(__u64 *ctx, __u32 k)
{
	switch (funcs[k].nr_args) {
	case 0: return CTX_AT(ctx, 0);
	case 1: return CTX_AT(ctx, 8);
	case 2: return CTX_AT(ctx, 16);
	case 3: return CTX_AT(ctx, 24);
	case 4: return CTX_AT(ctx, 32);
	case 5: return CTX_AT(ctx, 40);
	case 6: return CTX_AT(ctx, 48);
	case 7: return CTX_AT(ctx, 56);
	case 8: return CTX_AT(ctx, 64);
	case 9: return CTX_AT(ctx, 72);
	case 10: return CTX_AT(ctx, 80);
	case 11: return CTX_AT(ctx, 88);
	}
	return 0;
}

#define SLOT(K)                                                                                                    \
	SEC("fentry")                                                                                              \
	int fentry_##K(__u64 *ctx)                                                                                 \
	{                                                                                                          \
		__u64 *a = scratch_args();                                                                         \
		if (!a)                                                                                            \
			return 0;                                                                                  \
		ctx_args(ctx, K, a);                                                                               \
		return handle(K, true);                                                                            \
	}                                                                                                          \
	SEC("fexit")                                                                                               \
	int fexit_##K(__u64 *ctx)                                                                                  \
	{                                                                                                          \
		__u64 *a = scratch_args();                                                                         \
		if (!a)                                                                                            \
			return 0;                                                                                  \
		a[BASE_RETURN] = ctx_ret(ctx, K);                                                                  \
		return handle(K, false);                                                                           \
	}                                                                                                          \
	SEC("kprobe")                                                                                              \
	int kprobe_##K(struct pt_regs *ctx)                                                                        \
	{                                                                                                          \
		__u64 *a = scratch_args();                                                                         \
		if (!a)                                                                                            \
			return 0;                                                                                  \
		a[0] = PT_REGS_PARM1(ctx);                                                                         \
		a[1] = PT_REGS_PARM2(ctx);                                                                         \
		a[2] = PT_REGS_PARM3(ctx);                                                                         \
		a[3] = PT_REGS_PARM4(ctx);                                                                         \
		a[4] = PT_REGS_PARM5(ctx);                                                                         \
		return handle(K, true);                                                                            \
	}                                                                                                          \
	SEC("kretprobe")                                                                                           \
	int kretprobe_##K(struct pt_regs *ctx)                                                                     \
	{                                                                                                          \
		__u64 *a = scratch_args();                                                                         \
		if (!a)                                                                                            \
			return 0;                                                                                  \
		a[BASE_RETURN] = PT_REGS_RC(ctx);                                                                  \
		return handle(K, false);                                                                           \
	}

SLOT(0)
SLOT(1)
SLOT(2)
SLOT(3)
SLOT(4)
SLOT(5)
SLOT(6)
SLOT(7)
