// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* execsnoop: one record per exec, from the syscalls tracepoints of execve AND execveat (fexecve goes through
 * execveat, and BCC/libbpf-tools, tracing execve only, miss it).
 *
 * At sys_enter the file name and argv (up to max_args, each up to ARGSIZE bytes) are copied from the caller into
 * a per-thread entry: the argv the caller passed, as BCC, libbpf-tools and bpftrace show it (not the one the
 * kernel rewrites for a script's interpreter, "/bin/sh -e ./s.sh ..."). At sys_exit of the same thread the return
 * value and the comm (the new program's, after a successful exec) are added and the record goes out through a
 * ring buffer, cut after the last argument. The exit of an exec always runs in the calling thread, so a process
 * that exits at once is never missed. A thread other than the main one that execs takes the main thread's ID on
 * the way (de_thread()): sched_process_exec, which says both IDs, moves its entry to the new one, so its exit
 * finds it (BCC and libbpf-tools miss such execs). UID, parent PID and cgroup filters run at entry; failed execs are dropped
 * at exit unless -x. Failed reservations are counted in `lost`, execs not tracked because the in-flight map was
 * full in `inflight_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "execsnoop.h"

_Static_assert(MAX_ARGC > TOTAL_MAX_ARGS, "a count that reaches MAX_ARGC must exceed every --max-args");

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

	/* The caller's file name and argv strings. A page of them that is not in memory cannot be read from a
	 * tracepoint: common for a string literal just after fork (file pages are mapped on first touch). Then
	 * the exit of a successful exec reads them from the new program's memory (see leave()). */
	if (bpf_probe_read_user_str(e->filename, sizeof(e->filename), filename) < 0)
		e->filename_unread = 1;
	for (i = 0; i < TOTAL_MAX_ARGS; i++) {
		__u32 off = e->args_size;

		if (i >= max_args)
			break;
		if (bpf_probe_read_user(&argp, sizeof(argp), &argv[i]) || !argp)
			break;
		if (off > ARGS_BUF - ARGSIZE) {
			e->args_unread = 1;
			break;
		}
		ret = bpf_probe_read_user_str(&e->args[off], ARGSIZE, argp);
		if (ret < 0) {
			e->args_unread = 1;
			break;
		}
		e->args_size += ret;
	}
	/* The pointers alone (an array on the caller's stack or heap, in memory): how many arguments were given. */
	e->argc = ARGC_UNKNOWN;
	for (i = 0; i < MAX_ARGC; i++) {
		if (bpf_probe_read_user(&argp, sizeof(argp), &argv[i]))
			break;
		if (!argp) {
			e->argc = i;
			break;
		}
	}
	/* Counted to the end: more than max_args were given with argc unknown, so the list is cut too. */
	e->truncated = e->argc != ARGC_UNKNOWN ? e->argc > max_args : i >= MAX_ARGC;
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
	if (!ret && (e->filename_unread || e->args_unread)) {
		/* What entry could not read, from the new program's memory, where the kernel has just copied it: the
		 * file name executed (AT_EXECFN, right after the environment), and its argv, which for a script
		 * starts with the interpreter's arguments; user space keeps the caller's (the last argc - 1). */
		struct mm_struct *mm = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm);
		__u64 start = BPF_CORE_READ(mm, arg_start);
		__u64 size = BPF_CORE_READ(mm, arg_end) - start;
		__u64 image_argc = 0;

		/* (For execveat it would be "/dev/fd/N[/path]", not the caller's: argv[0] stands in instead.) */
		if (e->filename_unread && !e->execveat)
			bpf_probe_read_user_str(e->filename, sizeof(e->filename), (void *)BPF_CORE_READ(mm, env_end));
		if (e->args_unread) {
			if (size > ARGS_BUF - 1)
				size = ARGS_BUF - 1;
			size &= ARGS_BUF - 1;
			bpf_probe_read_user(&image_argc, sizeof(image_argc), (void *)BPF_CORE_READ(mm, start_stack));
			if (size && !bpf_probe_read_user(e->args, size, (void *)start)) {
				e->args_size = size;
				e->image_argc = image_argc;
				e->from_image = 1;
			}
		}
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	len = __builtin_offsetof(struct event, args) + (__u64)e->args_size;
	if (len > sizeof(*e))
		len = sizeof(*e);
	ringbuf_output(&events, e, len, &lost);
out:
	bpf_map_delete_elem(&execs, &tid);
	return 0;
}

/* A successful exec by thread old_pid, which is now the process's only thread, under the process's ID (pid):
 * its entry moves with it. Each exec runs this once; an exec by the main thread has nothing to move. */
SEC("tracepoint/sched/sched_process_exec")
int exec_rekey(struct trace_event_raw_sched_process_exec *ctx)
{
	__u32 pid = ctx->pid, old = ctx->old_pid;
	struct event *e;

	if (pid == old)
		return 0;
	e = bpf_map_lookup_elem(&execs, &old);
	if (!e)
		return 0;
	if (bpf_map_update_elem(&execs, &pid, e, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	bpf_map_delete_elem(&execs, &old);
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

char LICENSE[] SEC("license") = "Dual BSD/GPL";
