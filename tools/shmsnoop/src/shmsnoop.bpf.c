// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* shmsnoop: one record per shmget, shmat, shmdt and shmctl call, from the syscalls tracepoints.
 *
 * At sys_enter the call's three argument words are kept per thread (after the PID and TID filters of
 * filter.bpf.h); at sys_exit the return value completes the record, failed-only (-x) is decided and the record
 * goes out through a ring buffer. The contexts are syscall_tp.bpf.h's plain structs, so nothing relocates against
 * kernel types. A reservation that fails is counted in `lost`, a call not followed because the in-flight map was
 * full in `inflight_full`; user space reports both. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "shmsnoop.h"

#define MAX_INFLIGHT 10240

const volatile bool failed_only = false;

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct call {
	__u64 args[3];
	__u32 sys;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* The arguments are passed read: a program may read no further into the context than its tracepoint's record
 * goes (shmdt's has one argument), or the kernel refuses to attach it. */
static __always_inline int enter(__u32 sys, __u64 a0, __u64 a1, __u64 a2)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call c = {};

	if (!current_ids_wanted(id))
		return 0;
	c.args[0] = a0;
	c.args[1] = a1;
	c.args[2] = a2;
	c.sys = sys;
	if (bpf_map_update_elem(&inflight, &tid, &c, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

static __always_inline int leave(struct syscall_exit_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call *c;
	struct event *e;
	long ret = ctx->ret;

	c = bpf_map_lookup_elem(&inflight, &tid);
	if (!c)
		return 0;
	if (failed_only && ret >= 0)
		goto out;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		goto out;
	e->ts_ns = bpf_ktime_get_ns();
	e->args[0] = c->args[0];
	e->args[1] = c->args[1];
	e->args[2] = c->args[2];
	e->ret = ret;
	e->pid = id >> 32;
	e->tid = tid;
	e->sys = c->sys;
	e->_pad = 0;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
out:
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_shmget")
int shmget_enter(struct syscall_enter_ctx *ctx)
{
	return enter(SYS_SHMGET, ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_shmat")
int shmat_enter(struct syscall_enter_ctx *ctx)
{
	return enter(SYS_SHMAT, ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_shmdt")
int shmdt_enter(struct syscall_enter_ctx *ctx)
{
	return enter(SYS_SHMDT, ctx->args[0], 0, 0);
}

SEC("tracepoint/syscalls/sys_enter_shmctl")
int shmctl_enter(struct syscall_enter_ctx *ctx)
{
	return enter(SYS_SHMCTL, ctx->args[0], ctx->args[1], ctx->args[2]);
}

/* One exit program serves the four calls: the in-flight record says which call it was. */
SEC("tracepoint/syscalls/sys_exit_shmget")
int shm_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
