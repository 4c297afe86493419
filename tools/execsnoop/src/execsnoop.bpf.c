// SPDX-License-Identifier: GPL-2.0
/* execsnoop: one record per exec, from the syscalls tracepoints of execve AND execveat (fexecve goes through
 * execveat, and BCC/libbpf-tools, tracing execve only, miss it).
 *
 * At sys_enter the file name and argv (up to max_args, each up to ARGSIZE bytes) are copied into a per-thread
 * entry; at sys_exit of the same thread the return value and the comm (the new program's, after a successful
 * exec) are added and the record goes out through a ring buffer, cut after the last argument. The exit of an exec
 * always runs in the calling thread, so a process that exits at once is never missed. UID, parent PID and cgroup
 * filters run at entry; failed execs are dropped at exit unless -x. Failed reservations are counted in `lost`,
 * execs not tracked because the in-flight map was full in `inflight_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "syscall_tp.bpf.h"
#include "execsnoop.h"

#define MAX_INFLIGHT 10240

const volatile __u32 max_args = 20;
CGROUP_FILTER;
const volatile bool fails = false;

__u64 lost = 0;
__u64 inflight_full = 0;

/* A zeroed entry to insert, which also makes struct event visible to the skeleton's generated `types`. */
const struct event empty_event = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__uint(map_flags, BPF_F_NO_PREALLOC);	/* ~7.7 KiB a value: allocate only for execs in flight */
	__type(key, __u32);
	__type(value, struct event);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline int enter(const char *filename, const char *const *argv, bool at)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u32 uid = (__u32)bpf_get_current_uid_gid();
	struct task_struct *task;
	struct event *e;
	const char *argp;
	__u32 ppid;
	long ret;
	int i;

	if (!uid_wanted(uid))
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	ppid = BPF_CORE_READ(task, real_parent, tgid);
	if (!id_wanted(target_ppid, ppid))
		return 0;
	if (!cgroup_wanted())
		return 0;

	if (bpf_map_update_elem(&execs, &tid, &empty_event, BPF_ANY)) {
		__sync_fetch_and_add(&inflight_full, 1);
		return 0;
	}
	e = bpf_map_lookup_elem(&execs, &tid);
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->ppid = ppid;
	e->uid = uid;
	e->execveat = at;
	BPF_CORE_READ_STR_INTO(&e->pcomm, task, real_parent, comm);

	/* Best effort here: a page of the caller's not yet in memory cannot be read from a tracepoint. A successful
	 * exec's argv is read again, completely, at its exit. */
	bpf_probe_read_user_str(e->filename, sizeof(e->filename), filename);
	for (i = 0; i < TOTAL_MAX_ARGS; i++) {
		__u32 off = e->args_size;

		if (i >= max_args)
			break;
		if (bpf_probe_read_user(&argp, sizeof(argp), &argv[i]) || !argp)
			return 0;
		if (off > ARGS_BUF - ARGSIZE)
			return 0;
		ret = bpf_probe_read_user_str(&e->args[off], ARGSIZE, argp);
		if (ret < 0)
			return 0;
		e->args_size += ret;
	}
	/* One more non-NULL pointer: there were more arguments than shown. */
	if (!bpf_probe_read_user(&argp, sizeof(argp), &argv[max_args]) && argp)
		e->truncated = 1;
	return 0;
}

static __always_inline int leave(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct event *e;
	__u64 len;

	e = bpf_map_lookup_elem(&execs, &tid);
	if (!e)
		return 0;
	if (ret && !fails)
		goto out;
	e->retval = ret;
	if (!ret) {
		/* The new program's argv, as the kernel copied it onto its stack: always in memory. */
		struct mm_struct *mm = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm);
		__u64 start = BPF_CORE_READ(mm, arg_start);
		__u64 size = BPF_CORE_READ(mm, arg_end) - start;

		if (size > ARGS_BUF - 1)
			size = ARGS_BUF - 1;
		size &= ARGS_BUF - 1;
		if (size && !bpf_probe_read_user(e->args, size, (void *)start)) {
			e->args_size = size;
			e->truncated = 0;
		}
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	len = __builtin_offsetof(struct event, args) + (__u64)e->args_size;
	if (len > sizeof(*e))
		len = sizeof(*e);
	if (bpf_ringbuf_output(&events, e, len, 0))
		__sync_fetch_and_add(&lost, 1);
out:
	bpf_map_delete_elem(&execs, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_execve")
int execve_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[0], (const char *const *)ctx->args[1], false);
}

SEC("tracepoint/syscalls/sys_enter_execveat")
int execveat_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[1], (const char *const *)ctx->args[2], true);
}

SEC("tracepoint/syscalls/sys_exit_execve")
int execve_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_execveat")
int execveat_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret);
}

char LICENSE[] SEC("license") = "GPL";
