// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* capable: one record per capability check the kernel makes (cap_capable()), with its verdict.
 *
 * Three ways in, one body (report()):
 *  - fexit on cap_capable (the fentry step of the ladder): the check's arguments, its options and its result;
 *  - tp_btf / raw_tp on the capability:cap_capable tracepoint (6.14+, fired at the end of cap_capable() with the
 *    credentials, namespaces, capability and result): the tracepoint has no options argument, so they are read
 *    from the innermost capability API function in the kernel stack (`callers`, which user space fills from
 *    /proc/kallsyms);
 *  - kprobe + kretprobe on cap_capable, the arguments kept per thread from entry to return.
 * Filters (-p, --cgroupmap/--mntnsmap, the tool's own PID, audit unless -v) run before anything is recorded. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "containers.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "stacks.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "capable.h"

/* -v: non-audit checks too. */
const volatile bool verbose = false;
const volatile bool kernel_stack = false;
const volatile bool user_stack = false;
const volatile __u32 unique = UNIQUE_OFF;
/* The tool's own process, never reported (its own checks would feed back). */
const volatile __u32 self_tgid = 0;
/* How many entries of `callers` user space filled. */
const volatile __u32 n_callers = 0;

CONTAINER_FILTER;

/* Records that did not fit in the ring buffer; --unique keys that did not fit in `seen`; kprobe entries with no
 * room to wait for their return. */
__u64 lost = 0;
__u64 seen_full = 0;
__u64 starts_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

STACK_TRACE_MAP(stacks);

/* The tracepoint path's classifiers, set by user space before load. */
const volatile struct caller_range callers[MAX_CALLERS] = {};

struct unique_key {
	__s32 cap;
	__u32 tgid;
	__u64 cgroup;
	__s32 kern_stack_id;
	__s32 user_stack_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SEEN);
	__type(key, struct unique_key);
	__type(value, __u8);
} seen SEC(".maps");

struct start_args {
	__s32 cap;
	__u32 opts;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, struct start_args);
} starts SEC(".maps");

/* Makes the record type visible to the skeleton's generated `types` module. */
struct event _event_type = {};

static __always_inline bool task_wanted(__u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;

	return tgid != self_tgid && tgid_wanted(tgid) && container_wanted();
}

/* True the first time (capability, process or cgroup, stacks) is seen: BCC's --unique. */
static __always_inline bool first_time(struct event *e)
{
	struct unique_key key = {};
	__u8 one = 1;

	key.cap = e->cap;
	if (unique == UNIQUE_CGROUP)
		key.cgroup = bpf_get_current_cgroup_id();
	else
		key.tgid = e->pid;
	key.kern_stack_id = e->kern_stack_id;
	key.user_stack_id = e->user_stack_id;
	if (bpf_map_lookup_elem(&seen, &key))
		return false;
	if (bpf_map_update_elem(&seen, &key, &one, BPF_NOEXIST)) {
		/* Another CPU inserted it first (-EEXIST), or the map is full: report it rather than lose it. */
		if (bpf_map_lookup_elem(&seen, &key))
			return false;
		__sync_fetch_and_add(&seen_full, 1);
	}
	return true;
}

/* `opts` < 0: unknown (no options known on this path). */
static __always_inline int report(void *ctx, __u64 pid_tgid, int cap, int ret, long opts)
{
	struct event *e;
	bool audit = opts < 0 || !(opts & CAP_OPT_NOAUDIT);

	if (!verbose && !audit)
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->cap = cap;
	e->ret = ret;
	e->audit = audit;
	e->insetid = opts < 0 ? -1 : !!(opts & CAP_OPT_INSETID);
	e->pad[0] = e->pad[1] = 0;
	e->kern_stack_id = kernel_stack ? bpf_get_stackid(ctx, &stacks, 0) : -1;
	e->user_stack_id = user_stack ? bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -1;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (unique != UNIQUE_OFF && !first_time(e)) {
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* The options of a check seen on the tracepoint: those of the innermost capability API function in the kernel
 * stack, or none (an audited check) if no listed function is there. */
static __always_inline long opts_from_stack(void *ctx)
{
	__u64 ips[SCAN_FRAMES];
	long bytes = bpf_get_stack(ctx, ips, sizeof(ips), 0);

	if (bytes <= 0)
		return 0;
	for (int i = 0; i < SCAN_FRAMES; i++) {
		if (i * sizeof(__u64) >= (__u64)bytes)
			break;
		for (__u32 j = 0; j < MAX_CALLERS; j++) {
			if (j >= n_callers)
				break;
			if (ips[i] >= callers[j].start && ips[i] < callers[j].end)
				return callers[j].opts;
		}
	}
	return 0;
}

TP_BTF_RAW(cap_capable_tp, cap_capable, const struct cred *cred, struct user_namespace *target_ns,
	   const struct user_namespace *capable_ns, int cap, int ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!task_wanted(pid_tgid))
		return 0;
	return report(ctx, pid_tgid, cap, ret, opts_from_stack(ctx));
}

SEC("fexit/cap_capable")
int BPF_PROG(cap_capable_fexit, const struct cred *cred, struct user_namespace *target_ns, int cap,
	     unsigned int opts, int ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (!task_wanted(pid_tgid))
		return 0;
	return report(ctx, pid_tgid, cap, ret, opts);
}

SEC("kprobe/cap_capable")
int BPF_KPROBE(cap_capable_entry, const struct cred *cred, struct user_namespace *target_ns, int cap,
	       unsigned int opts)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct start_args args = { .cap = cap, .opts = opts };

	if (!task_wanted(pid_tgid))
		return 0;
	if (bpf_map_update_elem(&starts, &pid_tgid, &args, BPF_ANY))
		__sync_fetch_and_add(&starts_full, 1);
	return 0;
}

SEC("kretprobe/cap_capable")
int BPF_KRETPROBE(cap_capable_return, int ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct start_args *args = bpf_map_lookup_elem(&starts, &pid_tgid);
	struct start_args copy;

	if (!args)
		return 0;
	copy = *args;
	bpf_map_delete_elem(&starts, &pid_tgid);
	return report(ctx, pid_tgid, copy.cap, ret, copy.opts);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
