// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* futexctn: user-space lock contention as the kernel sees it, a FUTEX_WAIT that slept until woken, timed from
 * sys_enter_futex to sys_exit_futex per thread, and summed per (thread, futex address, user stack) into a log2
 * histogram with count, sum, min and max (per process and address with -s).
 *
 * Only FUTEX_WAIT (with or without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME) is timed, the operation glibc's
 * mutexes, condition variables and semaphores sleep with; a wait that failed (EAGAIN: the futex word changed
 * before the sleep; ETIMEDOUT; EINTR) was not contention that ended and is not counted. The -p, -t and -l
 * filters run at entry. The syscall tracepoints' context is read as plain structs (syscall_tp.bpf.h): no CO-RE
 * relocation, so no search of the kernel's BTF at start-up. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "bits.bpf.h"
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "stacks.bpf.h"
#include "syscall_tp.bpf.h"
#include "futexctn.h"

#define FUTEX_WAIT 0
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256

/* -l: only this futex address (0: every one). */
const volatile __u64 target_lock = 0;
/* -s: per process and address, no stacks. */
const volatile bool summary = false;
/* -m: the histogram in milliseconds. */
const volatile bool milliseconds = false;
/* --container-label: each histogram notes its waiter's cgroup. */
const volatile bool note_cgroup = false;

/* The report interval waits are counted in (user space moves it on). */
__u32 epoch = 0;
/* Waits not timed (start map full) or not counted (histogram map full). */
__u64 start_full = 0;
__u64 hists_full = 0;
__u64 lost_notices = 0;

/* Makes the structs visible to the skeleton's generated `types` module. */
struct hist_key _hist_key_type = {};
struct hist _hist_type = {};

struct wait {
	__u64 ts;
	__u64 uaddr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, __u64);
	__type(value, struct wait);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, struct hist_key);
	__type(value, struct hist);
} hists SEC(".maps");

STACK_TRACE_MAP(stackmap);
PROCESS_NOTICE_MAPS(seen_pids, new_pids);

static const struct hist empty_hist;

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(struct syscall_enter_ctx *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct wait w;

	if (((int)ctx->args[1] & ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)) != FUTEX_WAIT)
		return 0;
	if (!current_ids_wanted(pid_tgid))
		return 0;
	w.uaddr = ctx->args[0];
	if (target_lock && w.uaddr != target_lock)
		return 0;
	w.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start, &pid_tgid, &w, BPF_ANY))
		__sync_fetch_and_add(&start_full, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_exit(struct syscall_exit_ctx *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns(), delta, slot;
	struct hist_key key = {};
	struct wait *w;
	struct hist *h;

	w = bpf_map_lookup_elem(&start, &pid_tgid);
	if (!w)
		return 0;
	if (ctx->ret < 0 || now < w->ts)
		goto done;
	key.pid_tgid = pid_tgid;
	key.uaddr = w->uaddr;
	key.epoch = epoch;
	if (summary) {
		key.pid_tgid >>= 32;
		key.user_stack_id = -1;
	} else {
		key.user_stack_id = bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
		notice_process(&seen_pids, &new_pids, pid_tgid >> 32, &lost_notices);
	}
	h = bpf_map_lookup_or_try_init(&hists, &key, &empty_hist);
	if (!h) {
		__sync_fetch_and_add(&hists_full, 1);
		goto done;
	}
	delta = now - w->ts;
	__sync_fetch_and_add(&h->total_ns, delta);
	delta /= milliseconds ? 1000000 : 1000;
	slot = log2l(delta);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->total, delta);
	/* min and max as plain stores: a thread's entry is updated by that thread only; with -s, two threads of a
	 * process ending waits at the same moment may leave the other's value (no compare-and-swap: BPF has it
	 * from 5.12 only). The counts are atomic. */
	if (!h->contended || delta < h->min)
		h->min = delta;
	if (delta > h->max)
		h->max = delta;
	__sync_fetch_and_add(&h->contended, 1);
	bpf_get_current_comm(h->comm, sizeof(h->comm));
	if (note_cgroup)
		h->cgroup_id = bpf_get_current_cgroup_id();
done:
	bpf_map_delete_elem(&start, &pid_tgid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
