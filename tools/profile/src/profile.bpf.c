// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* profile: sample stacks on every CPU at a timed interval and count them in the kernel.
 *
 * User space opens one sampling perf event per CPU and attaches do_perf_event to each. Every sample looks up the
 * current task's user and kernel stacks in a stack-trace map and adds one to a count per (process, command name,
 * user stack, kernel stack); only the unique stacks and their counts reach user space, at the end. Idle (thread 0)
 * is skipped unless include_idle; -p/-L, --cgroup and BCC's --cgroupmap/--mntnsmap filter before anything is
 * counted. The first sample of each process is reported on a ring buffer so user space
 * can save its memory maps while it lives. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "containers.bpf.h"
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "stacks.bpf.h"
#include "profile.h"

const volatile bool user_stacks_only = false;
const volatile bool kernel_stacks_only = false;
const volatile bool include_idle = false;
/* --cgroup PATH: only tasks in that cgroup v2 directory or below it. */
CGROUP_FILTER;
/* --cgroupmap / --mntnsmap: only tasks whose cgroup id / mount namespace id is a key of BCC's pinned map. */
CONTAINER_FILTER;

/* Samples not counted because the counts map was full. */
__u64 lost_samples = 0;
/* New processes that could not be reported to user space (ring buffer full). */
__u64 lost_notices = 0;

/* -p and -L: the PIDs / TIDs to sample (filter.bpf.h). */
ID_SETS_FILTER;

STACK_TRACE_MAP(stackmap);
PROCESS_NOTICE_MAPS(seen_pids, new_pids);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct stack_key);
	__type(value, __u64);
	__uint(max_entries, 40960);
} counts SEC(".maps");

/* Makes the key type visible to the skeleton's generated `types` module. */
struct stack_key _stack_key_type = {};

/* BCC's container_should_be_filtered(): true if the current task's cgroup or mount namespace is not wanted. */
static __always_inline bool container_filtered(void)
{
	return !cgroup_wanted() || !container_wanted();
}

SEC("perf_event")
int do_perf_event(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct stack_key key = {};

	if (!include_idle && tid == 0)
		return 0;
	if (!ids_in_sets(tgid, tid))
		return 0;
	if (container_filtered())
		return 0;

	key.pid = tgid;
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	key.user_stack_id = kernel_stacks_only ? -1 : bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
	key.kern_stack_id = user_stacks_only ? -1 : bpf_get_stackid(ctx, &stackmap, 0);

	if (key.user_stack_id >= 0)
		notice_process(&seen_pids, &new_pids, tgid, &lost_notices);

	counter_inc(&counts, &key, &lost_samples);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
