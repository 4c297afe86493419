// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* opensnoop: one record per open, openat and openat2 call, from the syscalls tracepoints.
 *
 * At sys_enter the arguments are kept per thread (after the PID, TID, UID, cgroup and flag filters); at sys_exit
 * the path is read (the kernel has just copied it, so its page is in memory), failed-only (-x) is decided, and the
 * record goes out through a ring buffer, cut after what it uses. With -F and a relative path, the names of the
 * directories from the base (the working directory, or the file of dirfd) up to the task's root are read from the
 * dentry chain, crossing mount points, so that user space can print the full path (BCC's -F). Failed reservations
 * are counted in `lost`, calls not tracked because the in-flight map was full in `inflight_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "fdsock.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "opensnoop.h"
#include "dentry_path.bpf.h"

#define MAX_INFLIGHT 10240
#define AT_FDCWD -100

CGROUP_FILTER;
/* The tool's own process: its opens while it sets up (tracefs files, say) are not shown. */
const volatile __u32 self_tgid = 0;
const volatile __u64 flag_mask = 0;
const volatile bool failed_only = false;

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct args {
	const char *path;
	__u64 flags;
	__u32 mode;
	__s32 dfd;
	__u8 call;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct args);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline int enter(const char *path, __u64 flags, __u32 mode, __s32 dfd, __u8 call)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct args a = {};

	if (!current_ids_wanted(id) || id >> 32 == self_tgid)
		return 0;
	if (!current_uid_wanted())
		return 0;
	if (flag_mask && !(flags & flag_mask))
		return 0;
	if (!cgroup_wanted())
		return 0;
	a.path = path;
	a.flags = flags;
	a.mode = mode;
	a.dfd = dfd;
	a.call = call;
	if (bpf_map_update_elem(&start, &tid, &a, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

/* -F: the directories above `base` (dentry_path.bpf.h). */
static __always_inline void walk(struct event *e, struct path *base)
{
	struct dentry_path walked = dentry_path_walk(e->dirs, base->dentry, base->mnt);

	e->depth = walked.depth;
	e->dirs_complete = walked.complete;
}

/* `full_path` is a constant in each program: the exits without -F carry no dentry walk, so libbpf resolves none
 * of its CO-RE relocations (a search of the kernel's BTF per type: most of the start-up) unless -F loads them. */
static __always_inline int leave(long ret, const bool full_path)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;
	struct args *a;
	struct event *e;
	__u64 len;

	a = bpf_map_lookup_elem(&start, &tid);
	if (!a)
		return 0;
	if (failed_only && ret >= 0)
		goto out;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		goto out;
	e->ts_ns = bpf_ktime_get_ns();
	e->flags = a->flags;
	e->pid = id >> 32;
	e->tid = tid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->ret = ret;
	e->mode = a->mode;
	e->call = a->call;
	e->depth = 0;
	e->dirs_complete = 0;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	if (bpf_probe_read_user_str(e->path, sizeof(e->path), a->path) < 0)
		e->path[0] = 0;
	if (full_path && e->path[0] != '/') {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		struct path base;

		if (a->dfd == AT_FDCWD) {
			BPF_CORE_READ_INTO(&base, task, fs, pwd);
			walk(e, &base);
		} else if (a->dfd >= 0) {
			struct file *f = fd_file(a->dfd);

			if (f) {
				BPF_CORE_READ_INTO(&base, f, f_path);
				walk(e, &base);
			}
		}
	}
	len = __builtin_offsetof(struct event, dirs) + (__u64)e->depth * COMPONENT_LEN;
	if (len > sizeof(*e))
		len = sizeof(*e);
	ringbuf_output(&events, e, len, &lost);
out:
	bpf_map_delete_elem(&start, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_open")
int open_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[0], ctx->args[1], ctx->args[2], AT_FDCWD, 0);
}

SEC("tracepoint/syscalls/sys_enter_openat")
int openat_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[1], ctx->args[2], ctx->args[3], (__s32)ctx->args[0], 1);
}

SEC("tracepoint/syscalls/sys_enter_openat2")
int openat2_enter(struct syscall_enter_ctx *ctx)
{
	struct open_how_abi how = {};

	bpf_probe_read_user(&how, sizeof(how), (void *)ctx->args[2]);
	return enter((const char *)ctx->args[1], how.flags, how.mode, (__s32)ctx->args[0], 2);
}

SEC("tracepoint/syscalls/sys_exit_open")
int open_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret, false);
}

SEC("tracepoint/syscalls/sys_exit_open")
int open_exit_full(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret, true);
}

SEC("tracepoint/syscalls/sys_exit_openat")
int openat_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret, false);
}

SEC("tracepoint/syscalls/sys_exit_openat")
int openat_exit_full(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret, true);
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int openat2_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret, false);
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int openat2_exit_full(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret, true);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
