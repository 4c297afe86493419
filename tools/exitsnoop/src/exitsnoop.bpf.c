// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* exitsnoop: one record per process exit, from sched:sched_process_exit (tp_btf, else raw_tp, else the classic
 * tracepoint), which runs in the exiting task once do_exit() has set task->exit_code.
 *
 * Unless --per-thread, only the exit of a process's main thread (pid == tgid) is a record, as BCC does: the
 * process's age is then its main thread's. The PID (-p), cgroup and failed-only (-x: a non-zero exit code) filters
 * run here; failed reservations are counted in `lost`. */
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

static __always_inline int on_exit(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u32 code;
	struct event *e;

	if (!per_thread && tgid != tid)
		return 0;
	if (!tgid_wanted(tgid))
		return 0;
	code = BPF_CORE_READ(task, exit_code);
	if (failed_only && code == 0)
		return 0;
	if (!cgroup_wanted())
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->start_ns = BPF_CORE_READ(task, start_time);
	e->exit_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->pid = tgid;
	e->tid = tid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->exit_code = code;
	e->cpu = bpf_get_smp_processor_id();
	e->_pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
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
