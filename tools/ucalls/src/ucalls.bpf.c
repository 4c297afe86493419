// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* ucalls: method calls of one process counted per class and method from its runtime's entry (and, with -L,
 * return) USDT probes, and with -S its system calls from the raw_syscalls tracepoints, in cumulative maps the
 * front end reads and differences every interval.
 *
 * The USDT cookie says where the runtime passes the class and method names. With -L each thread keeps a stack of
 * its calls' entry times, so a return closes the most recent entry of that thread, recursion included; calls
 * deeper than MAX_DEPTH are counted, not timed. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "maps.bpf.h"
#include "syscall_tp.bpf.h"
#include "usdt_args.bpf.h"
#include "ucalls.h"

const volatile __u32 target_tgid = 0;
const volatile bool latency = false;

/* Methods not counted because `methods` (or `syscalls`) was full. */
__u64 methods_full = 0;
/* Calls not timed: too deep, or `stacks` full. */
__u64 untimed = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_METHODS);
	__type(key, struct method_key);
	__type(value, struct info);
} methods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct info);
} syscalls SEC(".maps");

struct stack {
	__u32 depth;
	__u32 _pad;
	__u64 ts[MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct stack);
} stacks SEC(".maps");

struct sys_start {
	__u64 ts;
	__u64 nr;
};

/* Entry times of system calls in progress, per thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct sys_start);
} sys_starts SEC(".maps");

/* A zeroed key and stack, too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct method_key);
} key_scratch SEC(".maps");

static const struct stack empty_stack = {};
static const struct info zero_info = {};

/* Reads the class and method names of the probe into the per-CPU scratch key. */
static __always_inline struct method_key *read_key(struct pt_regs *ctx)
{
	__u32 zero = 0;
	struct method_key *key = bpf_map_lookup_elem(&key_scratch, &zero);

	if (!key)
		return NULL;
	__builtin_memset(key, 0, sizeof(*key));
	usdt_read_call(ctx, bpf_usdt_cookie(ctx), key->clazz, CLASS_LEN, key->method, METHOD_LEN);
	return key;
}

static __always_inline void add(void *map, void *key, __u64 elapsed)
{
	struct info *info = bpf_map_lookup_or_try_init(map, key, &zero_info);

	if (!info) {
		__sync_fetch_and_add(&methods_full, 1);
		return;
	}
	__sync_fetch_and_add(&info->calls, 1);
	/* Not an add of 0: clang turns an atomic add of a constant 0 into an atomic OR, which kernels before 5.12
	 * refuse ("BPF_STX uses reserved fields"), and counting calls alone (-S without -L) passes 0 here. */
	if (elapsed)
		__sync_fetch_and_add(&info->total_ns, elapsed);
}

SEC("usdt")
int ucalls_entry(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct method_key *key;
	struct stack *s;
	__u32 depth;

	if (!latency) {
		key = read_key(ctx);
		if (key)
			add(&methods, key, 0);
		return 0;
	}
	s = bpf_map_lookup_or_try_init(&stacks, &tid, &empty_stack);
	if (!s) {
		__sync_fetch_and_add(&untimed, 1);
		return 0;
	}
	depth = s->depth;
	if (depth < MAX_DEPTH)
		s->ts[depth] = bpf_ktime_get_ns();
	s->depth = depth + 1;
	return 0;
}

SEC("usdt")
int ucalls_return(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct method_key *key;
	struct stack *s;
	__u64 now = bpf_ktime_get_ns(), elapsed = 0;
	__u32 depth;

	s = bpf_map_lookup_elem(&stacks, &tid);
	if (!s || !s->depth)
		return 0;	/* entered before ucalls attached */
	depth = s->depth - 1;
	s->depth = depth;
	if (depth < MAX_DEPTH)
		elapsed = now - s->ts[depth];
	else
		__sync_fetch_and_add(&untimed, 1);
	key = read_key(ctx);
	if (key)
		add(&methods, key, elapsed);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int ucalls_sys_enter(struct syscall_enter_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, nr = ctx->id;
	struct sys_start start;

	if (id >> 32 != target_tgid)
		return 0;
	if (!latency) {
		add(&syscalls, &nr, 0);
		return 0;
	}
	start.ts = bpf_ktime_get_ns();
	start.nr = nr;
	bpf_map_update_elem(&sys_starts, &tid, &start, BPF_ANY);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int ucalls_sys_exit(struct syscall_exit_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, nr;
	struct sys_start *start;

	if (id >> 32 != target_tgid || !latency)
		return 0;
	start = bpf_map_lookup_elem(&sys_starts, &tid);
	if (!start)
		return 0;
	nr = start->nr;
	add(&syscalls, &nr, bpf_ktime_get_ns() - start->ts);
	bpf_map_delete_elem(&sys_starts, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
