// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* syscount: syscall counts, and with -L their total time, per syscall or per process (-P).
 *
 * raw_syscalls sys_exit counts each call once it returns (so -x/-e see its return value); with -L, sys_enter
 * keeps the entry time per thread (removed at sched_process_exit). They are attached as tp_btf where the kernel allows it, else as raw_tp; user
 * space loads one pair. Every filter (PID, TID, parent PID, cgroup, syscall, failed, errno) is applied here, set
 * before loading (rodata) or, for the cgroup, filled in before attaching. Counts are cumulative and never cleared,
 * so reading them at an interval loses no call: per syscall in a per-CPU array (no atomics on the hot path), per
 * process in a hash map whose exited processes user space removes after their last report. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "arch.bpf.h"
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "maps.bpf.h"
#include "syscount.h"

CGROUP_FILTER;
const volatile bool filter_syscall = false;
const volatile __u32 target_syscall = 0;
const volatile bool filter_failed = false;
const volatile __s32 filter_errno = 0;
const volatile bool by_process = false;
const volatile bool latency = false;
/* The numbers of execve and execveat on this architecture (-1: none), set by user space: with -P, a process's
 * name is taken again after a successful exec. */
const volatile long execve_nr = -1;
const volatile long execveat_nr = -1;

/* Calls not counted because the -P map was full. */
__u64 proc_map_full = 0;
/* Calls not timed (-L) because the start map was full. */
__u64 start_map_full = 0;
/* Calls with a number beyond SYSCALL_SLOTS. */
__u64 out_of_range = 0;
/* 32-bit (compat) calls: their numbers belong to another table. */
__u64 compat_calls = 0;

/* Entry time per thread (-L only); entries are allocated as threads enter syscalls, not up front. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_IN_FLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, struct sys_stat);
} syscalls SEC(".maps");

/* Sized to 1 unless -P (user space sets MAX_PROCESSES then). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct proc_stat);
} processes SEC(".maps");

/* Makes the struct types visible to the skeleton's generated `types` module. */
struct sys_stat _sys_stat_type = {};
struct proc_stat _proc_stat_type = {};

/* x86's TS_COMPAT: the task is in a 32-bit system call. */
#define TS_COMPAT_BIT 0x0002

static __always_inline bool in_compat_syscall(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	if (bpf_core_field_exists(struct task_struct, thread_info.status) &&
	    (CURRENT_READ(thread_info.status) & TS_COMPAT_BIT))
		return true;
	return false;
#else
	/* arm64: an AArch32 task (arch.bpf.h). */
	return compat_regs(regs);
#endif
}

/* The PID, TID, parent and cgroup filters. */
static __always_inline bool wanted_task(__u64 pid_tgid)
{
	if (!current_ids_wanted(pid_tgid))
		return false;
	if (!current_ppid_wanted())
		return false;
	if (!cgroup_wanted())
		return false;
	return true;
}

static __always_inline int on_enter(long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = pid_tgid;
	__u64 ts, *slot;

	if (id < 0 || (filter_syscall && id != target_syscall) || !wanted_task(pid_tgid))
		return 0;
	ts = bpf_ktime_get_ns();
	/* The thread's entry is reused from call to call (no allocation on the hot path) and removed when the thread
	 * exits (sched_process_exit), so calls that never return (exit, a thread killed in a call) leave nothing. */
	slot = bpf_map_lookup_elem(&start, &tid);
	if (slot)
		*slot = ts;
	else if (bpf_map_update_elem(&start, &tid, &ts, BPF_ANY))
		__sync_fetch_and_add(&start_map_full, 1);
	return 0;
}

static __always_inline int on_exit(struct pt_regs *regs, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = pid_tgid, key;
	__u64 lat = 0, *ts;
	long id;

	if (!wanted_task(pid_tgid))
		return 0;
	id = tp_syscall_nr(regs);
	/* -1: not a syscall (the exit of a signal delivered on return, say). */
	if (id < 0 || (filter_syscall && id != target_syscall))
		return 0;
	if (latency) {
		ts = bpf_map_lookup_elem(&start, &tid);
		if (!ts || !*ts)
			return 0; /* entered before tracing began, or not timed */
		lat = bpf_ktime_get_ns() - *ts;
		*ts = 0;
	}
	if (filter_failed && ret >= 0)
		return 0;
	if (filter_errno && ret != -filter_errno)
		return 0;
	if (in_compat_syscall(regs)) {
		__sync_fetch_and_add(&compat_calls, 1);
		return 0;
	}

	if (by_process) {
		struct proc_stat *val;

		key = pid_tgid >> 32;
		val = bpf_map_lookup_elem(&processes, &key);
		if (!val) {
			struct proc_stat init = {};
			struct task_struct *task = (struct task_struct *)bpf_get_current_task();

			BPF_CORE_READ_STR_INTO(&init.comm, task, group_leader, comm);
			val = bpf_map_lookup_or_try_init(&processes, &key, &init);
			if (!val) {
				__sync_fetch_and_add(&proc_map_full, 1);
				return 0;
			}
		}
		/* A forked child makes its first calls under its parent's name: after its exec it has its own. */
		if (ret == 0 && (id == execve_nr || id == execveat_nr))
			bpf_get_current_comm(&val->comm, sizeof(val->comm));
		__sync_fetch_and_add(&val->count, 1);
		if (latency)
			__sync_fetch_and_add(&val->total_ns, lat);
	} else {
		struct sys_stat *val;

		if (id >= SYSCALL_SLOTS) {
			__sync_fetch_and_add(&out_of_range, 1);
			return 0;
		}
		key = id;
		val = bpf_map_lookup_elem(&syscalls, &key);
		if (!val)
			return 0;
		val->count++;
		val->total_ns += lat;
	}
	return 0;
}

TP_BTF_RAW(sys_enter, sys_enter, struct pt_regs *regs, long id)
{
	return on_enter(id);
}

TP_BTF_RAW(sys_exit, sys_exit, struct pt_regs *regs, long ret)
{
	return on_exit(regs, ret);
}

/* -L: a thread's entry time goes with the thread (it runs this in its own context as it exits). */
static __always_inline int on_thread_exit(void)
{
	__u32 tid = bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&start, &tid);
	return 0;
}

TP_BTF_RAW(thread_exit, sched_process_exit)
{
	return on_thread_exit();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
