// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The task filters every tool shares, in one convention: the process (-p, a TGID), the thread (-t/--tid, a TID)
 * and the parent process (--ppid, a TGID) are each one __u32 in .rodata, set by user space before load, and
 * 0 means off (no task but the idle one has ID 0). The user (-u) is the one exception, because UID 0 is root, a
 * real target: a flag, filter_uid, and the value, target_uid. A filter left off is a constant the verifier
 * removes, so the ones a tool does not use cost nothing but their bytes in .rodata.
 *
 * `CGROUP_FILTER;` declares the cgroup filter (-c/--cgroup, BCC's --cgroupmap path): filter_cgroup and the
 * one-slot cgroup array `cgroup_map` user space fills with the cgroup v2 directory before attaching
 * (common::domain::cgroup::set_filter); cgroup_wanted() is true when the current task is in that cgroup or below
 * it, or the filter is off. A macro, so that a tool without the flag has no map to create.
 *
 * `ID_SETS_FILTER;` declares -p and -t as lists (profile, offcputime, offwaketime): the hash sets `pids` and
 * `tids`, which user space sizes to the lists and fills before attaching (common::cli::filter::IdSets), and the
 * flags filter_by_pid and filter_by_tid; ids_in_sets(tgid, tid) is true when the task passes both. A set that is
 * off is a constant false, so it costs no lookup. */
#ifndef __COREBPF_FILTER_BPF_H
#define __COREBPF_FILTER_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

const volatile __u32 target_tgid = 0;
const volatile __u32 target_tid = 0;
const volatile __u32 target_ppid = 0;
const volatile bool filter_uid = false;
const volatile __u32 target_uid = 0;

/* True if `id` passes the filter `target` (0: off). */
static __always_inline bool id_wanted(__u32 target, __u32 id)
{
	return !target || id == target;
}

static __always_inline bool tgid_wanted(__u32 tgid)
{
	return id_wanted(target_tgid, tgid);
}

static __always_inline bool tid_wanted(__u32 tid)
{
	return id_wanted(target_tid, tid);
}

static __always_inline bool uid_wanted(__u32 uid)
{
	return !filter_uid || uid == target_uid;
}

/* The current task's parent process passes --ppid (the task is read only when the filter is on). */
static __always_inline bool current_ppid_wanted(void)
{
	struct task_struct *task;

	if (!target_ppid)
		return true;
	task = (struct task_struct *)bpf_get_current_task();
	return (__u32)BPF_CORE_READ(task, real_parent, tgid) == target_ppid;
}

/* The current task passes -p and -t (`pid_tgid` from bpf_get_current_pid_tgid()). */
static __always_inline bool current_ids_wanted(__u64 pid_tgid)
{
	return tgid_wanted(pid_tgid >> 32) && tid_wanted((__u32)pid_tgid);
}

/* The current task's user passes -u (the UID is read only when the filter is on). */
static __always_inline bool current_uid_wanted(void)
{
	return !filter_uid || (__u32)bpf_get_current_uid_gid() == target_uid;
}

#define CGROUP_FILTER                                                                                              \
	const volatile bool filter_cgroup = false;                                                                 \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);                                                           \
		__type(key, __u32);                                                                                \
		__type(value, __u32);                                                                              \
		__uint(max_entries, 1);                                                                            \
	} cgroup_map SEC(".maps")

#define ___ID_SET(name)                                                                                            \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                                   \
		__type(key, __u32);                                                                                \
		__type(value, __u8);                                                                               \
		__uint(max_entries, 1);                                                                            \
	} name SEC(".maps")

#define ID_SETS_FILTER                                                                                             \
	const volatile bool filter_by_pid = false;                                                                 \
	const volatile bool filter_by_tid = false;                                                                 \
	___ID_SET(pids);                                                                                           \
	___ID_SET(tids)

/* The task (`tgid`, `tid`) passes the ID_SETS_FILTER the tool declared. */
#define ids_in_sets(tgid, tid)                                                                                     \
	((!filter_by_pid || bpf_map_lookup_elem(&pids, &(__u32){ (tgid) })) &&                                    \
	 (!filter_by_tid || bpf_map_lookup_elem(&tids, &(__u32){ (tid) })))

/* The current task passes the CGROUP_FILTER the tool declared. */
#define cgroup_wanted() (!filter_cgroup || bpf_current_task_under_cgroup(&cgroup_map, 0))

#endif
