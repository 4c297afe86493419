// SPDX-License-Identifier: GPL-2.0
/* sigsnoop: one record per signal sent. By default from signal:signal_generate (tp_btf, else raw_tp, else the
 * classic tracepoint), which the kernel hits for every signal it generates, in the sender's context: the record
 * has the sender, the target thread and its name, and the result (delivered, ignored, already pending, ...).
 *
 * With -k (kill_only), the kill, tkill and tgkill system calls are followed from entry to exit (syscalls
 * tracepoints) instead, and the record has the call's return value; signal_generate then only adds the target's
 * name to a call in flight in the same thread. Sender PID (-p) and signal set (-s) filters run at entry, failed
 * only (-x) at the end. Failed reservations are counted in `lost`, calls not followed because the in-flight map
 * was full in `inflight_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "sigsnoop.h"

#define MAX_INFLIGHT 10240

const volatile bool kill_only = false;
const volatile bool failed_only = false;
/* Bit (sig - 1) set: signal sig is traced; 0: every signal. */
const volatile __u64 sig_mask = 0;

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct event);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline bool sig_wanted(int sig)
{
	if (!sig_mask)
		return true;
	if (sig < 1 || sig > 64)
		return false;
	return sig_mask & (1ULL << ((sig - 1) & 63));
}

static __always_inline int generated(int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
				     int result)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct event *e;

	if (kill_only) {
		/* The target of a kill/tkill/tgkill call in flight in this thread: its name. */
		e = bpf_map_lookup_elem(&inflight, &tid);
		if (e && !e->has_tcomm) {
			BPF_CORE_READ_STR_INTO(&e->tcomm, task, comm);
			e->has_tcomm = 1;
		}
		return 0;
	}
	if (!sig_wanted(sig) || !tgid_wanted(id >> 32))
		return 0;
	if (failed_only && result == 0)
		return 0;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = tid;
	e->tpid = BPF_CORE_READ(task, pid);
	e->tgid = BPF_CORE_READ(task, tgid);
	e->sig = sig;
	e->ret = result;
	/* SEND_SIG_NOINFO (0) and SEND_SIG_PRIV (1) stand for no siginfo. */
	if ((unsigned long)info > 1)
		e->code = BPF_CORE_READ(info, si_code);
	e->source = SRC_GENERATE;
	e->group = group != 0;
	e->has_tcomm = 1;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	BPF_CORE_READ_STR_INTO(&e->tcomm, task, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BTF_RAW(signal_generate, signal_generate, int sig, struct kernel_siginfo *info, struct task_struct *task,
	   int group, int result)
{
	return generated(sig, info, task, group, result);
}

SEC("tracepoint/signal/signal_generate")
int signal_generate_tp(struct trace_event_raw_signal_generate *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct event *e;

	if (kill_only) {
		e = bpf_map_lookup_elem(&inflight, &tid);
		if (e && !e->has_tcomm) {
			bpf_probe_read_kernel_str(e->tcomm, sizeof(e->tcomm), ctx->comm);
			e->has_tcomm = 1;
		}
		return 0;
	}
	if (!sig_wanted(ctx->sig) || !tgid_wanted(id >> 32))
		return 0;
	if (failed_only && ctx->result == 0)
		return 0;
	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = tid;
	e->tpid = ctx->pid;
	e->tgid = -1;	/* the classic tracepoint does not carry it */
	e->sig = ctx->sig;
	e->ret = ctx->result;
	e->code = ctx->code;
	e->source = SRC_GENERATE;
	e->group = ctx->group != 0;
	e->has_tcomm = 1;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_probe_read_kernel_str(e->tcomm, sizeof(e->tcomm), ctx->comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline int call_enter(__s32 tgid, __s32 tpid, int sig, __u8 source)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct event e = {};

	if (!sig_wanted(sig) || !tgid_wanted(id >> 32))
		return 0;
	e.ts_ns = bpf_ktime_get_ns();
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

static __always_inline int call_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct event *e;

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
	return call_enter(-1, (__s32)ctx->args[0], (int)ctx->args[1], SRC_KILL);
}

SEC("tracepoint/syscalls/sys_exit_kill")
int kill_exit(struct syscall_exit_ctx *ctx)
{
	return call_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_tkill")
int tkill_enter(struct syscall_enter_ctx *ctx)
{
	return call_enter(-1, (__s32)ctx->args[0], (int)ctx->args[1], SRC_TKILL);
}

SEC("tracepoint/syscalls/sys_exit_tkill")
int tkill_exit(struct syscall_exit_ctx *ctx)
{
	return call_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_tgkill")
int tgkill_enter(struct syscall_enter_ctx *ctx)
{
	return call_enter((__s32)ctx->args[0], (__s32)ctx->args[1], (int)ctx->args[2], SRC_TGKILL);
}

SEC("tracepoint/syscalls/sys_exit_tgkill")
int tgkill_exit(struct syscall_exit_ctx *ctx)
{
	return call_exit(ctx->ret);
}

char LICENSE[] SEC("license") = "GPL";
