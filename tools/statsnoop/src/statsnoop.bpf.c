// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* statsnoop: one record per stat-family call (statfs, stat, lstat, statx, fstatat, fstat), from the syscalls
 * tracepoints.
 *
 * At sys_enter the path pointer and the descriptor are kept per thread (after the PID filter); at sys_exit the path
 * is read (the kernel has just copied it, so its page is in memory), failed-only (-x) is decided, and the record
 * goes out through a ring buffer. The contexts are the plain structs of syscall_tp.bpf.h, so no program relocates
 * against kernel types. Failed reservations are counted in `lost`, calls not tracked because the in-flight map was
 * full in `inflight_full`; user space reports both. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "statsnoop.h"

#define MAX_INFLIGHT 10240
#define NO_FD -1

/* The tool's own process: its stats while it sets up (tracefs look-ups) are not shown. */
const volatile __u32 self_tgid = 0;
const volatile bool failed_only = false;

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct args {
	const char *path;
	__s32 fd;
	__u32 call;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct args);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline int enter(const char *path, __s32 fd, __u32 call)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct args a = {};

	if (!current_ids_wanted(id) || id >> 32 == self_tgid)
		return 0;
	a.path = path;
	a.fd = fd;
	a.call = call;
	if (bpf_map_update_elem(&start, &tid, &a, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

static __always_inline int leave(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct args *a;
	struct event *e;

	a = bpf_map_lookup_elem(&start, &tid);
	if (!a)
		return 0;
	if (failed_only && ret >= 0)
		goto out;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		goto out;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = tid;
	e->ret = ret;
	e->fd = a->fd;
	e->call = a->call;
	e->_pad = 0;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	e->path[0] = 0;
	if (a->path && bpf_probe_read_user_str(e->path, sizeof(e->path), a->path) < 0)
		e->path[0] = 0;
	bpf_ringbuf_submit(e, 0);
out:
	bpf_map_delete_elem(&start, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_statfs")
int statfs_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[0], NO_FD, CALL_STATFS);
}

SEC("tracepoint/syscalls/sys_enter_newstat")
int newstat_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[0], NO_FD, CALL_NEWSTAT);
}

SEC("tracepoint/syscalls/sys_enter_newlstat")
int newlstat_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[0], NO_FD, CALL_NEWLSTAT);
}

SEC("tracepoint/syscalls/sys_enter_statx")
int statx_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[1], (__s32)ctx->args[0], CALL_STATX);
}

SEC("tracepoint/syscalls/sys_enter_newfstatat")
int newfstatat_enter(struct syscall_enter_ctx *ctx)
{
	return enter((const char *)ctx->args[1], (__s32)ctx->args[0], CALL_NEWFSTATAT);
}

SEC("tracepoint/syscalls/sys_enter_newfstat")
int newfstat_enter(struct syscall_enter_ctx *ctx)
{
	return enter(NULL, (__s32)ctx->args[0], CALL_NEWFSTAT);
}

/* One exit program serves every call: the record's call comes from the entry. */
SEC("tracepoint/syscalls/sys_exit_statfs")
int stat_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx->ret);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
