// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* trace: one object per probe, all sending into the first object's ring buffer (with -K/-U, each record also
 * carries its stacks, copied by bpf_get_stack, so no stack map fills or collides over a long run). The generic probe
 * (probe.bpf.h) fetches the values the probe's format and predicate name, computes the format's arguments and
 * applies the predicate; this program copies the results, the %s strings, the time, CPU, PID, TID and command into one record. Records the ring buffer has no
 * room for are counted in `lost`. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "arch.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "trace.h"
#include "probe.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

CGROUP_FILTER;

const volatile __u32 probe_index = 0;
/* trace's own process (not traced unless -S). */
const volatile __u32 exclude_tgid = 0;
const volatile __u32 n_strs = 0;
const volatile __u8 str_fetch[MAX_STRS] = {};
const volatile __u32 str_size = 80;
/* -K and -U: the event carries its kernel and user stacks. */
const volatile bool kernel_stack = false;
const volatile bool user_stack = false;
/* The probe is a uprobe on a user function's first instruction (its caller is read for -U). */
const volatile bool at_entry = false;

__u64 lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

_Static_assert(__builtin_offsetof(struct event, vals) == EV_VALS, "EV_VALS");
_Static_assert(__builtin_offsetof(struct event, strs) == EV_STRS, "EV_STRS");
_Static_assert(__builtin_offsetof(struct event, comm) == EV_COMM, "EV_COMM");
_Static_assert(__builtin_offsetof(struct event, kstack_len) == EV_KSTACK_LEN, "EV_KSTACK_LEN");
_Static_assert(__builtin_offsetof(struct event, kstack) == EV_KSTACK, "EV_KSTACK");
_Static_assert(__builtin_offsetof(struct event, ustack) == EV_USTACK, "EV_USTACK");
_Static_assert(__builtin_offsetof(struct event, entry_caller) == EV_ENTRY_CALLER, "EV_ENTRY_CALLER");
_Static_assert(sizeof(struct event) == EV_SIZE, "EV_SIZE");

static __always_inline int handle(void *record, struct pt_regs *regs, __u64 *slots)
{
	__u64 vals[MAX_FETCH] = {}, outs[MAX_OUT] = {};
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid;
	struct event *e;

	if (exclude_tgid && (id >> 32) == exclude_tgid)
		return 0;
	if (!current_uid_wanted() || !cgroup_wanted())
		return 0;
	if (!probe_wanted(&tid))
		return 0;
	if (!probe_fetch(record, regs, slots, tid, vals))
		return 0;
	if (!probe_eval(record, vals, outs))
		return 0;
	/* Without stacks the record ends before them (a size the verifier knows: the flags are rodata). */
	e = ringbuf_reserve(&events, (kernel_stack || user_stack) ? sizeof(*e) : EV_KSTACK, &lost);
	if (!e)
		return 0;
	e->kstack_len = -1;
	e->ustack_len = -1;
	if (kernel_stack || user_stack) {
		/* The program's own context: the record of a tracepoint, the registers of a kprobe, uprobe or USDT
		 * probe, the arguments of an fentry or fexit program. */
		void *ctx = record ? record : (regs ? (void *)regs : (void *)slots);

		if (kernel_stack)
			e->kstack_len = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		if (user_stack)
			e->ustack_len = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		e->entry_caller = user_stack && at_entry && regs ? entry_caller(regs) : 0;
	}
	e->ts = bpf_ktime_get_ns();
	e->tgid = id >> 32;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->probe = probe_index;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
#pragma unroll
	for (int i = 0; i < MAX_OUT; i++)
		e->vals[i] = outs[i];
#pragma unroll
	for (int s = 0; s < MAX_STRS; s++) {
		__u8 f = str_fetch[s];

		e->strs[s][0] = 0;
		if (s >= n_strs || f >= MAX_FETCH)
			continue;
		probe_string(e->strs[s], str_size, record, f, vals[f]);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* The generic programs (tracepoint, kprobe/uprobe, kretprobe, fentry/fexit and the $latency starts) over handle(). */
PROBE_PROGRAMS(handle)
