// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* filetop: reads and writes per thread and file, cumulative, for a top-like screen.
 *
 * Three ways to see a read or a write, best first:
 * - fentry of vfs_read and vfs_write, and the kprobes of the same functions (BCC's hooks): the struct file and
 *   the byte count asked for, at the function's entry;
 * - where kernel functions cannot be traced, the system calls' tracepoints: at sys_enter of read, pread64, readv,
 *   preadv, preadv2 (and the write family) the struct file behind the descriptor is found through the task's file
 *   table and kept per thread; at sys_exit the call is counted with the bytes it returned.
 * Either way a file whose name is empty (pipes and other anonymous files) is left out, as BCC does, and so is any
 * file that is not regular unless -a (all_files), and with -d any file outside that directory. Rows are keyed by
 * thread, command name and file (device, special device, inode) and never deleted here; user space prints the
 * difference between two reads. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fdsock.bpf.h"
#include "filter.bpf.h"
#include "syscall_tp.bpf.h"
#include "filetop.h"

#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000

const volatile bool all_files = false;
/* -d: only files whose parent directory is this inode (0: off) of this file system (kernel device number). */
const volatile __u64 dir_inode = 0;
const volatile __u32 dir_dev = 0;

/* Reads and writes not counted: the rows map was full, or too many system calls were in progress. */
__u64 rows_full = 0;
__u64 inflight_full = 0;

struct file_key _file_key_type = {};
struct file_stat _file_stat_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ROWS);
	__type(key, struct file_key);
	__type(value, struct file_stat);
} rows SEC(".maps");

/* A read or write system call between its start and its end (tracepoint path). */
struct call_start {
	struct file *file;
	__u64 write;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_start);
} inflight SEC(".maps");

/* True if the file is one to count: it has a name, and it is regular or -a was given. */
static __always_inline bool file_wanted(struct file *file)
{
	umode_t mode;

	if (!file || !BPF_CORE_READ(file, f_path.dentry, d_name.len))
		return false;
	if (dir_inode) {
		struct inode *dir = BPF_CORE_READ(file, f_path.dentry, d_parent, d_inode);

		if (BPF_CORE_READ(dir, i_ino) != dir_inode || BPF_CORE_READ(dir, i_sb, s_dev) != dir_dev)
			return false;
	}
	mode = BPF_CORE_READ(file, f_inode, i_mode);
	return all_files || (mode & S_IFMT) == S_IFREG;
}

/* Adds one read or write of `bytes` to the row of the current thread and `file`. */
static __always_inline void count_call(struct file *file, bool write, __u64 bytes)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct file_key key = {};
	struct file_stat *stat;
	struct qstr name;
	umode_t mode;

	key.pid = id >> 32;
	key.tid = (__u32)id;
	key.inode = BPF_CORE_READ(file, f_inode, i_ino);
	key.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	key.rdev = BPF_CORE_READ(file, f_inode, i_rdev);
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	stat = bpf_map_lookup_elem(&rows, &key);
	if (!stat) {
		struct file_stat fresh = {};

		name = BPF_CORE_READ(file, f_path.dentry, d_name);
		fresh.name_len = name.len;
		bpf_probe_read_kernel_str(fresh.name, NAME_LEN + 1, name.name);
		mode = BPF_CORE_READ(file, f_inode, i_mode);
		if ((mode & S_IFMT) == S_IFREG)
			fresh.type = 'R';
		else if ((mode & S_IFMT) == S_IFSOCK)
			fresh.type = 'S';
		else
			fresh.type = 'O';
		bpf_map_update_elem(&rows, &key, &fresh, BPF_NOEXIST);
		stat = bpf_map_lookup_elem(&rows, &key);
		if (!stat) {
			__sync_fetch_and_add(&rows_full, 1);
			return;
		}
	}
	if (write) {
		__sync_fetch_and_add(&stat->writes, 1);
		__sync_fetch_and_add(&stat->write_bytes, bytes);
	} else {
		__sync_fetch_and_add(&stat->reads, 1);
		__sync_fetch_and_add(&stat->read_bytes, bytes);
	}
}

static __always_inline int function_entry(struct file *file, __u64 count, bool write)
{
	if (tgid_wanted(bpf_get_current_pid_tgid() >> 32) && file_wanted(file))
		count_call(file, write, count);
	return 0;
}

/* --- kernel function paths: vfs_read and vfs_write (struct file *, char *, size_t, loff_t *) --- */

SEC("fentry/vfs_read")
int BPF_PROG(vfs_read_fentry, struct file *file, char *buf, size_t count)
{
	return function_entry(file, count, false);
}

SEC("fentry/vfs_write")
int BPF_PROG(vfs_write_fentry, struct file *file, const char *buf, size_t count)
{
	return function_entry(file, count, true);
}

SEC("kprobe/vfs_read")
int BPF_KPROBE(vfs_read_kprobe, struct file *file, char *buf, size_t count)
{
	return function_entry(file, count, false);
}

SEC("kprobe/vfs_write")
int BPF_KPROBE(vfs_write_kprobe, struct file *file, const char *buf, size_t count)
{
	return function_entry(file, count, true);
}

/* --- tracepoint path: the read and write system calls (each program is attached to a family's tracepoints) --- */

static __always_inline int call_enter(struct syscall_enter_ctx *ctx, bool write)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call_start start = {};

	if (!tgid_wanted(id >> 32))
		return 0;
	start.file = fd_file(ctx->args[0]);
	if (!file_wanted(start.file))
		return 0;
	start.write = write;
	if (bpf_map_update_elem(&inflight, &tid, &start, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int read_enter(struct syscall_enter_ctx *ctx)
{
	return call_enter(ctx, false);
}

SEC("tracepoint/syscalls/sys_enter_write")
int write_enter(struct syscall_enter_ctx *ctx)
{
	return call_enter(ctx, true);
}

SEC("tracepoint/syscalls/sys_exit_read")
int call_exit(struct syscall_exit_ctx *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_start *start = bpf_map_lookup_elem(&inflight, &tid);

	if (!start)
		return 0;
	/* The call holds the file (fdget) until it returns, so the pointer kept at its start is still valid. */
	count_call(start->file, start->write, ctx->ret > 0 ? ctx->ret : 0);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
