// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The kill, tkill and tgkill system calls, followed from entry to return through the syscalls tracepoints: the
 * one implementation behind killsnoop and sigsnoop -k (common::domain::signals is its user-space half).
 *
 * A tool that includes this header gets the signal record (struct signal_event, mirrored by
 * common::domain::signals::SignalRecord), its ring buffer `events` with the `lost` counter, the filters (sender
 * -p through filter.bpf.h's target_tgid, target -T, signal set -s, failed only -x), and six programs: kill_enter,
 * kill_exit, tkill_enter, tkill_exit, tgkill_enter, tgkill_exit (sections tracepoint/syscalls/sys_{enter,exit}_*).
 * At entry the call's arguments are kept per thread in `inflight` (after the sender, target and signal filters);
 * at exit the return value completes the record, -x is decided and the record goes out. A call not followed
 * because `inflight` was full is counted in `inflight_full`.
 *
 * A tool that also sees the signal being generated (signal:signal_generate, in the sender's context, during the
 * call) can name the target with killcall_in_flight(): the record of the call this thread is making, or NULL. */
#ifndef __COREBPF_KILLCALLS_BPF_H
#define __COREBPF_KILLCALLS_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"

#define SIGNAL_COMM_LEN 16
#define KILLCALLS_MAX_INFLIGHT 10240

/* Where a record comes from (struct signal_event's `source`). */
#define SIGNAL_SRC_GENERATE 0	/* signal:signal_generate (sigsnoop without -k; RESULT: TRACE_SIGNAL_*) */
#define SIGNAL_SRC_KILL 1	/* kill(): RESULT is its return value */
#define SIGNAL_SRC_TKILL 2
#define SIGNAL_SRC_TGKILL 3

/* One signal sent, or one kill/tkill/tgkill call. */
struct signal_event {
	__u64 ts_ns;
	__u64 cgroup_id;	/* the sender's cgroup v2 ID (its container, if any) */
	__u32 pid;		/* sender's tgid */
	__u32 tid;		/* sender's thread */
	__s32 tpid;		/* target: the thread signalled (generate), or the PID argument of the call */
	__s32 tgid;		/* tgkill's thread group argument; the target's tgid for signal_generate; else -1 */
	__s32 sig;
	__s32 ret;		/* signal_generate's result, or the call's return value (-errno) */
	__s32 code;		/* si_code (signal_generate), 0 for calls */
	__u8 source;		/* SIGNAL_SRC_* */
	__u8 group;		/* signal_generate: sent to the whole thread group */
	__u8 has_tcomm;		/* tcomm was read (always for generate; for calls, when the kernel generated it) */
	__u8 _pad;
	char comm[SIGNAL_COMM_LEN];
	char tcomm[SIGNAL_COMM_LEN];
};

const volatile bool failed_only = false;
/* The signal filter: off unless filter_sig; then signal n (1..64) is traced if bit n - 1 of sig_mask is set,
 * and signal 0 (kill(pid, 0), a probe) if sig_zero. */
const volatile bool filter_sig = false;
const volatile __u64 sig_mask = 0;
const volatile bool sig_zero = false;
/* The target filter (BCC's -T): the calls whose PID argument is target_tpid. */
const volatile bool filter_tpid = false;
const volatile __s32 target_tpid = 0;

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct signal_event visible to the skeleton's generated `types` module. */
struct signal_event _signal_event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KILLCALLS_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct signal_event);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline bool sig_wanted(int sig)
{
	if (!filter_sig)
		return true;
	if (sig == 0)
		return sig_zero;
	if (sig < 1 || sig > 64)
		return false;
	return sig_mask & (1ULL << ((sig - 1) & 63));
}

/* The record of the kill/tkill/tgkill call the current thread is making, or NULL. */
static __always_inline struct signal_event *killcall_in_flight(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	return bpf_map_lookup_elem(&inflight, &tid);
}

static __always_inline int killcall_enter(__s32 tgid, __s32 tpid, int sig, __u8 source)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct signal_event e = {};

	if (!sig_wanted(sig) || !tgid_wanted(id >> 32))
		return 0;
	if (filter_tpid && tpid != target_tpid)
		return 0;
	e.ts_ns = bpf_ktime_get_ns();
	e.cgroup_id = bpf_get_current_cgroup_id();
	e.pid = id >> 32;
	e.tid = tid;
	e.tpid = tpid;
	e.tgid = tgid;
	e.sig = sig;
	e.source = source;
	bpf_get_current_comm(e.comm, sizeof(e.comm));
	if (bpf_map_update_elem(&inflight, &tid, &e, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

static __always_inline int killcall_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct signal_event *e;

	e = bpf_map_lookup_elem(&inflight, &tid);
	if (!e)
		return 0;
	if (!failed_only || ret < 0) {
		e->ret = ret;
		ringbuf_output(&events, e, sizeof(*e), &lost);
	}
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_kill")
int kill_enter(struct syscall_enter_ctx *ctx)
{
	return killcall_enter(-1, (__s32)ctx->args[0], (int)ctx->args[1], SIGNAL_SRC_KILL);
}

SEC("tracepoint/syscalls/sys_exit_kill")
int kill_exit(struct syscall_exit_ctx *ctx)
{
	return killcall_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_tkill")
int tkill_enter(struct syscall_enter_ctx *ctx)
{
	return killcall_enter(-1, (__s32)ctx->args[0], (int)ctx->args[1], SIGNAL_SRC_TKILL);
}

SEC("tracepoint/syscalls/sys_exit_tkill")
int tkill_exit(struct syscall_exit_ctx *ctx)
{
	return killcall_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_tgkill")
int tgkill_enter(struct syscall_enter_ctx *ctx)
{
	return killcall_enter((__s32)ctx->args[0], (__s32)ctx->args[1], (int)ctx->args[2], SIGNAL_SRC_TGKILL);
}

SEC("tracepoint/syscalls/sys_exit_tgkill")
int tgkill_exit(struct syscall_exit_ctx *ctx)
{
	return killcall_exit(ctx->ret);
}

#endif /* __COREBPF_KILLCALLS_BPF_H */
