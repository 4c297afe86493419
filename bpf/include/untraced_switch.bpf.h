// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Switches sched_switch does not report, and how the scheduler tools still time them.
 *
 * The kernel does not emit sched_switch for every context switch on every host: on one (a sandboxed 6.18 VM) it
 * never did when a thread of its supervisor (PID 1) was switched out, so the task switched in after one came on a CPU
 * unseen by every tracer, ftrace's own buffer included. A tool that times from a task's switch-in (cpudist's
 * slices, offcputime's blocks) then finds the task's state wrong at its next switch-out: no switch-in stamp, or the
 * stamp of a block that should have ended. The scheduler itself knows when it last picked the task: for the fair
 * class, se.prev_sum_exec_runtime is set to se.sum_exec_runtime when the task is picked, so their difference at
 * switch-out is the task's run time since it came on (rq_clock_task time: interrupt time, where accounted, is left
 * out, so a time derived from it is off by that much). ran_since_picked() reads it; 0 for the other classes, which
 * do not keep it. runs_so_far() reads the kernel's count of a task's switch-ins, which tells whether one went unreported
 * between two events. */
#ifndef __COREBPF_UNTRACED_SWITCH_BPF_H
#define __COREBPF_UNTRACED_SWITCH_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_core_read.h>
#include "tp_btf_raw.bpf.h"

/* SCHED_NORMAL, SCHED_BATCH and SCHED_IDLE: the policies of the fair class (include/uapi/linux/sched.h). */
#define UNTRACED_FAIR_POLICY(p) ((p) == 0 || (p) == 3 || (p) == 5)

/* How long `t`, being switched out (sched_switch's prev), has run since the scheduler last picked it, in ns; 0 if
 * that is not known (a task outside the fair class). */
static __always_inline __u64 ran_since_picked(struct task_struct *t)
{
	__u64 sum = TP_READ(t, se.sum_exec_runtime), since = TP_READ(t, se.prev_sum_exec_runtime);
	__u32 policy = TP_READ(t, policy);

	if (!UNTRACED_FAIR_POLICY(policy) || sum <= since)
		return 0;
	return sum - since;
}

/* runs_so_far()'s value on a kernel without CONFIG_SCHED_INFO (no sched_info in task_struct). */
#define UNTRACED_NO_RUNS ((__u64)-1)

/* How many times the scheduler has switched `t` in (sched_info.pcount, counted at every context switch whether
 * sched_switch reports it or not; not yet for a switch whose sched_switch is running now), or UNTRACED_NO_RUNS. */
static __always_inline __u64 runs_so_far(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->sched_info))
		return UNTRACED_NO_RUNS;
	return TP_READ(t, sched_info.pcount);
}

#endif
