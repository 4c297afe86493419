// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The names of the directories above a dentry, innermost first, up to the current task's root and across mount
 * points: what opensnoop -F and filelife -F send so that user space can print a file's path from the root
 * (common::domain::paths::from_walk joins them).
 *
 * The including tool defines MAX_DEPTH (steps up at most) and COMPONENT_LEN (bytes per name) and passes its
 * record's `char dirs[MAX_DEPTH][COMPONENT_LEN]`. dentry_path_walk() fills dirs[0..depth) and says whether the
 * walk reached the task's root (or the global one); if not, the path was cut at MAX_DEPTH. Slot i is the i-th step
 * up, so every unrolled iteration writes at a constant offset and the verifier's states converge. */
#ifndef __COREBPF_DENTRY_PATH_BPF_H
#define __COREBPF_DENTRY_PATH_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#if !defined(MAX_DEPTH) || !defined(COMPONENT_LEN)
#error "dentry_path.bpf.h: define MAX_DEPTH and COMPONENT_LEN (the tool's record layout) before including it"
#endif

struct dentry_path {
	__u32 depth;		/* names written to dirs */
	bool complete;		/* the walk reached the root */
};

/* The directories above `dentry`, reached through mount `vfsmnt`. */
static __always_inline struct dentry_path dentry_path_walk(char dirs[MAX_DEPTH][COMPONENT_LEN], struct dentry *dentry,
							   struct vfsmount *vfsmnt)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct mount *mnt = container_of(vfsmnt, struct mount, mnt);
	struct dentry *root_dentry = BPF_CORE_READ(task, fs, root.dentry);
	struct vfsmount *root_mnt = BPF_CORE_READ(task, fs, root.mnt);
	struct dentry_path walked = {};
	int i;

#pragma unroll
	for (i = 0; i < MAX_DEPTH; i++) {
		struct dentry *parent;

		if (dentry == root_dentry && vfsmnt == root_mnt) {
			walked.complete = true;
			break;
		}
		parent = BPF_CORE_READ(dentry, d_parent);
		if (dentry == BPF_CORE_READ(vfsmnt, mnt_root) || dentry == parent) {
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

			if (up == mnt) {	/* the global root */
				walked.complete = true;
				break;
			}
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			vfsmnt = &up->mnt;
			if (dentry == root_dentry && vfsmnt == root_mnt) {
				walked.complete = true;
				break;
			}
			parent = BPF_CORE_READ(dentry, d_parent);
		}
		bpf_probe_read_kernel_str(dirs[i], COMPONENT_LEN, BPF_CORE_READ(dentry, d_name.name));
		walked.depth = i + 1;
		dentry = parent;
	}
	return walked;
}

#endif /* __COREBPF_DENTRY_PATH_BPF_H */
