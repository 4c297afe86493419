// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* mountsnoop: one record per mount, umount, fsopen, fsconfig, fsmount or move_mount call, from the syscalls
 * tracepoints (those the kernel has: the new mount API came in 5.2).
 *
 * At sys_enter the call's argument words (as many as it has) are kept per thread (after the PID filter); at
 * sys_exit the strings they point to are read (the kernel has just copied them, so their pages are in memory), the
 * caller's mount namespace (and with -P its parent, as BCC's -P shows it) is read from its task, and the record goes out through a ring buffer. The entry and
 * exit contexts are the plain structs of syscall_tp.bpf.h; only the mount namespace is read with CO-RE. Failed reservations are
 * counted in `lost`, calls not followed because the in-flight map was full in `inflight_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "mountsnoop.h"

#define MAX_INFLIGHT 10240

/* -P: the record names the caller's parent process too. */
const volatile bool parent_process = false;

__u64 lost = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct call {
	__u64 ts_ns;
	__u64 op;
	unsigned long args[5];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} events SEC(".maps");

/* Keeps the first `nargs` argument words of the call (a constant): the kernel refuses to attach a program that
 * reads past the tracepoint's own arguments (umount's context has two). */
static __always_inline int enter(struct syscall_enter_ctx *ctx, __u32 op, int nargs)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call c = {};

	if (!tgid_wanted(id >> 32))
		return 0;
	c.ts_ns = bpf_ktime_get_ns();
	c.op = op;
	c.args[0] = ctx->args[0];
	c.args[1] = ctx->args[1];
	if (nargs > 2)
		c.args[2] = ctx->args[2];
	if (nargs > 4) {
		c.args[3] = ctx->args[3];
		c.args[4] = ctx->args[4];
	}
	if (bpf_map_update_elem(&inflight, &tid, &c, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

static __always_inline void read_str(char *dst, __u32 size, unsigned long src)
{
	/* A NULL or unreadable pointer leaves dst empty (the helper zeroes it on failure). */
	bpf_probe_read_user_str(dst, size, (const void *)src);
}

static __always_inline int leave(struct syscall_exit_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct task_struct *task;
	struct call *c;
	struct event *e;

	c = bpf_map_lookup_elem(&inflight, &tid);
	if (!c)
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		goto out;
	task = (struct task_struct *)bpf_get_current_task();
	e->delta_ns = bpf_ktime_get_ns() - c->ts_ns;
	e->flags = 0;
	e->pid = id >> 32;
	e->tid = tid;
	e->mnt_ns = BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum);
	e->ret = ctx->ret;
	e->op = c->op;
	e->fd = 0;
	e->fd2 = 0;
	e->aux = 0;
	e->attr_flags = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->ppid = 0;
	e->pcomm[0] = 0;
	if (parent_process) {
		struct task_struct *parent = BPF_CORE_READ(task, real_parent);

		e->ppid = BPF_CORE_READ(parent, tgid);
		BPF_CORE_READ_STR_INTO(&e->pcomm, parent, comm);
	}
	e->fs[0] = 0;
	e->data[0] = 0;
	e->src[0] = 0;
	e->dest[0] = 0;
	switch (c->op) {
	case OP_MOUNT:
		read_str(e->src, sizeof(e->src), c->args[0]);
		read_str(e->dest, sizeof(e->dest), c->args[1]);
		read_str(e->fs, sizeof(e->fs), c->args[2]);
		e->flags = c->args[3];
		read_str(e->data, sizeof(e->data), c->args[4]);
		break;
	case OP_UMOUNT:
		read_str(e->dest, sizeof(e->dest), c->args[0]);
		e->flags = c->args[1];
		break;
	case OP_FSOPEN:
		read_str(e->fs, sizeof(e->fs), c->args[0]);
		e->flags = (__u32)c->args[1];
		break;
	case OP_FSCONFIG:
		e->fd = (__s32)c->args[0];
		e->flags = (__u32)c->args[1];
		read_str(e->fs, sizeof(e->fs), c->args[2]);
		if (e->flags == FSCONFIG_SET_STRING_CMD || e->flags == FSCONFIG_SET_PATH_CMD ||
		    e->flags == FSCONFIG_SET_PATH_EMPTY_CMD)
			read_str(e->data, sizeof(e->data), c->args[3]);
		e->aux = (__s32)c->args[4];
		break;
	case OP_FSMOUNT:
		e->fd = (__s32)c->args[0];
		e->flags = (__u32)c->args[1];
		e->attr_flags = (__u32)c->args[2];
		break;
	case OP_MOVE_MOUNT:
		e->fd = (__s32)c->args[0];
		read_str(e->src, sizeof(e->src), c->args[1]);
		e->fd2 = (__s32)c->args[2];
		read_str(e->dest, sizeof(e->dest), c->args[3]);
		e->flags = (__u32)c->args[4];
		break;
	}
	bpf_ringbuf_submit(e, 0);
out:
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mount")
int mount_enter(struct syscall_enter_ctx *ctx)
{
	return enter(ctx, OP_MOUNT, 5);
}

SEC("tracepoint/syscalls/sys_enter_umount")
int umount_enter(struct syscall_enter_ctx *ctx)
{
	return enter(ctx, OP_UMOUNT, 2);
}

SEC("tracepoint/syscalls/sys_enter_fsopen")
int fsopen_enter(struct syscall_enter_ctx *ctx)
{
	return enter(ctx, OP_FSOPEN, 2);
}

SEC("tracepoint/syscalls/sys_enter_fsconfig")
int fsconfig_enter(struct syscall_enter_ctx *ctx)
{
	return enter(ctx, OP_FSCONFIG, 5);
}

SEC("tracepoint/syscalls/sys_enter_fsmount")
int fsmount_enter(struct syscall_enter_ctx *ctx)
{
	return enter(ctx, OP_FSMOUNT, 3);
}

SEC("tracepoint/syscalls/sys_enter_move_mount")
int move_mount_enter(struct syscall_enter_ctx *ctx)
{
	return enter(ctx, OP_MOVE_MOUNT, 5);
}

/* One exit program serves every call: the record says which call it was. */
SEC("tracepoint/syscalls/sys_exit_mount")
int mount_exit(struct syscall_exit_ctx *ctx)
{
	return leave(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
