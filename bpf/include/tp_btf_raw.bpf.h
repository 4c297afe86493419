// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* One tracepoint handler, written once, as the pair of programs the attach ladder `tp_btf` > `raw_tp` needs.
 *
 *	TP_BTF_RAW(sched_switch, sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
 *	{
 *		...
 *		return 0;
 *	}
 *
 * defines the programs `sched_switch_btf` (SEC("tp_btf/sched_switch")) and `sched_switch_raw`
 * (SEC("raw_tp/sched_switch")), which both run the body with the tracepoint's arguments, as BPF_PROG would (the
 * first name names the programs, the second is the tracepoint; `ctx` is in scope too). Both kinds of program get
 * the same array of u64 arguments: tp_btf's are typed by the kernel's BTF at load, raw_tp's are not. User space
 * keeps the pair's one half that matches the mechanism chosen, by section
 * (common::attach::loader::autoload_by_section), and the verifier sees only that one.
 *
 * TP_READ(p, field, ...) reads a field of a tracepoint argument, or a chain of them as BPF_CORE_READ does: in the
 * tp_btf half the arguments are typed pointers into the kernel, so it is a plain load (the verifier makes it
 * fault-safe), about a helper call cheaper per field than the bpf_probe_read_kernel the raw_tp half needs.
 * autoload_by_section sets tp_args_typed when it keeps the tp_btf half; the verifier knows the value (.rodata)
 * and never sees the other branch. Use it only on pointers that come from a tracepoint's arguments (or fields
 * read from them), never on a pointer the program made itself. */
#ifndef __COREBPF_TP_BTF_RAW_BPF_H
#define __COREBPF_TP_BTF_RAW_BPF_H

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

/* Set by user space when the tp_btf half is loaded (see above). */
const volatile bool tp_args_typed = false;

#define TP_READ(src, a, ...)                                                                                       \
	(tp_args_typed ? ___arrow((src), a, ##__VA_ARGS__) : BPF_CORE_READ((src), a, ##__VA_ARGS__))

/* A map key holding pointer `p`: the address of a copy of it. Where a pointer read with TP_READ is also a map key,
 * pass this, not &p: kernels up to 6.1 at least forget the type of a pointer whose stack slot a helper has read
 * (after bpf_map_lookup_elem(&m, &rq) the verifier refuses the next rq->field: "R3 invalid mem access 'scalar'"),
 * and the compiler may reload the argument from the key's slot. The copy is laundered through barrier_var, so it
 * cannot be folded back into the argument. */
#define PTR_KEY(p)                                                                                                 \
	(&(__u64){ ({                                                                                              \
		__u64 ___key = (__u64)(p);                                                                         \
		barrier_var(___key);                                                                               \
		___key;                                                                                            \
	}) })

/* The current task's field (or chain), as TP_READ reads an argument: directly through bpf_get_current_task_btf()
 * in the tp_btf half of a kernel that has it (5.11+), else through bpf_probe_read_kernel. */
#define CURRENT_READ(a, ...)                                                                                       \
	((tp_args_typed && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf))           \
		 ? ___arrow(bpf_get_current_task_btf(), a, ##__VA_ARGS__)                                          \
		 : BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), a, ##__VA_ARGS__))

/* One program of the pair: section `sec`, named `prog`, calling the body of `name` with the arguments cast from
 * ctx (BPF_PROG's way). */
#define ___TP_BTF_RAW_PROG(sec, prog, name, args...)                                                              \
	SEC(sec)                                                                                                   \
	int prog(unsigned long long *ctx)                                                                          \
	{                                                                                                          \
		_Pragma("GCC diagnostic push")                                                                     \
		_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")                                             \
		return ____##name##_body(___bpf_ctx_cast(args));                                                   \
		_Pragma("GCC diagnostic pop")                                                                      \
	}

#define TP_BTF_RAW(name, tp, args...)                                                                              \
	static __always_inline int ____##name##_body(unsigned long long *ctx, ##args);                            \
	___TP_BTF_RAW_PROG("tp_btf/" #tp, name##_btf, name, ##args)                                                \
	___TP_BTF_RAW_PROG("raw_tp/" #tp, name##_raw, name, ##args)                                                \
	static __always_inline int ____##name##_body(unsigned long long *ctx, ##args)

#endif
