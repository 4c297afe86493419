// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* syncsnoop: one record per sync, fsync, fdatasync, msync, sync_file_range and syncfs call, at its entry, from the
 * syscalls tracepoints (read through the plain contexts of syscall_tp.bpf.h: no CO-RE relocation). The -p filter
 * is filter.bpf.h's target_tgid. Records go through a ring buffer; failed reservations are counted in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "syncsnoop.h"

__u64 lost = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline int record(__u32 call, __u64 arg0)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;

	if (!current_ids_wanted(id))
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->ts_ns = bpf_ktime_get_ns();
	e->arg0 = arg0;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->call = call;
	e->_pad = 0;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_sync")
int sync_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_SYNC, 0);
}

SEC("tracepoint/syscalls/sys_enter_fsync")
int fsync_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_FSYNC, ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_fdatasync")
int fdatasync_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_FDATASYNC, ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_msync")
int msync_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_MSYNC, ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_sync_file_range")
int sync_file_range_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_SYNC_FILE_RANGE, ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_syncfs")
int syncfs_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_SYNCFS, ctx->args[0]);
}

/* arm and powerpc's form, with the flags before the range. */
SEC("tracepoint/syscalls/sys_enter_sync_file_range2")
int sync_file_range2_enter(struct syscall_enter_ctx *ctx)
{
	return record(CALL_SYNC_FILE_RANGE2, ctx->args[0]);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
