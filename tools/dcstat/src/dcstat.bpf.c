// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* dcstat: directory entry cache (dcache) statistics, as counters in a per-CPU array (no events).
 *
 * REFS: calls of lookup_fast, the dcache lookup of one path component during a path walk (BCC's choice).
 * SLOW and MISS: BCC counts the returns of d_lookup (SLOW), and those that found nothing (MISS). Since Linux 4.7
 * the walk's own slow path no longer calls d_lookup: when lookup_fast finds nothing, lookup_slow asks
 * d_alloc_parallel, which either finds the entry after all or hands back a new one marked "in lookup" for the
 * file system to fill (a stat of an uncached name goes that way, and BCC sees none of it). So d_alloc_parallel's
 * returns count too: each as SLOW, and as MISS when its entry is new. open() looks up its last component with
 * d_lookup first and calls d_alloc_parallel only when that found nothing: that one lookup is counted once, by
 * remembering, per thread, the directory and name hash of a d_lookup that found nothing.
 *
 * fentry/fexit, else kprobes/kretprobes (which stash the arguments per thread at entry). User space sums the
 * CPUs and differences the cumulative counts every interval. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "dcstat.h"

/* The in-lookup flag of dentry::d_flags: an enumerator since 6.15, a #define (this value) before. */
#define OLD_DCACHE_PAR_LOOKUP 0x10000000

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, S_MAXSTAT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* A lookup by name in a directory: the directory's dentry and the name's hash. */
struct lookup {
	__u64 parent;
	__u64 hash;
};

/* Per thread: the d_lookup that found nothing, until the next d_alloc_parallel. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct lookup);
} missed SEC(".maps");

/* Per thread, kprobe path only: the arguments of d_lookup or d_alloc_parallel, from entry to return. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct lookup);
} entered SEC(".maps");

static __always_inline void count(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &key);

	if (v)
		*v += 1;
}

static __always_inline bool wanted(void)
{
	return tgid_wanted(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline struct lookup lookup_of(const struct dentry *parent, const struct qstr *name)
{
	struct lookup l = { .parent = (__u64)parent, .hash = BPF_CORE_READ(name, hash) };

	return l;
}

static __always_inline int refs(void)
{
	if (wanted())
		count(S_REFS);
	return 0;
}

/* d_lookup returned `found` for `l`. */
static __always_inline int d_lookup_done(struct lookup *l, const struct dentry *found)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	count(S_SLOW);
	if (!found) {
		count(S_MISS);
		bpf_map_update_elem(&missed, &tid, l, BPF_ANY);
	}
	return 0;
}

/* d_alloc_parallel returned `d` for `l`. */
static __always_inline int d_alloc_parallel_done(struct lookup *l, const struct dentry *d)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct lookup *before = bpf_map_lookup_elem(&missed, &tid);
	__u32 in_lookup = OLD_DCACHE_PAR_LOOKUP;

	if (before) {
		bool same = before->parent == l->parent && before->hash == l->hash;

		bpf_map_delete_elem(&missed, &tid);
		if (same)
			return 0; /* open's d_lookup counted it already */
	}
	if ((unsigned long)d >= (unsigned long)-4095)
		return 0; /* an error, not a lookup */
	count(S_SLOW);
	if (bpf_core_enum_value_exists(enum dentry_flags, DCACHE_PAR_LOOKUP))
		in_lookup = bpf_core_enum_value(enum dentry_flags, DCACHE_PAR_LOOKUP);
	if (BPF_CORE_READ(d, d_flags) & in_lookup)
		count(S_MISS);
	return 0;
}

/* --- fentry/fexit --- */

SEC("fentry/lookup_fast")
int BPF_PROG(lookup_fast_fentry)
{
	return refs();
}

/* The lookup of `name` under `parent`, in `l`, if -p wants the current process. */
static __always_inline bool lookup_wanted(struct lookup *l, const struct dentry *parent, const struct qstr *name)
{
	if (!wanted())
		return false;
	*l = lookup_of(parent, name);
	return true;
}

SEC("fexit/d_lookup")
int BPF_PROG(d_lookup_fexit, const struct dentry *parent, const struct qstr *name, struct dentry *ret)
{
	struct lookup l;

	return lookup_wanted(&l, parent, name) ? d_lookup_done(&l, ret) : 0;
}

/* d_alloc_parallel(parent, name, wq) since 4.7: a kernel that drops its wait queue argument fails this program's
 * load (the return value is read after three arguments) and falls back to kprobes. The return value is a named
 * argument on purpose: choosing its slot at run time let clang compute the context offset, which the verifier
 * refuses. */
SEC("fexit/d_alloc_parallel")
int BPF_PROG(d_alloc_parallel_fexit, struct dentry *parent, const struct qstr *name, void *wq, struct dentry *ret)
{
	struct lookup l;

	return lookup_wanted(&l, parent, name) ? d_alloc_parallel_done(&l, ret) : 0;
}

/* --- kprobes --- */

static __always_inline int enter(const struct dentry *parent, const struct qstr *name)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct lookup l;

	if (lookup_wanted(&l, parent, name))
		bpf_map_update_elem(&entered, &tid, &l, BPF_ANY);
	return 0;
}

/* The lookup enter() kept for this thread, taken out of `entered` into `l`; false if there is none. */
static __always_inline bool entered_take(struct lookup *l)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct lookup *e = bpf_map_lookup_elem(&entered, &tid);

	if (!e)
		return false;
	*l = *e;
	bpf_map_delete_elem(&entered, &tid);
	return true;
}

SEC("kprobe/lookup_fast")
int BPF_KPROBE(lookup_fast_kprobe)
{
	return refs();
}

SEC("kprobe/d_lookup")
int BPF_KPROBE(d_lookup_kprobe, const struct dentry *parent, const struct qstr *name)
{
	return enter(parent, name);
}

SEC("kretprobe/d_lookup")
int BPF_KRETPROBE(d_lookup_kretprobe, struct dentry *ret)
{
	struct lookup l;

	return entered_take(&l) ? d_lookup_done(&l, ret) : 0;
}

SEC("kprobe/d_alloc_parallel")
int BPF_KPROBE(d_alloc_parallel_kprobe, struct dentry *parent, const struct qstr *name)
{
	return enter(parent, name);
}

SEC("kretprobe/d_alloc_parallel")
int BPF_KRETPROBE(d_alloc_parallel_kretprobe, struct dentry *ret)
{
	struct lookup l;

	return entered_take(&l) ? d_alloc_parallel_done(&l, ret) : 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
