// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* filelife: files created and then deleted while tracing, with their age at deletion.
 *
 * Every creation seen is kept in `born`, keyed by the file's inode number and device (so that a rename changes
 * nothing), with its time, its dentry and its inode; a successful unlink of a file kept there sends one record and
 * forgets the file. Two ways to see them:
 *
 * - kernel functions (fentry/fexit, else kprobe/kretprobe): vfs_open() of a file whose f_mode has FMODE_CREATED
 *   (the open made it), vfs_create() returning 0 (mknod and in-kernel creators), and vfs_unlink() from its start
 *   (the dentry still has its inode) to its result. The position of the dentry among the arguments changed twice
 *   (a user namespace, then an idmap, came first); user space reads it from the kernel's BTF.
 *
 * - syscall tracepoints (no kernel-function tracing needed): open, openat, openat2 and creat with O_CREAT are
 *   followed to their return; the new descriptor's struct file says whether this call created the file
 *   (FMODE_CREATED, set by the kernel only when the open made the inode: O_CREAT on an existing file is not a
 *   creation). unlink and unlinkat are matched at their start to the kept file the path names: a kept dentry
 *   still live (it holds the kept inode and is in the dentry hash) whose name is the path's last component and,
 *   for a path of one component, whose parent is the directory the call starts from (the working directory or
 *   dirfd); the dentry cache holds one live dentry per name in a directory. At a successful return, the file is
 *   reported once its dentry is no longer live. If the path could not be read at the start (its page not in
 *   memory), or a path with directories matched a live same-named file elsewhere, the search is made at the
 *   return among the kept dentries no longer live, the youngest match taken.
 *   Needs bpf_for_each_map_elem (5.13).
 *
 * Records that found no room on the ring buffer are counted in `lost`, creations not kept because `born` was full
 * in `born_full`, calls not followed because `inflight` was full in `inflight_full`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fdsock.bpf.h"
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "filelife.h"
#include "dentry_path.bpf.h"

/* include/linux/fs.h: the open created the file (the same bit from 4.19 to 6.18). */
#define FMODE_CREATED 0x100000
#define O_CREAT 0100
#define AT_FDCWD -100
#define AT_REMOVEDIR 0x200

/* The argument slot (from 0) of struct dentry * in vfs_create() and vfs_unlink(). Set by user space from BTF. */
const volatile __u32 create_dentry_arg = 2;
const volatile __u32 unlink_dentry_arg = 2;
/* -F: send the directories above each deleted file. */
const volatile bool full_path = false;

__u64 lost = 0;
__u64 born_full = 0;
__u64 inflight_full = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct file_key {
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

struct birth {
	__u64 ts;
	struct dentry *dentry;
	struct inode *inode;
	struct vfsmount *mnt;	/* the mount it was created through (-F) */
	__u32 tgid;
	__u32 _pad;
};

/* A call in progress, per thread: a creation (dentry for vfs_create, nothing for an O_CREAT open) or an unlink
 * (the kept file for vfs_unlink, the path and directory for the system calls). */
struct call {
	struct file_key key;
	struct dentry *dentry;
	const char *path;
	__s32 dfd;
	__u32 found;		/* system-call unlinks: FOUND_* */
};

/* What an unlink's start found among the kept files: none, the one at `key`, or nothing yet because the path
 * could not be read (its page not in memory): the search is then made at the return. */
#define FOUND_NONE 0
#define FOUND_KEY 1
#define FOUND_LATER 2

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BORN);
	__type(key, struct file_key);
	__type(value, struct birth);
} born SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call);
} creating SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call);
} unlinking SEC(".maps");

/* The unlinked path, a candidate's name and the record being built, too big for the stack. */
struct scratch {
	char path[PATH_LEN];
	char name[NAME_LEN];
	struct event event;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline bool current_wanted(void)
{
	return tgid_wanted(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline void inode_key(struct inode *inode, struct file_key *key)
{
	key->ino = BPF_CORE_READ(inode, i_ino);
	key->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key->_pad = 0;
}

/* Keeps a file just created (`dentry`, positive: `inode`) through mount `mnt` (NULL: the working directory's). */
static __always_inline void born_add(struct dentry *dentry, struct inode *inode, struct vfsmount *mnt)
{
	struct file_key key = {};
	struct birth b = {};

	if (!dentry || !inode)
		return;
	inode_key(inode, &key);
	b.ts = bpf_ktime_get_ns();
	b.dentry = dentry;
	b.inode = inode;
	if (!mnt) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		mnt = BPF_CORE_READ(task, fs, pwd.mnt);
	}
	b.mnt = mnt;
	b.tgid = bpf_get_current_pid_tgid() >> 32;
	if (bpf_map_update_elem(&born, &key, &b, BPF_ANY))
		__sync_fetch_and_add(&born_full, 1);
}

/* Sends the record of kept file `key` (born `b`), deleted under the name of `dentry`, and forgets it. */
static __always_inline void report(struct file_key *key, struct birth *b, struct dentry *dentry)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct scratch *s;
	struct event *e;
	__u32 zero = 0;
	__u64 len;

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		goto out;
	e = &s->event;
	e->ts_ns = now;
	e->age_ns = now - b->ts;
	e->ino = key->ino;
	e->dev = key->dev;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->creator = b->tgid;
	e->depth = 0;
	e->dirs_complete = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (bpf_probe_read_kernel_str(e->name, sizeof(e->name), BPF_CORE_READ(dentry, d_name.name)) < 0)
		e->name[0] = 0;
	if (full_path) {
		struct dentry_path walked = dentry_path_walk(e->dirs, BPF_CORE_READ(dentry, d_parent), b->mnt);

		e->depth = walked.depth;
		e->dirs_complete = walked.complete;
	}
	len = __builtin_offsetof(struct event, dirs) + (__u64)e->depth * COMPONENT_LEN;
	if (len > sizeof(*e))
		len = sizeof(*e);
	ringbuf_output(&events, e, len, &lost);
out:
	bpf_map_delete_elem(&born, key);
}

static __always_inline void call_start(void *map, struct call *c)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (bpf_map_update_elem(map, &tid, c, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
}

/* The current thread's call kept in `map`, copied to `c` and forgotten; false if there is none. */
static __always_inline bool call_end(void *map, struct call *c)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call *kept = bpf_map_lookup_elem(map, &tid);

	if (!kept)
		return false;
	*c = *kept;
	bpf_map_delete_elem(map, &tid);
	return true;
}

/* --- kernel functions --- */

static __always_inline int open_started(struct path *path, struct file *file)
{
	struct dentry *dentry;

	if (!current_wanted() || !(BPF_CORE_READ(file, f_mode) & FMODE_CREATED))
		return 0;
	dentry = BPF_CORE_READ(path, dentry);
	born_add(dentry, BPF_CORE_READ(dentry, d_inode), BPF_CORE_READ(path, mnt));
	return 0;
}

static __always_inline int create_started(struct dentry *dentry)
{
	struct call c = {};

	if (!current_wanted())
		return 0;
	c.dentry = dentry;
	call_start(&creating, &c);
	return 0;
}

static __always_inline int create_returned(long ret)
{
	struct dentry *dentry;
	struct call c;

	if (!call_end(&creating, &c) || ret != 0)
		return 0;
	dentry = c.dentry;	/* a plain copy: CO-RE reads below are of kernel types only */
	born_add(dentry, BPF_CORE_READ(dentry, d_inode), NULL);
	return 0;
}

static __always_inline int unlink_started(struct dentry *dentry)
{
	struct inode *inode;
	struct call c = {};

	if (!current_wanted())
		return 0;
	inode = BPF_CORE_READ(dentry, d_inode);
	if (!inode)
		return 0;
	inode_key(inode, &c.key);
	if (!bpf_map_lookup_elem(&born, &c.key))
		return 0;
	c.dentry = dentry;
	call_start(&unlinking, &c);
	return 0;
}

static __always_inline int unlink_returned(long ret)
{
	struct birth *b;
	struct call c;

	if (!call_end(&unlinking, &c) || ret != 0)
		return 0;
	b = bpf_map_lookup_elem(&born, &c.key);
	if (b)
		report(&c.key, b, c.dentry);
	return 0;
}

SEC("fentry/vfs_open")
int BPF_PROG(vfs_open_fentry, struct path *path, struct file *file)
{
	return open_started(path, file);
}

/* The dentry in slot 1 or 2: both slots are read (they exist in every version) and pinned in registers, so that the
 * compiler cannot turn the choice into a computed context offset, which the verifier refuses. */
static __always_inline void *pick(__u32 slot, __u64 one, __u64 two)
{
	barrier_var(one);
	barrier_var(two);
	return (void *)(slot == 1 ? one : two);
}

SEC("fentry/vfs_create")
int vfs_create_fentry(unsigned long long *ctx)
{
	return create_started(pick(create_dentry_arg, ctx[1], ctx[2]));
}

/* The return value follows the arguments, so its slot depends on their number: one program per layout, user
 * space loads the one that fits (4 arguments before 5.12, 5 since). */
SEC("fexit/vfs_create")
int vfs_create_fexit4(unsigned long long *ctx)
{
	return create_returned((int)ctx[4]);
}

SEC("fexit/vfs_create")
int vfs_create_fexit5(unsigned long long *ctx)
{
	return create_returned((int)ctx[5]);
}

SEC("fentry/vfs_unlink")
int vfs_unlink_fentry(unsigned long long *ctx)
{
	return unlink_started(pick(unlink_dentry_arg, ctx[1], ctx[2]));
}

/* 3 arguments before 5.12 (dir, dentry, delegated inode), 4 since. */
SEC("fexit/vfs_unlink")
int vfs_unlink_fexit3(unsigned long long *ctx)
{
	return unlink_returned((int)ctx[3]);
}

SEC("fexit/vfs_unlink")
int vfs_unlink_fexit4(unsigned long long *ctx)
{
	return unlink_returned((int)ctx[4]);
}

SEC("kprobe/vfs_open")
int BPF_KPROBE(vfs_open_kprobe, struct path *path, struct file *file)
{
	return open_started(path, file);
}

SEC("kprobe/vfs_create")
int BPF_KPROBE(vfs_create_kprobe)
{
	return create_started(pick(create_dentry_arg, PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx)));
}

SEC("kretprobe/vfs_create")
int BPF_KRETPROBE(vfs_create_kretprobe, int ret)
{
	return create_returned(ret);
}

SEC("kprobe/vfs_unlink")
int BPF_KPROBE(vfs_unlink_kprobe)
{
	return unlink_started(pick(unlink_dentry_arg, PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx)));
}

SEC("kretprobe/vfs_unlink")
int BPF_KRETPROBE(vfs_unlink_kretprobe, int ret)
{
	return unlink_returned(ret);
}

/* --- syscall tracepoints --- */

/* The struct file behind descriptor `fd` of the current task, or NULL. */
static __always_inline int sys_open_started(__u64 flags)
{
	struct call c = {};

	if ((flags & O_CREAT) && current_wanted())
		call_start(&creating, &c);
	return 0;
}

static __always_inline int sys_open_returned(long ret)
{
	struct file *file;
	struct call c;

	if (!call_end(&creating, &c) || ret < 0)
		return 0;
	file = fd_file(ret);
	if (!file || !(BPF_CORE_READ(file, f_mode) & FMODE_CREATED))
		return 0;
	born_add(BPF_CORE_READ(file, f_path.dentry), BPF_CORE_READ(file, f_inode), BPF_CORE_READ(file, f_path.mnt));
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_open")
int open_enter(struct syscall_enter_ctx *ctx)
{
	return sys_open_started(ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_enter_openat")
int openat_enter(struct syscall_enter_ctx *ctx)
{
	return sys_open_started(ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_openat2")
int openat2_enter(struct syscall_enter_ctx *ctx)
{
	struct open_how_abi how = {};

	bpf_probe_read_user(&how, sizeof(how), (void *)ctx->args[2]);
	return sys_open_started(how.flags);
}

SEC("tracepoint/syscalls/sys_enter_creat")
int creat_enter(struct syscall_enter_ctx *ctx)
{
	return sys_open_started(O_CREAT);
}

/* One exit program serves every open call: the entry decided whether to follow it. */
SEC("tracepoint/syscalls/sys_exit_openat")
int open_exit(struct syscall_exit_ctx *ctx)
{
	return sys_open_returned(ctx->ret);
}

/* What the search of `born` for an unlinked file knows and finds. */
struct lookup {
	struct dentry *base;	/* the directory a one-component path is relative to */
	__u32 len;		/* bytes of the path, without its NUL */
	__u32 live;		/* 1: before the unlink (a live dentry); 0: after it (a deleted one) */
	__u64 best_ts;
	struct file_key best;
	__u32 found;
	__u32 _pad;
};

/* A kept dentry is live while it holds its inode and is in the dentry hash; an unlink takes the inode away (a
 * negative dentry) or, when the dentry is still in use, unhashes it. */
static __always_inline bool dentry_live(struct dentry *dentry, struct inode *inode)
{
	return BPF_CORE_READ(dentry, d_inode) == inode && BPF_CORE_READ(dentry, d_hash.pprev);
}

/* bpf_for_each_map_elem callback: is kept file `b` the one the path in scratch names? */
static long match_one(struct bpf_map *map, struct file_key *key, struct birth *b, struct lookup *m)
{
	struct dentry *dentry = b->dentry;
	__u32 zero = 0, n, off, j;
	struct scratch *s;

	if (dentry_live(dentry, b->inode) != (bool)m->live)
		return 0;
	n = BPF_CORE_READ(dentry, d_name.len);
	if (n == 0 || n >= NAME_LEN || n > m->len)
		return 0;
	off = m->len - n;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 1;
	if (off > 0) {
		if (s->path[(off - 1) & (PATH_LEN - 1)] != '/')
			return 0;
	} else if (BPF_CORE_READ(dentry, d_parent) != m->base) {
		return 0;
	}
	if (bpf_probe_read_kernel_str(s->name, NAME_LEN, BPF_CORE_READ(dentry, d_name.name)) < 0)
		return 0;
	for (j = 0; j < NAME_LEN; j++) {
		if (j >= n)
			break;
		if (s->name[j] != s->path[(off + j) & (PATH_LEN - 1)])
			return 0;
	}
	if (!m->found || b->ts > m->best_ts) {
		m->found = 1;
		m->best_ts = b->ts;
		m->best = *key;
	}
	return 0;
}

/* Searches `born` for the file that unlink(dfd, path) names, live (before the call) or deleted (after it). Returns
 * false if the path could not be read. */
static __always_inline bool search(struct lookup *m, __s32 dfd, const char *path, bool live)
{
	struct scratch *s;
	__u32 zero = 0;
	long n;

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return false;
	n = bpf_probe_read_user_str(s->path, PATH_LEN, path);
	if (n <= 0)
		return false;
	if (n == 1)
		return true;
	m->len = n - 1;
	m->live = live;
	if (dfd == AT_FDCWD) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		m->base = BPF_CORE_READ(task, fs, pwd.dentry);
	} else {
		struct file *dir = fd_file(dfd);

		if (dir)
			m->base = BPF_CORE_READ(dir, f_path.dentry);
	}
	bpf_for_each_map_elem(&born, match_one, m, 0);
	return true;
}

/* At the start the file is found among the live kept dentries: the dentry cache holds one live dentry per name in
 * a directory, so the match is exact for a one-component path. */
static __always_inline int sys_unlink_started(long dfd, const char *path)
{
	struct lookup m = {};
	struct call c = {};

	if (!current_wanted())
		return 0;
	c.path = path;
	c.dfd = dfd;
	if (!search(&m, dfd, path, true))
		c.found = FOUND_LATER;
	else if (m.found)
		c.found = FOUND_KEY;
	else
		return 0;
	c.key = m.best;
	call_start(&unlinking, &c);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_unlink")
int unlink_enter(struct syscall_enter_ctx *ctx)
{
	return sys_unlink_started(AT_FDCWD, (const char *)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_unlinkat")
int unlinkat_enter(struct syscall_enter_ctx *ctx)
{
	if (ctx->args[2] & AT_REMOVEDIR)
		return 0;
	return sys_unlink_started((__s32)ctx->args[0], (const char *)ctx->args[1]);
}

/* At a successful return, the file found at the start is reported if its dentry is no longer live. Otherwise (a
 * path that could not be read at the start, now in memory since the kernel read it; or a path with directories
 * whose start matched a same-named file elsewhere) the kept dentries no longer live are searched, the youngest
 * match taken. */
SEC("tracepoint/syscalls/sys_exit_unlinkat")
int unlink_exit(struct syscall_exit_ctx *ctx)
{
	struct lookup m = {};
	struct birth *b;
	struct call c;

	if (!call_end(&unlinking, &c) || ctx->ret != 0)
		return 0;
	if (c.found == FOUND_KEY) {
		b = bpf_map_lookup_elem(&born, &c.key);
		if (b && !dentry_live(b->dentry, b->inode)) {
			report(&c.key, b, b->dentry);
			return 0;
		}
		/* Still live: the path had directories and named a same-named file elsewhere. */
	}
	if (!search(&m, c.dfd, c.path, false) || !m.found)
		return 0;
	b = bpf_map_lookup_elem(&born, &m.best);
	if (b)
		report(&m.best, b, b->dentry);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
