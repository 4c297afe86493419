// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* One timer of file system operations (read, write, open, fsync, getattr) for fsslower and fsdist, over three
 * attach paths. The including tool defines, after including this header,
 *
 *     static __always_inline void fsop_done(void *ctx, const struct fsop_call *call, struct file *file,
 *                                           __s64 ret, __u64 delta_ns);
 *
 * which gets each operation of the traced file system once it returns: what it was (call->op), where it started
 * (call->offset, and call->end for fsync), the file (NULL for getattr), its return value and its duration. User
 * space attaches the programs of one path only, and of the operations it wants.
 *
 * 1. fentry/fexit on the file system's own functions (ext4_file_read_iter, xfs_file_fsync, ...): user space sets
 *    each program's target before load (the sections name vfs functions only as placeholders).
 * 2. kprobes/kretprobes on the same functions.
 * 3. Where kernel functions cannot be traced: the system calls, at the raw_syscalls sys_enter and sys_exit
 *    tracepoints (tp_btf, else raw_tp), each call's number told from fsop_syscall_kind. At sys_enter the file
 *    behind the descriptor (fdsock.bpf.h) is kept if its super block's magic is fsop_magic (and it is a regular
 *    file, for reads, writes and opens); an open is kept by thread and its file checked at sys_exit from the
 *    descriptor it returned; a stat-like call is checked at sys_exit from the device in the result it wrote to
 *    user memory, against fsop_devs (the devices of the traced file system's mounts, filled by user space). This
 *    path times the whole system call, path lookup included, and sees only the system calls of 64-bit tasks:
 *    mmap faults, io_uring, AIO, sendfile, splice, copy_file_range and I/O the kernel does on its own are not in
 *    it. Its two programs run at every system call of the host, and return at the first table read for the calls
 *    not timed.
 *
 * Starts are kept per thread in fsop_calls; a start that finds the map full is counted in fsop_calls_full. */
#ifndef __COREBPF_FSOP_BPF_H
#define __COREBPF_FSOP_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fdsock.bpf.h"
#include "filter.bpf.h"
#include "arch.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "fsop.h"

#define FSOP_S_IFMT 00170000
#define FSOP_S_IFREG 0100000
#define FSOP_O_PATH 010000000
#define FSOP_LLONG_MAX 0x7fffffffffffffffLL

/* System call path: the super block magic of the file system traced (EXT4_SUPER_MAGIC, ...). */
const volatile __u64 fsop_magic = 0;
/* The tool's own process, never timed: its output may be a file on the traced file system. */
const volatile __u32 fsop_self_tgid = 0;

/* How a stat-like system call's result gives the device (system call path, getattr). */
#define FSOP_STAT_NONE 0
#define FSOP_STAT_STATX 1	/* struct statx: stx_dev_major, stx_dev_minor */
#define FSOP_STAT_STAT 2	/* struct stat: st_dev, new_encode_dev() */

struct fsop_call {
	__u64 ts;
	__s64 offset;
	__s64 end;
	struct file *file;
	__u64 stat_buf;		/* system call path, getattr: the user buffer the result is written to */
	__u32 op;
	__u32 stat_how;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FSOP_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct fsop_call);
} fsop_calls SEC(".maps");

/* System call path, getattr: the kernel device numbers (major << 20 | minor) of the traced file system's mounts. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FSOP_MAX_DEVS);
	__type(key, __u32);
	__type(value, __u8);
} fsop_devs SEC(".maps");

/* Operations not timed because too many were in progress at once. */
__u64 fsop_calls_full = 0;

static __always_inline void fsop_done(void *ctx, const struct fsop_call *call, struct file *file, __s64 ret,
				      __u64 delta_ns);

static __always_inline int fsop_enter_full(struct file *file, __u32 op, __s64 offset, __s64 end, __u64 stat_buf,
					   __u32 stat_how)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct fsop_call call = {};

	if (!tgid_wanted(id >> 32) || (id >> 32) == fsop_self_tgid)
		return 0;
	call.ts = bpf_ktime_get_ns();
	call.offset = offset;
	call.end = end;
	call.file = file;
	call.op = op;
	call.stat_buf = stat_buf;
	call.stat_how = stat_how;
	if (bpf_map_update_elem(&fsop_calls, &tid, &call, BPF_ANY))
		__sync_fetch_and_add(&fsop_calls_full, 1);
	return 0;
}

static __always_inline int fsop_enter(struct file *file, __u32 op, __s64 offset, __s64 end)
{
	return fsop_enter_full(file, op, offset, end, 0, FSOP_STAT_NONE);
}

/* The end of the current thread's operation: `file` is the one kept at its start unless given here. */
static __always_inline int fsop_exit_file(void *ctx, __s64 ret, struct file *file)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fsop_call *found, call;
	__u64 now = bpf_ktime_get_ns();

	found = bpf_map_lookup_elem(&fsop_calls, &tid);
	if (!found)
		return 0;
	call = *found;
	bpf_map_delete_elem(&fsop_calls, &tid);
	fsop_done(ctx, &call, file ? file : call.file, ret, now - call.ts);
	return 0;
}

static __always_inline int fsop_exit(void *ctx, __s64 ret)
{
	return fsop_exit_file(ctx, ret, NULL);
}

/* --- 1. fentry/fexit on the file system's functions (targets set by user space) --- */

SEC("fentry/vfs_read")
int BPF_PROG(fsop_read_fentry, struct kiocb *iocb)
{
	return fsop_enter(iocb->ki_filp, FSOP_READ, iocb->ki_pos, 0);
}

SEC("fexit/vfs_read")
int BPF_PROG(fsop_read_fexit, struct kiocb *iocb, struct iov_iter *to, ssize_t ret)
{
	return fsop_exit(ctx, ret);
}

SEC("fentry/vfs_write")
int BPF_PROG(fsop_write_fentry, struct kiocb *iocb)
{
	return fsop_enter(iocb->ki_filp, FSOP_WRITE, iocb->ki_pos, 0);
}

SEC("fexit/vfs_write")
int BPF_PROG(fsop_write_fexit, struct kiocb *iocb, struct iov_iter *from, ssize_t ret)
{
	return fsop_exit(ctx, ret);
}

SEC("fentry/vfs_open")
int BPF_PROG(fsop_open_fentry, struct inode *inode, struct file *file)
{
	return fsop_enter(file, FSOP_OPEN, 0, 0);
}

SEC("fexit/vfs_open")
int BPF_PROG(fsop_open_fexit)
{
	return fsop_exit(ctx, 0);
}

SEC("fentry/vfs_fsync_range")
int BPF_PROG(fsop_fsync_fentry, struct file *file, loff_t start, loff_t end)
{
	return fsop_enter(file, FSOP_FSYNC, start, end);
}

SEC("fexit/vfs_fsync_range")
int BPF_PROG(fsop_fsync_fexit)
{
	return fsop_exit(ctx, 0);
}

SEC("fentry/vfs_getattr")
int BPF_PROG(fsop_getattr_fentry)
{
	return fsop_enter(NULL, FSOP_GETATTR, 0, 0);
}

SEC("fexit/vfs_getattr")
int BPF_PROG(fsop_getattr_fexit)
{
	return fsop_exit(ctx, 0);
}

/* --- 2. kprobes on the same functions (attached by name) --- */

SEC("kprobe")
int BPF_KPROBE(fsop_read_kprobe, struct kiocb *iocb)
{
	return fsop_enter(BPF_CORE_READ(iocb, ki_filp), FSOP_READ, BPF_CORE_READ(iocb, ki_pos), 0);
}

SEC("kprobe")
int BPF_KPROBE(fsop_write_kprobe, struct kiocb *iocb)
{
	return fsop_enter(BPF_CORE_READ(iocb, ki_filp), FSOP_WRITE, BPF_CORE_READ(iocb, ki_pos), 0);
}

SEC("kprobe")
int BPF_KPROBE(fsop_open_kprobe, struct inode *inode, struct file *file)
{
	return fsop_enter(file, FSOP_OPEN, 0, 0);
}

SEC("kprobe")
int BPF_KPROBE(fsop_fsync_kprobe, struct file *file, loff_t start, loff_t end)
{
	return fsop_enter(file, FSOP_FSYNC, start, end);
}

SEC("kprobe")
int BPF_KPROBE(fsop_getattr_kprobe)
{
	return fsop_enter(NULL, FSOP_GETATTR, 0, 0);
}

/* Every operation's return: read and write give their byte counts, the others 0. */
SEC("kretprobe")
int BPF_KRETPROBE(fsop_kretprobe, long ret)
{
	return fsop_exit(ctx, ret);
}

/* --- 3. every system call, at raw_syscalls sys_enter and sys_exit (tp_btf, else raw_tp) --- */

/* What each system call number is to the raw path (FSOP_SC_*, fsop.h): set by user space before load, 0 for the
 * calls not timed. Two links serve every call, where one syscalls:sys_enter_NAME/sys_exit_NAME pair per call would
 * need 42, each of whose detach waits for an RCU grace period under the kernel's event_mutex (1.7 s to exit). */
const volatile __u8 fsop_syscall_kind[FSOP_MAX_SYSCALLS] = {};

/* The kind of system call `nr` (FSOP_SC_NONE beyond the table). */
static __always_inline __u32 fsop_kind(long nr)
{
	if ((unsigned long)nr >= FSOP_MAX_SYSCALLS)
		return FSOP_SC_NONE;
	return fsop_syscall_kind[nr];
}

/* The file behind `fd` if it is on the traced file system (and regular, unless `any_type`), else NULL.
 *
 * Every read and write of the host comes here, of pipes and sockets too, so the check is kept short: where the
 * kernel has bpf_rdonly_cast (6.2 on, a kfunc the verifier turns into a plain move) the file's pointer is cast to
 * a typed one and its fields are plain loads, which the verifier makes fault-safe; elsewhere each field costs a
 * bpf_probe_read_kernel. (libbpf leaves the kfunc's call out of kernels that lack it, and the verifier never
 * sees it: bpf_ksym_exists is a constant there.) */
static __always_inline struct file *fsop_fd_file(long fd, bool any_type)
{
	struct file *file = fd_file(fd);
	struct inode *inode;
	__u64 magic;
	__u32 mode;

	if (!file)
		return NULL;
	if (bpf_ksym_exists(bpf_rdonly_cast)) {
		inode = bpf_core_cast(file, struct file)->f_inode;
		magic = inode->i_sb->s_magic;
		mode = any_type ? 0 : inode->i_mode;
	} else {
		inode = BPF_CORE_READ(file, f_inode);
		magic = BPF_CORE_READ(inode, i_sb, s_magic);
		mode = any_type ? 0 : BPF_CORE_READ(inode, i_mode);
	}
	if (magic != fsop_magic)
		return NULL;
	if (!any_type && (mode & FSOP_S_IFMT) != FSOP_S_IFREG)
		return NULL;
	return file;
}

/* The position of a file fsop_fd_file returned. */
static __always_inline __s64 fsop_file_pos(struct file *file)
{
	if (bpf_ksym_exists(bpf_rdonly_cast))
		return bpf_core_cast(file, struct file)->f_pos;
	return BPF_CORE_READ(file, f_pos);
}

/* A read or write of descriptor `fd`, at `pos` (-1: the file's own position, as read(2) and preadv2(-1) use). */
static __always_inline int fsop_rw_enter(long fd, __u32 op, __s64 pos)
{
	struct file *file = fsop_fd_file(fd, false);

	if (!file)
		return 0;
	if (pos == -1)
		pos = fsop_file_pos(file);
	return fsop_enter(file, op, pos, 0);
}

TP_BTF_RAW(fsop_sys_enter, sys_enter, struct pt_regs *regs, long nr)
{
	__u32 kind = fsop_kind(nr);
	struct file *file;

	/* 64-bit calls only: a 32-bit task's numbers name other calls. */
	if (kind == FSOP_SC_NONE || tp_compat_regs(regs))
		return 0;
	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	switch (kind) {
	case FSOP_SC_READ:
		return fsop_rw_enter(tp_syscall_arg(regs, 0), FSOP_READ, -1);
	case FSOP_SC_PREAD:
		return fsop_rw_enter(tp_syscall_arg(regs, 0), FSOP_READ, tp_syscall_arg(regs, 3));
	case FSOP_SC_WRITE:
		return fsop_rw_enter(tp_syscall_arg(regs, 0), FSOP_WRITE, -1);
	case FSOP_SC_PWRITE:
		return fsop_rw_enter(tp_syscall_arg(regs, 0), FSOP_WRITE, tp_syscall_arg(regs, 3));
	case FSOP_SC_OPEN:
		/* the file is known at the return only */
		return fsop_enter(NULL, FSOP_OPEN, 0, 0);
	case FSOP_SC_FSYNC:
		/* the whole file, as the kernel asks the file system for it */
		file = fsop_fd_file(tp_syscall_arg(regs, 0), true);
		return file ? fsop_enter(file, FSOP_FSYNC, 0, FSOP_LLONG_MAX) : 0;
	case FSOP_SC_STATX:
		/* statx(dirfd, path, flags, mask, buf) */
		return fsop_enter_full(NULL, FSOP_GETATTR, 0, 0, tp_syscall_arg(regs, 4), FSOP_STAT_STATX);
	case FSOP_SC_FSTATAT:
		/* newfstatat(dirfd, path, buf, flags) */
		return fsop_enter_full(NULL, FSOP_GETATTR, 0, 0, tp_syscall_arg(regs, 2), FSOP_STAT_STAT);
	case FSOP_SC_STAT:
		/* stat(path, buf), lstat(path, buf), fstat(fd, buf) */
		return fsop_enter_full(NULL, FSOP_GETATTR, 0, 0, tp_syscall_arg(regs, 1), FSOP_STAT_STAT);
	}
	return 0;
}

/* The device a stat-like call's result names, as the kernel encodes it (major << 20 | minor); 0 if unreadable. */
static __always_inline __u32 fsop_stat_dev(const struct fsop_call *call)
{
	__u32 major = 0, minor = 0;

	if (call->stat_how == FSOP_STAT_STATX) {
		/* struct statx (UAPI): stx_dev_major at byte 136, stx_dev_minor at 140 */
		if (bpf_probe_read_user(&major, sizeof(major), (void *)(call->stat_buf + 136)) ||
		    bpf_probe_read_user(&minor, sizeof(minor), (void *)(call->stat_buf + 140)))
			return 0;
	} else {
		unsigned long dev = 0;

		/* struct stat's st_dev comes first, in the encoding of new_encode_dev() */
		if (bpf_probe_read_user(&dev, sizeof(dev), (void *)call->stat_buf))
			return 0;
		major = (dev >> 8) & 0xfff;
		minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
	}
	return major << 20 | minor;
}

/* A timed system call's return: decides whether an open or a stat-like call was on the traced file system. */
TP_BTF_RAW(fsop_sys_exit, sys_exit, struct pt_regs *regs, long ret)
{
	struct fsop_call *call;
	struct file *file = NULL;
	__u32 tid;

	if (fsop_kind(tp_syscall_nr(regs)) == FSOP_SC_NONE)
		return 0;
	tid = (__u32)bpf_get_current_pid_tgid();
	call = bpf_map_lookup_elem(&fsop_calls, &tid);
	if (!call)
		return 0;
	if (call->op == FSOP_OPEN) {
		file = ret >= 0 ? fsop_fd_file(ret, false) : NULL;
		if (!file || (BPF_CORE_READ(file, f_flags) & FSOP_O_PATH)) {
			bpf_map_delete_elem(&fsop_calls, &tid);
			return 0;
		}
		return fsop_exit_file(ctx, 0, file);
	}
	if (call->op == FSOP_GETATTR) {
		__u32 dev;

		if (ret != 0) {
			bpf_map_delete_elem(&fsop_calls, &tid);
			return 0;
		}
		dev = fsop_stat_dev(call);
		if (!dev || !bpf_map_lookup_elem(&fsop_devs, &dev)) {
			bpf_map_delete_elem(&fsop_calls, &tid);
			return 0;
		}
		return fsop_exit(ctx, 0);
	}
	return fsop_exit(ctx, call->op == FSOP_FSYNC ? 0 : ret);
}

#endif /* __COREBPF_FSOP_BPF_H */
