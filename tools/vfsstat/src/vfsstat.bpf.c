// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* vfsstat: counts of some VFS calls, in a per-CPU array (no events).
 *
 * Kernel functions, as BCC: fentry (else kprobe) on vfs_read, vfs_write, vfs_fsync_range, vfs_open, vfs_create,
 * vfs_unlink, vfs_mkdir and vfs_rmdir, counted at entry. Kernels that allow neither (no kprobes, fentry denied)
 * count the system calls that reach those functions instead, at their exit (raw_syscalls:sys_exit, one program
 * for every syscall, classified by number through `syscall_class`, filled by user space before attaching):
 * reads, writes and fsyncs unless the descriptor was bad, the namespace calls when they succeed, mknod of a
 * regular file as CREATE (the only system call that reaches vfs_create: open(O_CREAT) creates through the
 * filesystem directly), unlinkat with AT_REMOVEDIR as RMDIR. User space sums the CPUs and differences the
 * cumulative counts every interval. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "arch.bpf.h"
#include "filter.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "vfsstat.h"

#define EBADF 9
#define S_IFMT 00170000
#define S_IFREG 0100000
#define AT_REMOVEDIR 0x200


struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, S_MAXSTAT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} syscall_class SEC(".maps");

static __always_inline int count(__u32 key)
{
	__u64 *v;

	if (!tgid_wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	v = bpf_map_lookup_elem(&stats, &key);
	if (v)
		*v += 1;
	return 0;
}

/* --- kernel functions: fentry --- */

SEC("fentry/vfs_read")
int BPF_PROG(read_fentry) { return count(S_READ); }
SEC("fentry/vfs_write")
int BPF_PROG(write_fentry) { return count(S_WRITE); }
SEC("fentry/vfs_fsync_range")
int BPF_PROG(fsync_fentry) { return count(S_FSYNC); }
SEC("fentry/vfs_open")
int BPF_PROG(open_fentry) { return count(S_OPEN); }
SEC("fentry/vfs_create")
int BPF_PROG(create_fentry) { return count(S_CREATE); }
SEC("fentry/vfs_unlink")
int BPF_PROG(unlink_fentry) { return count(S_UNLINK); }
SEC("fentry/vfs_mkdir")
int BPF_PROG(mkdir_fentry) { return count(S_MKDIR); }
SEC("fentry/vfs_rmdir")
int BPF_PROG(rmdir_fentry) { return count(S_RMDIR); }

/* --- kernel functions: kprobes --- */

SEC("kprobe/vfs_read")
int BPF_KPROBE(read_kprobe) { return count(S_READ); }
SEC("kprobe/vfs_write")
int BPF_KPROBE(write_kprobe) { return count(S_WRITE); }
SEC("kprobe/vfs_fsync_range")
int BPF_KPROBE(fsync_kprobe) { return count(S_FSYNC); }
SEC("kprobe/vfs_open")
int BPF_KPROBE(open_kprobe) { return count(S_OPEN); }
SEC("kprobe/vfs_create")
int BPF_KPROBE(create_kprobe) { return count(S_CREATE); }
SEC("kprobe/vfs_unlink")
int BPF_KPROBE(unlink_kprobe) { return count(S_UNLINK); }
SEC("kprobe/vfs_mkdir")
int BPF_KPROBE(mkdir_kprobe) { return count(S_MKDIR); }
SEC("kprobe/vfs_rmdir")
int BPF_KPROBE(rmdir_kprobe) { return count(S_RMDIR); }

/* --- system calls: raw_syscalls:sys_exit --- */

static __always_inline int syscall_exit(struct pt_regs *regs, long ret)
{
	__u32 nr, *class;
	unsigned long arg;

	/* 64-bit system calls only: a 32-bit process's numbers mean other calls. */
	if (compat_regs(regs))
		return 0;
	nr = syscall_nr_of(regs);
	class = bpf_map_lookup_elem(&syscall_class, &nr);
	if (!class || *class == SC_NONE)
		return 0;
	switch (*class) {
	case SC_READ:
		return ret == -EBADF ? 0 : count(S_READ);
	case SC_WRITE:
		return ret == -EBADF ? 0 : count(S_WRITE);
	case SC_FSYNC:
		return ret == -EBADF ? 0 : count(S_FSYNC);
	}
	if (ret < 0)
		return 0;
	switch (*class) {
	case SC_OPEN:
		return count(S_OPEN);
	case SC_MKNOD:
		arg = PT_REGS_PARM2_CORE_SYSCALL(regs);
		break;
	case SC_MKNODAT:
		arg = PT_REGS_PARM3_CORE_SYSCALL(regs);
		break;
	case SC_UNLINK:
		return count(S_UNLINK);
	case SC_UNLINKAT:
		arg = PT_REGS_PARM3_CORE_SYSCALL(regs);
		return count(arg & AT_REMOVEDIR ? S_RMDIR : S_UNLINK);
	case SC_MKDIR:
		return count(S_MKDIR);
	case SC_RMDIR:
		return count(S_RMDIR);
	default:
		return 0;
	}
	/* mknod, mknodat: a regular file (type 0 means regular too) is made by vfs_create */
	if ((arg & S_IFMT) == 0 || (arg & S_IFMT) == S_IFREG)
		return count(S_CREATE);
	return 0;
}

TP_BTF_RAW(sys_exit, sys_exit, struct pt_regs *regs, long ret)
{
	return syscall_exit(regs, ret);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
