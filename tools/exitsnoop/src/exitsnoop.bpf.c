// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* exitsnoop: one record per process exit, from sched:sched_process_exit (tp_btf, else raw_tp, else the classic
 * tracepoint), which runs in the exiting task once do_exit() has set task->exit_code.
 *
 * Unless --per-thread, a process is a record when its last thread exits, whichever thread that is: do_exit() has
 * already taken the thread off signal->live when the tracepoint fires, so the count is 0 for the last one. The
 * record is the process's: its main thread's comm, parent and start (its age), and the status its parent's wait()
 * gets, the group exit's code if the process ended with exit_group() or a fatal signal, else the main thread's own
 * exit code. BCC reports a process when its main thread ends instead, so a main thread that calls pthread_exit()
 * while others run on reads there as the process ending with code 0. The PID (-p), cgroup and failed-only (-x: a
 * non-zero exit code) filters run here; failed reservations are counted in `lost`.
 *
 * The count read here is not the decrement's own result: a thread that left signal->live before the last one
 * reaches the tracepoint after it can read 0 too. Each such record carries the process's PID, its main thread's
 * start and (as its TID) the PID, so user space keeps the first of them (report.rs, `Processes`). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "exitsnoop.h"

CGROUP_FILTER;
const volatile bool per_thread = false;
const volatile bool failed_only = false;

__u64 lost = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* signal_struct.flags: the process is ending as a whole (exit_group(), a fatal signal); the same value in every
 * kernel since 2.6. */
#define EXITSNOOP_SIGNAL_GROUP_EXIT 0x4

static __always_inline int on_exit(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct task_struct *who = task;
	__u32 code;
	struct event *e;

	if (!tgid_wanted(tgid))
		return 0;
	if (per_thread) {
		code = BPF_CORE_READ(task, exit_code);
	} else {
		struct signal_struct *sig = BPF_CORE_READ(task, signal);

		if (BPF_CORE_READ(sig, live.counter) != 0)
			return 0;
		who = BPF_CORE_READ(task, group_leader);
		code = BPF_CORE_READ(sig, flags) & EXITSNOOP_SIGNAL_GROUP_EXIT ? BPF_CORE_READ(sig, group_exit_code)
										 : BPF_CORE_READ(who, exit_code);
	}
	if (failed_only && code == 0)
		return 0;
	if (!cgroup_wanted())
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->start_ns = BPF_CORE_READ(who, start_time);
	e->exit_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = tgid;
	e->tid = per_thread ? tid : tgid;
	e->ppid = BPF_CORE_READ(who, real_parent, tgid);
	e->exit_code = code;
	e->cpu = bpf_get_smp_processor_id();
	e->_pad = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, who, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BTF_RAW(sched_process_exit, sched_process_exit)
{
	return on_exit();
}

SEC("tracepoint/sched/sched_process_exit")
int sched_process_exit_tp(void *ctx)
{
	return on_exit();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
