// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* threadsnoop: one record per pthread_create() call, from a uprobe on pthread_create in the C library (one
 * uprobe_multi link of one offset on 6.6+, else a classic uprobe).
 *
 * The record carries the start routine's address (the third argument). A process may create a thread and exit
 * before user space reads the record, and then its memory maps are gone; so where the kernel has bpf_find_vma
 * (5.17+), the program also records the mapping that holds the address (start, file offset, the file's inode and
 * device) and the names of the file's dentries up to its file system's root, from which user space finds the file
 * and names the routine by its offset. Older kernels skip that part (the helper's enum value is checked through
 * BTF, so the verifier removes the call; before 5.13, which cannot load a callback at all, a copy of the program
 * without it is loaded), and a routine of an exited process then prints as its address. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "ringbuf.bpf.h"
#include "threadsnoop.h"

/* Calls not reported because the ring buffer was full. */
__u64 lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

/* What the bpf_find_vma callback copies out of the mapping. */
struct vma_found {
	struct file *file;
	__u64 vm_start;
	__u64 vm_pgoff;
};

static long vma_callback(struct task_struct *task, struct vm_area_struct *vma, struct vma_found *found)
{
	found->file = BPF_CORE_READ(vma, vm_file);
	found->vm_start = BPF_CORE_READ(vma, vm_start);
	found->vm_pgoff = BPF_CORE_READ(vma, vm_pgoff);
	return 0;
}

/* Fills the mapping and file fields of `e` for address e->start of the current process. */
static __always_inline void record_file(struct event *e)
{
	struct vma_found found = {};
	struct dentry *dentry, *parent;
	struct file *file;

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma))
		return;
	if (bpf_find_vma(bpf_get_current_task_btf(), e->start, vma_callback, &found, 0) || !found.file)
		return;
	/* A plain local: inside BPF_CORE_READ, found.file would be relocated as a kernel type's field. */
	file = found.file;
	e->vm_start = found.vm_start;
	e->vm_pgoff = found.vm_pgoff;
	e->ino = BPF_CORE_READ(file, f_inode, i_ino);
	e->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	dentry = BPF_CORE_READ(file, f_path.dentry);
	for (int i = 0; i < PATH_DEPTH; i++) {
		parent = BPF_CORE_READ(dentry, d_parent);
		if (!parent || parent == dentry) {
			e->complete = 1;
			return;
		}
		if (bpf_probe_read_kernel_str(e->names + i * NAME_LEN, NAME_LEN, BPF_CORE_READ(dentry, d_name.name)) < 0)
			return;
		e->depth = i + 1;
		dentry = parent;
	}
	/* PATH_DEPTH components read: complete if the last parent is the root. */
	e->complete = BPF_CORE_READ(dentry, d_parent) == dentry;
}

static __always_inline int on_create(struct pt_regs *ctx, bool with_file)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;

	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->ts = bpf_ktime_get_ns();
	e->start = PT_REGS_PARM3(ctx);
	e->vm_start = 0;
	e->vm_pgoff = 0;
	e->ino = 0;
	e->dev = 0;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->depth = 0;
	e->complete = 0;
	e->_pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (with_file)
		record_file(e);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(pthread_create_entry)
{
	return on_create(ctx, true);
}

/* For kernels before 5.13, which refuse the callback's function pointer (even in a branch the verifier would
 * remove): no file is recorded. */
SEC("uprobe")
int BPF_UPROBE(pthread_create_entry_nofile)
{
	return on_create(ctx, false);
}

SEC("uprobe.multi")
int BPF_UPROBE(pthread_create_multi)
{
	return on_create(ctx, true);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
