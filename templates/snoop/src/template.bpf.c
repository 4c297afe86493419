// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* template: one record per chdir() call, at its return, through a ring buffer.
 *
 * The shape of an event tool ("snoop"): at sys_enter_chdir the directory's user pointer is kept per thread (after
 * the task filter of filter.bpf.h, read-only settings written before load: an unset filter costs nothing); at
 * sys_exit_chdir the path is read (the kernel has just copied it, so its page is in memory) and the record is sent.
 * The tracepoints' contexts are the plain structs of syscall_tp.bpf.h, so nothing relocates against kernel types.
 * A record the ring buffer has no room for is counted in `lost`, a call not followed because the in-flight map was
 * full in `inflight_full`: user space reports both (common::attach::events). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "template.h"

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, const char *);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_chdir")
int chdir_enter(struct syscall_enter_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	const char *path = (const char *)ctx->args[0];

	if (!current_ids_wanted(id))
		return 0;
	if (bpf_map_update_elem(&inflight, &tid, &path, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_chdir")
int chdir_exit(struct syscall_exit_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	const char **path;
	struct event *e;

	path = bpf_map_lookup_elem(&inflight, &tid);
	if (!path)
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (e) {
		e->ts_ns = bpf_ktime_get_ns();
		e->pid = id >> 32;
		e->tid = tid;
		e->ret = ctx->ret;
		e->_pad = 0;
		bpf_get_current_comm(&e->comm, sizeof(e->comm));
		if (bpf_probe_read_user_str(e->path, sizeof(e->path), *path) < 0)
			e->path[0] = 0;
		bpf_ringbuf_submit(e, 0);
	}
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
