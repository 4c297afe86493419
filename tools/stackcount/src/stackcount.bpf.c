// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* stackcount: count the events a pattern names (kernel functions, tracepoints, user functions, USDT probes) by
 * the stack traces that led to them, in the kernel. One counting function serves every attach mechanism. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include "maps.bpf.h"
#include "filter.bpf.h"
#include "stacks.bpf.h"
#include "arch.bpf.h"
#include "stackcount.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __s32 target_cpu = -1;
const volatile bool user_stacks = true;
const volatile bool kernel_stacks = true;

/* Events not counted: the counts map was full. */
__u64 lost_counts = 0;
/* New processes not reported in time for their maps to be saved. */
__u64 lost_notices = 0;

STACK_TRACE_MAP(stackmap);
PROCESS_NOTICE_MAPS(seen, new_pids);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DEFAULT_COUNTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct stack_key);
	__type(value, __u64);
} counts SEC(".maps");

/* at_entry: a uprobe on a user function's first instruction, whose caller only a register names (arm64). */
static __always_inline int count(void *ctx, bool at_entry)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct stack_key key = {};

	if (!tgid_wanted(tgid))
		return 0;
	if (target_cpu >= 0 && bpf_get_smp_processor_id() != (__u32)target_cpu)
		return 0;
	key.pid = tgid;
	key.kern_stack_id = kernel_stacks ? bpf_get_stackid(ctx, &stackmap, 0) : -1;
	key.user_stack_id = user_stacks ? bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK) : -1;
	if (at_entry && user_stacks)
		key.entry_caller = entry_caller(ctx);
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	if (user_stacks && tgid)
		notice_process(&seen, &new_pids, tgid, &lost_notices);

	counter_inc(&counts, &key, &lost_counts);
	return 0;
}

SEC("fentry")
int BPF_PROG(sc_fentry) { return count(ctx, false); }

SEC("kprobe.multi")
int sc_kprobe_multi(struct pt_regs *ctx) { return count(ctx, false); }

SEC("kprobe")
int sc_kprobe(struct pt_regs *ctx) { return count(ctx, false); }

SEC("tracepoint")
int sc_tracepoint(void *ctx) { return count(ctx, false); }

SEC("uprobe.multi")
int sc_uprobe_multi(struct pt_regs *ctx) { return count(ctx, true); }

SEC("uprobe")
int sc_uprobe(struct pt_regs *ctx) { return count(ctx, true); }

SEC("usdt")
int sc_usdt(struct pt_regs *ctx) { return count(ctx, false); }
