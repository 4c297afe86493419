// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* funccount: count calls of kernel functions, tracepoints, user functions and USDT probes.
 *
 * Every match of the user's pattern gets an index; each hit adds one to counts[index], a per-CPU array that user
 * space sums and differences per interval. Where the kernel has BPF cookies (5.15+), one program serves every
 * match of its kind and reads the index from the cookie of the attachment (kprobe, kprobe.multi, tracepoint,
 * uprobe, uprobe.multi; USDT through libbpf's bpf_usdt_cookie). fentry programs and kernels without cookies use
 * "slot" programs instead: SLOTS copies per kind, copy N counting index slot_base + N, with slot_base set per
 * loaded object, so a few objects cover hundreds of matches.
 *
 * Syscall tracepoints (t:syscalls:sys_enter_NAME / sys_exit_NAME) are counted by one raw tracepoint on sys_enter
 * and one on sys_exit instead of a link each: sys_enter_index[nr] / sys_exit_index[nr] hold the match index + 1
 * of syscall nr (0: not counted). As the syscall tracepoints do, 32-bit (ia32, x32) system calls are skipped. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "arch.bpf.h"
#include "filter.bpf.h"
#include "funccount.h"

const volatile bool filter_cpu = false;
const volatile __u32 target_cpu = 0;
const volatile __u32 slot_base = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); /* set to the number of matches by user space */
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline int count(__u64 index)
{
	__u32 key = index;
	__u64 *val;

	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (filter_cpu && bpf_get_smp_processor_id() != target_cpu)
		return 0;
	val = bpf_map_lookup_elem(&counts, &key);
	/* Atomic although per-CPU: a preemptible uprobe program may be interrupted by another on this CPU. */
	if (val)
		__sync_fetch_and_add(val, 1);
	return 0;
}

/* One program per kind, attached once per match with the match's index as the BPF cookie. */
SEC("kprobe")
int fc_kprobe(void *ctx)
{
	return count(bpf_get_attach_cookie(ctx));
}

SEC("kprobe.multi")
int fc_kprobe_multi(void *ctx)
{
	return count(bpf_get_attach_cookie(ctx));
}

SEC("tracepoint")
int fc_tracepoint(void *ctx)
{
	return count(bpf_get_attach_cookie(ctx));
}

SEC("uprobe")
int fc_uprobe(void *ctx)
{
	return count(bpf_get_attach_cookie(ctx));
}

SEC("uprobe.multi")
int fc_uprobe_multi(void *ctx)
{
	return count(bpf_get_attach_cookie(ctx));
}

SEC("usdt")
int fc_usdt(struct pt_regs *ctx)
{
	return count(bpf_usdt_cookie(ctx));
}

struct syscall_index {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
};
struct syscall_index sys_enter_index SEC(".maps");
struct syscall_index sys_exit_index SEC(".maps");

/* x86's TS_COMPAT: the task is in a 32-bit system call. */
#define TS_COMPAT_BIT 0x0002

static __always_inline int count_syscall(void *index_map, long nr)
{
	__u32 key = nr, *index;

	if (nr < 0 || nr >= SYSCALL_SLOTS)
		return 0;
	index = bpf_map_lookup_elem(index_map, &key);
	if (!index || !*index)
		return 0;
#if defined(__TARGET_ARCH_x86)
	{
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		if (bpf_core_field_exists(task->thread_info.status) &&
		    (BPF_CORE_READ(task, thread_info.status) & TS_COMPAT_BIT))
			return 0;
	}
#endif
	return count(*index - 1);
}

SEC("raw_tp/sys_enter")
int fc_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	return count_syscall(&sys_enter_index, (long)ctx->args[1]);
}

SEC("raw_tp/sys_exit")
int fc_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	return count_syscall(&sys_exit_index, syscall_nr_of((struct pt_regs *)ctx->args[0]));
}

/* Slot programs: copy N of a kind (fc_KIND_N, named after the kind's program) counts index slot_base + N. */
#define SLOT(kind, sec, n)                                                                                         \
	SEC(sec) int fc_##kind##_##n(void *ctx)                                                                    \
	{                                                                                                          \
		return count(slot_base + n);                                                                       \
	}
#define SLOTS_OF(kind, sec)                                                                                        \
	SLOT(kind, sec, 0) SLOT(kind, sec, 1) SLOT(kind, sec, 2) SLOT(kind, sec, 3)                                \
	SLOT(kind, sec, 4) SLOT(kind, sec, 5) SLOT(kind, sec, 6) SLOT(kind, sec, 7)                                \
	SLOT(kind, sec, 8) SLOT(kind, sec, 9) SLOT(kind, sec, 10) SLOT(kind, sec, 11)                              \
	SLOT(kind, sec, 12) SLOT(kind, sec, 13) SLOT(kind, sec, 14) SLOT(kind, sec, 15)

_Static_assert(FUNCCOUNT_SLOTS == 16, "SLOTS_OF makes 16 programs of each kind");

SLOTS_OF(fentry, "fentry")
SLOTS_OF(kprobe, "kprobe")
SLOTS_OF(tracepoint, "tracepoint")
SLOTS_OF(uprobe, "uprobe")

char LICENSE[] SEC("license") = "Dual BSD/GPL";
