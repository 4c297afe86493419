// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* funcslower: report each call of the matched functions that takes longer than a threshold.
 *
 * An entry program stores the time, the first MAX_ARGS arguments and the function's number per thread; the
 * return program (fexit, kretprobe, uretprobe, or their multi forms) computes the duration and, above
 * `min_ns`, sends an event with the return value and, with -U/-K, stack ids. As in BCC, calls are keyed by
 * thread, so a nested call of a traced function replaces the outer one's entry: the innermost calls are seen.
 *
 * The function's number is `func_base` plus the link's BPF cookie (kprobes, uprobes and their multi forms, where
 * the kernel has cookies) or plus this object's `func_index` (fentry, which loads one object per function). On
 * kernels without cookies the entry address (`ip`) lets user space name the function. fentry/fexit read the
 * arguments and the return value from the BTF context, whose length `nr_args` (the function's arity) is set
 * per object: the branches on it are constant, so the verifier never sees an access past the last argument. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "stacks.bpf.h"
#include "funcslower.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u64 min_ns = 1000000;
const volatile __u32 func_base = 0;
const volatile __u32 func_index = 0;
const volatile bool use_cookie = false;
const volatile __u32 nr_args = 0;
const volatile __u32 want_args = 0;
const volatile bool user_stacks = false;
const volatile bool kernel_stacks = false;
/* Without -p, when user frames are named: each process is reported on `events` (a 4-byte record, its PID) at its
 * first traced call's entry, so that user space saves its memory maps while the call runs, before it can exit. */
const volatile bool notice_processes = false;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

/* Events the ring buffer had no room for; calls not timed (no room in `entries`). */
__u64 lost = 0;
__u64 untimed = 0;
/* Process notices the ring buffer had no room for. */
__u64 lost_notices = 0;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct entry);
} entries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

STACK_TRACE_MAP(stackmap);
SEEN_PIDS_MAP(seen_pids);

static __always_inline struct entry *start(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct entry e = {};

	if (!tgid_wanted(id >> 32))
		return NULL;
	if (notice_processes)
		notice_process(&seen_pids, &events, id >> 32, &lost_notices);
	e.start_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&entries, &tid, &e, BPF_ANY)) {
		__sync_fetch_and_add(&untimed, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(&entries, &tid);
}

static __always_inline int finish(void *ctx, __u64 retval)
{
	__u64 id = bpf_get_current_pid_tgid(), delta;
	__u32 tid = (__u32)id;
	struct entry *e;
	struct event *ev;

	if (!tgid_wanted(id >> 32))
		return 0;
	e = bpf_map_lookup_elem(&entries, &tid);
	if (!e)
		return 0;
	delta = bpf_ktime_get_ns() - e->start_ns;
	if (delta < min_ns) {
		bpf_map_delete_elem(&entries, &tid);
		return 0;
	}
	ev = ringbuf_reserve(&events, sizeof(*ev), &lost);
	if (!ev) {
		bpf_map_delete_elem(&entries, &tid);
		return 0;
	}
	ev->start_ns = e->start_ns;
	ev->duration_ns = delta;
	ev->retval = retval;
	ev->ip = e->ip;
	__builtin_memcpy(ev->args, e->args, sizeof(ev->args));
	ev->func = e->func;
	ev->pid = id >> 32;
	ev->tid = tid;
	ev->user_stack_id = user_stacks ? bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK) : -1;
	ev->kern_stack_id = kernel_stacks ? bpf_get_stackid(ctx, &stackmap, 0) : -1;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	bpf_map_delete_elem(&entries, &tid);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* kprobes and uprobes: arguments from the registers, the function from the cookie. */
static __always_inline int enter_regs(struct pt_regs *ctx)
{
	struct entry *e = start();

	if (!e)
		return 0;
	e->ip = PT_REGS_IP(ctx);
	e->func = func_base + (use_cookie ? (__u32)bpf_get_attach_cookie(ctx) : 0);
	if (want_args > 0)
		e->args[0] = PT_REGS_PARM1(ctx);
	if (want_args > 1)
		e->args[1] = PT_REGS_PARM2(ctx);
	if (want_args > 2)
		e->args[2] = PT_REGS_PARM3(ctx);
	if (want_args > 3)
		e->args[3] = PT_REGS_PARM4(ctx);
	if (want_args > 4)
		e->args[4] = PT_REGS_PARM5(ctx);
	if (want_args > 5)
		e->args[5] = PT_REGS_PARM6(ctx);
	return 0;
}

/* The context word at byte offset `off`, read with that constant offset in the instruction: the verifier refuses a
 * context pointer moved by arithmetic, which clang would otherwise make of loads differing only in offset. */
#define CTX_AT(ctx, off)                                                                                           \
	({                                                                                                         \
		__u64 __v;                                                                                         \
		asm volatile("%[v] = *(u64 *)(%[c] + " #off ")" : [v] "=r"(__v) : [c] "r"(ctx));                   \
		__v;                                                                                               \
	})

SEC("fentry")
int fs_fentry(__u64 *ctx)
{
	struct entry *e = start();

	if (!e)
		return 0;
	e->func = func_base + func_index;
	if (want_args > 0 && nr_args > 0)
		e->args[0] = CTX_AT(ctx, 0);
	if (want_args > 1 && nr_args > 1)
		e->args[1] = CTX_AT(ctx, 8);
	if (want_args > 2 && nr_args > 2)
		e->args[2] = CTX_AT(ctx, 16);
	if (want_args > 3 && nr_args > 3)
		e->args[3] = CTX_AT(ctx, 24);
	if (want_args > 4 && nr_args > 4)
		e->args[4] = CTX_AT(ctx, 32);
	if (want_args > 5 && nr_args > 5)
		e->args[5] = CTX_AT(ctx, 40);
	return 0;
}

SEC("fexit")
int fs_fexit(__u64 *ctx)
{
	__u64 ret = 0;

	/* The return value follows the arguments (a function has at most 12 in BTF). */
	switch (nr_args) {
	case 0: ret = CTX_AT(ctx, 0); break;
	case 1: ret = CTX_AT(ctx, 8); break;
	case 2: ret = CTX_AT(ctx, 16); break;
	case 3: ret = CTX_AT(ctx, 24); break;
	case 4: ret = CTX_AT(ctx, 32); break;
	case 5: ret = CTX_AT(ctx, 40); break;
	case 6: ret = CTX_AT(ctx, 48); break;
	case 7: ret = CTX_AT(ctx, 56); break;
	case 8: ret = CTX_AT(ctx, 64); break;
	case 9: ret = CTX_AT(ctx, 72); break;
	case 10: ret = CTX_AT(ctx, 80); break;
	case 11: ret = CTX_AT(ctx, 88); break;
	default: break;
	}
	return finish(ctx, ret);
}

SEC("kprobe.multi")
int fs_kprobe_multi(struct pt_regs *ctx) { return enter_regs(ctx); }

SEC("kretprobe.multi")
int fs_kretprobe_multi(struct pt_regs *ctx) { return finish(ctx, PT_REGS_RC(ctx)); }

SEC("kprobe")
int fs_kprobe(struct pt_regs *ctx) { return enter_regs(ctx); }

SEC("kretprobe")
int fs_kretprobe(struct pt_regs *ctx) { return finish(ctx, PT_REGS_RC(ctx)); }

SEC("uprobe.multi")
int fs_uprobe_multi(struct pt_regs *ctx) { return enter_regs(ctx); }

SEC("uretprobe.multi")
int fs_uretprobe_multi(struct pt_regs *ctx) { return finish(ctx, PT_REGS_RC(ctx)); }

SEC("uprobe")
int fs_uprobe(struct pt_regs *ctx) { return enter_regs(ctx); }

SEC("uretprobe")
int fs_uretprobe(struct pt_regs *ctx) { return finish(ctx, PT_REGS_RC(ctx)); }
