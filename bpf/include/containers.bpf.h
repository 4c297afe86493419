// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* BCC's container filters, --cgroupmap and --mntnsmap (bcc/containers.py), for any tool: the user pins a BPF
 * hash keyed by cgroup id (u64) or by mount namespace inode number (u64), and only tasks whose id is a key are
 * traced.
 *
 * `CONTAINER_FILTER;` declares two flags in .rodata (filter_cgroupmap, filter_mntnsmap) and two one-slot arrays
 * of maps, cgroupset and mount_ns_set. User space (common::domain::containers) makes the pinned map the inner-map
 * template and stores it in slot 0 before attaching, so entries the user adds or removes while the tool runs
 * count at once, as in BCC. container_wanted() is true when the current task passes both filters (or they are
 * off). A macro, so that a tool without the flags has no maps to create. */
#ifndef __COREBPF_CONTAINERS_BPF_H
#define __COREBPF_CONTAINERS_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct container_id_set {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, __u64);
	__uint(max_entries, 1);
};

#define CONTAINER_FILTER                                                                                           \
	const volatile bool filter_cgroupmap = false;                                                              \
	const volatile bool filter_mntnsmap = false;                                                               \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                                          \
		__uint(max_entries, 1);                                                                            \
		__type(key, __u32);                                                                                \
		__array(values, struct container_id_set);                                                          \
	} cgroupset SEC(".maps");                                                                                  \
	struct {                                                                                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                                          \
		__uint(max_entries, 1);                                                                            \
		__type(key, __u32);                                                                                \
		__array(values, struct container_id_set);                                                          \
	} mount_ns_set SEC(".maps")

/* True if `id` is a key of the pinned set in slot 0 of `outer`. */
static __always_inline bool in_pinned_set(void *outer, __u64 id)
{
	__u32 slot = 0;
	void *set = bpf_map_lookup_elem(outer, &slot);

	return set && bpf_map_lookup_elem(set, &id);
}

/* The current task passes the CONTAINER_FILTER the tool declared (BCC's container_should_be_filtered(), negated). */
#define container_wanted()                                                                                         \
	((!filter_cgroupmap || in_pinned_set(&cgroupset, bpf_get_current_cgroup_id())) &&                         \
	 (!filter_mntnsmap || in_pinned_set(&mount_ns_set, current_mnt_ns_id())))

/* The inode number of the current task's mount namespace, the key of --mntnsmap. */
static __always_inline __u64 current_mnt_ns_id(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum);
}

#endif
