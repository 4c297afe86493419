// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* sigsnoop: one record per signal sent. By default from signal:signal_generate (tp_btf, else raw_tp, else the
 * classic tracepoint), which the kernel hits for every signal it generates, in the sender's context: the record
 * has the sender, the target thread and its name, and the result (delivered, ignored, already pending, ...).
 *
 * With -k (kill_only), the kill, tkill and tgkill system calls are followed from entry to exit instead: the
 * programs, record, ring buffer and filters of killcalls.bpf.h, which killsnoop shares; signal_generate then
 * only adds the target's name to a call in flight in the same thread. Sender PID (-p) and signal set (-s)
 * filters run at entry (or at signal_generate), failed only (-x) at the end. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "killcalls.bpf.h"
#include "tp_btf_raw.bpf.h"

const volatile bool kill_only = false;

static __always_inline int generated(int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
				     int result)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct signal_event *e;

	if (kill_only) {
		/* The target of a kill/tkill/tgkill call in flight in this thread: its name. */
		e = killcall_in_flight();
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
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->tpid = BPF_CORE_READ(task, pid);
	e->tgid = BPF_CORE_READ(task, tgid);
	e->sig = sig;
	e->ret = result;
	/* SEND_SIG_NOINFO (0) and SEND_SIG_PRIV (1) stand for no siginfo. */
	if ((unsigned long)info > 1)
		e->code = BPF_CORE_READ(info, si_code);
	e->source = SIGNAL_SRC_GENERATE;
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
	struct signal_event *e;

	if (kill_only) {
		e = killcall_in_flight();
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
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->tpid = ctx->pid;
	e->tgid = -1;	/* the classic tracepoint does not carry it */
	e->sig = ctx->sig;
	e->ret = ctx->result;
	e->code = ctx->code;
	e->source = SIGNAL_SRC_GENERATE;
	e->group = ctx->group != 0;
	e->has_tcomm = 1;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_probe_read_kernel_str(e->tcomm, sizeof(e->tcomm), ctx->comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
