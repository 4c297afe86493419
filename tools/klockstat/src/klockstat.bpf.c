// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* klockstat: kernel mutex and rw-semaphore statistics per caller (or per thread with -P): how long tasks waited
 * to take each lock and how long they held it.
 *
 * Two ways to see locks, chosen by the attach ladder:
 * - the lock functions themselves (fentry/fexit, else kprobe/kretprobe): mutex_lock, mutex_lock_interruptible,
 *   mutex_lock_killable, mutex_trylock, down_read*, down_write* and their unlocks. A wait runs from the entry of
 *   the lock function to its return (every acquisition, contended or not, as libbpf-tools counts it), a hold from
 *   that return to the unlock. A failed trylock or an interrupted lock is not counted.
 * - the lock:contention_begin/contention_end tracepoints (tp_btf, raw_tp, classic tracepoint), where the lock
 *   functions cannot be traced: only acquisitions that had to wait are seen, from the first contention_begin (a
 *   mutex's optimistic spin included) to contention_end, and nothing says when the lock is released, so the hold
 *   statistics stay empty. Spinlocks, rwlocks, rt-mutexes and per-cpu rw-semaphores fire these tracepoints too and
 *   are left out by their flags.
 * The caller is found in user space: the first frame of the kernel stack outside the lock functions. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "stacks.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "klockstat.h"

/* -L: only this lock (its kernel address; 0: every lock). */
const volatile __u64 target_lock = 0;
/* -P: statistics per thread, not per caller. */
const volatile bool per_thread = false;

/* lock:contention_begin's flags (include/trace/events/lock.h). */
#define LCB_F_SPIN (1U << 0)
#define LCB_F_READ (1U << 1)
#define LCB_F_WRITE (1U << 2)
#define LCB_F_RT (1U << 3)
#define LCB_F_PERCPU (1U << 4)
#define LCB_F_MUTEX (1U << 5)

/* Locks not followed (in-flight map full) and statistics entries that could not be added. */
__u64 inflight_full = 0;
__u64 stats_full = 0;

struct lock_stat _lock_stat_type = {};

/* One thread and one lock: a task takes a given (non-recursive) lock once at a time. */
struct task_lock {
	__u64 pid_tgid;
	__u64 lock;
};

struct lock_info {
	__s32 stack_id;
	__u32 pad;
	__u64 try_at;
	__u64 acq_at;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, struct task_lock);
	__type(value, struct lock_info);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, __u32);
	__type(value, struct lock_stat);
} stats SEC(".maps");

/* kprobe path: the lock a thread's lock function was called with, for its kretprobe. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, __u32);
	__type(value, __u64);
} args SEC(".maps");

STACK_TRACE_MAP(stackmap);

static const struct lock_stat empty_stat;

static __always_inline bool wanted(void *lock, __u64 pid_tgid)
{
	if (target_lock && target_lock != (__u64)lock)
		return false;
	return current_ids_wanted(pid_tgid);
}

/* A thread starts to take `lock` (at the lock function's entry, or its first contention_begin). */
static __always_inline void lock_try(void *ctx, void *lock, bool keep_first)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_lock tl = { .pid_tgid = pid_tgid, .lock = (__u64)lock };
	struct lock_info li = {};

	if (!wanted(lock, pid_tgid))
		return;
	li.stack_id = per_thread ? -1 : bpf_get_stackid(ctx, &stackmap, 0);
	li.try_at = bpf_ktime_get_ns();
	/* keep_first (tracepoints): a mutex's contention_begin fires again after its optimistic spin, and the wait
	 * began at the first. The lock functions start afresh at each call. */
	if (bpf_map_update_elem(&inflight, &tl, &li, keep_first ? BPF_NOEXIST : BPF_ANY) == -E2BIG)
		__sync_fetch_and_add(&inflight_full, 1);
}

static __always_inline void lock_abort(void *lock)
{
	struct task_lock tl = { .pid_tgid = bpf_get_current_pid_tgid(), .lock = (__u64)lock };

	bpf_map_delete_elem(&inflight, &tl);
}

static __always_inline struct lock_stat *stat_of(struct lock_info *li, __u64 pid_tgid)
{
	__u32 key = per_thread ? (__u32)pid_tgid : (__u32)li->stack_id;
	struct lock_stat *ls;

	ls = bpf_map_lookup_elem(&stats, &key);
	if (ls)
		return ls;
	if (bpf_map_update_elem(&stats, &key, &empty_stat, BPF_NOEXIST) == -E2BIG) {
		__sync_fetch_and_add(&stats_full, 1);
		return NULL;
	}
	ls = bpf_map_lookup_elem(&stats, &key);
	if (ls && per_thread)
		bpf_get_current_comm(ls->comm, TASK_COMM_LEN);
	return ls;
}

/* Adds one wait or hold of `delta` ns. The maximum and who had it are plain stores: two threads of one caller
 * ending at the same moment may leave either's; the count and total are atomic. */
static __always_inline void add_time(struct lock_times *t, __u64 delta, __u64 pid_tgid, void *lock)
{
	__sync_fetch_and_add(&t->count, 1);
	__sync_fetch_and_add(&t->total_ns, delta);
	if (delta > t->max_ns) {
		t->max_ns = delta;
		t->max_id = pid_tgid;
		t->max_lock = (__u64)lock;
		bpf_get_current_comm(t->max_comm, TASK_COMM_LEN);
	}
}

/* The wait is over: count it. With `hold`, the entry stays until the unlock; without, it goes. */
static __always_inline void lock_acquired(void *lock, bool hold)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct task_lock tl = { .pid_tgid = pid_tgid, .lock = (__u64)lock };
	struct lock_stat *ls;
	struct lock_info *li;

	li = bpf_map_lookup_elem(&inflight, &tl);
	if (!li)
		return;
	/* A stack that could not be kept (map full) is counted under its error, shown as a missed stack. */
	ls = stat_of(li, pid_tgid);
	if (!ls)
		goto done;
	add_time(&ls->acq, now - li->try_at, pid_tgid, lock);
	if (hold) {
		li->acq_at = now;
		return;
	}
done:
	bpf_map_delete_elem(&inflight, &tl);
}

static __always_inline void lock_released(void *lock)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct task_lock tl = { .pid_tgid = pid_tgid, .lock = (__u64)lock };
	struct lock_stat *ls;
	struct lock_info *li;

	li = bpf_map_lookup_elem(&inflight, &tl);
	if (!li)
		return;
	if (!li->acq_at)
		goto done;
	ls = stat_of(li, pid_tgid);
	if (!ls)
		goto done;
	add_time(&ls->hld, now - li->acq_at, pid_tgid, lock);
done:
	bpf_map_delete_elem(&inflight, &tl);
}

/* ---- fentry/fexit on the lock functions ---- */

/* A lock function that sleeps until it has the lock (no result): entry and exit. */
#define FENTRY_LOCK(fn)                                                                                            \
	SEC("fentry/" #fn)                                                                                         \
	int BPF_PROG(fn##_entry, void *lock)                                                                       \
	{                                                                                                          \
		lock_try(ctx, lock, false);                                                                               \
		return 0;                                                                                          \
	}                                                                                                          \
	SEC("fexit/" #fn)                                                                                          \
	int BPF_PROG(fn##_exit, void *lock)                                                                        \
	{                                                                                                          \
		lock_acquired(lock, true);                                                                         \
		return 0;                                                                                          \
	}

/* A lock function that may give up (interrupted, killed): 0 means taken. */
#define FENTRY_LOCK_RET(fn)                                                                                        \
	SEC("fentry/" #fn)                                                                                         \
	int BPF_PROG(fn##_entry, void *lock)                                                                       \
	{                                                                                                          \
		lock_try(ctx, lock, false);                                                                               \
		return 0;                                                                                          \
	}                                                                                                          \
	SEC("fexit/" #fn)                                                                                          \
	int BPF_PROG(fn##_exit, void *lock, long ret)                                                              \
	{                                                                                                          \
		if ((int)ret)                                                                                      \
			lock_abort(lock);                                                                          \
		else                                                                                               \
			lock_acquired(lock, true);                                                                 \
		return 0;                                                                                          \
	}

/* A trylock: 1 means taken, with no wait. */
#define FENTRY_TRYLOCK(fn)                                                                                         \
	SEC("fexit/" #fn)                                                                                          \
	int BPF_PROG(fn##_exit, void *lock, long ret)                                                              \
	{                                                                                                          \
		if ((int)ret == 1) {                                                                               \
			lock_try(ctx, lock, false);                                                                       \
			lock_acquired(lock, true);                                                                 \
		}                                                                                                  \
		return 0;                                                                                          \
	}

#define FENTRY_UNLOCK(fn)                                                                                          \
	SEC("fentry/" #fn)                                                                                         \
	int BPF_PROG(fn##_entry, void *lock)                                                                       \
	{                                                                                                          \
		lock_released(lock);                                                                               \
		return 0;                                                                                          \
	}

FENTRY_LOCK(mutex_lock)
FENTRY_LOCK_RET(mutex_lock_interruptible)
FENTRY_LOCK_RET(mutex_lock_killable)
FENTRY_TRYLOCK(mutex_trylock)
FENTRY_UNLOCK(mutex_unlock)
FENTRY_LOCK(down_read)
FENTRY_LOCK_RET(down_read_interruptible)
FENTRY_LOCK_RET(down_read_killable)
FENTRY_TRYLOCK(down_read_trylock)
FENTRY_UNLOCK(up_read)
FENTRY_LOCK(down_write)
FENTRY_LOCK_RET(down_write_killable)
FENTRY_TRYLOCK(down_write_trylock)
FENTRY_UNLOCK(up_write)

/* ---- kprobe/kretprobe on the same functions: the lock is kept per thread from entry to return ---- */

static __always_inline void kprobe_entry(void *ctx, void *lock, bool trylock)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 l = (__u64)lock;

	if (!wanted(lock, bpf_get_current_pid_tgid()))
		return;
	if (bpf_map_update_elem(&args, &tid, &l, BPF_ANY)) {
		__sync_fetch_and_add(&inflight_full, 1);
		return;
	}
	if (!trylock)
		lock_try(ctx, lock, false);
}

/* kind: 0 sleeps until taken, 1 returns 0 when taken, 2 (trylock) returns 1 when taken. */
static __always_inline void kprobe_return(void *ctx, long ret, int kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *l, lock;

	l = bpf_map_lookup_elem(&args, &tid);
	if (!l)
		return;
	lock = *l;
	bpf_map_delete_elem(&args, &tid);
	if (kind == 2) {
		if ((int)ret == 1) {
			lock_try(ctx, (void *)lock, false);
			lock_acquired((void *)lock, true);
		}
	} else if (kind == 1 && (int)ret) {
		lock_abort((void *)lock);
	} else {
		lock_acquired((void *)lock, true);
	}
}

#define KPROBE_LOCK(fn, kind)                                                                                      \
	SEC("kprobe/" #fn)                                                                                         \
	int BPF_KPROBE(fn##_kprobe, void *lock)                                                                    \
	{                                                                                                          \
		kprobe_entry(ctx, lock, kind == 2);                                                                \
		return 0;                                                                                          \
	}                                                                                                          \
	SEC("kretprobe/" #fn)                                                                                      \
	int BPF_KRETPROBE(fn##_kretprobe, long ret)                                                                \
	{                                                                                                          \
		kprobe_return(ctx, ret, kind);                                                                     \
		return 0;                                                                                          \
	}

#define KPROBE_UNLOCK(fn)                                                                                          \
	SEC("kprobe/" #fn)                                                                                         \
	int BPF_KPROBE(fn##_kprobe, void *lock)                                                                    \
	{                                                                                                          \
		lock_released(lock);                                                                               \
		return 0;                                                                                          \
	}

KPROBE_LOCK(mutex_lock, 0)
KPROBE_LOCK(mutex_lock_interruptible, 1)
KPROBE_LOCK(mutex_lock_killable, 1)
KPROBE_LOCK(mutex_trylock, 2)
KPROBE_UNLOCK(mutex_unlock)
KPROBE_LOCK(down_read, 0)
KPROBE_LOCK(down_read_interruptible, 1)
KPROBE_LOCK(down_read_killable, 1)
KPROBE_LOCK(down_read_trylock, 2)
KPROBE_UNLOCK(up_read)
KPROBE_LOCK(down_write, 0)
KPROBE_LOCK(down_write_killable, 1)
KPROBE_LOCK(down_write_trylock, 2)
KPROBE_UNLOCK(up_write)

/* ---- lock:contention_begin/end: waits only ---- */

/* A mutex (its spin included) or a rw-semaphore; not a spinlock, rwlock, rt-mutex or per-cpu rw-semaphore. */
static __always_inline bool sleeping_lock(__u32 flags)
{
	if (flags & LCB_F_MUTEX)
		return !(flags & LCB_F_RT);
	return !(flags & (LCB_F_SPIN | LCB_F_RT | LCB_F_PERCPU)) && (flags & (LCB_F_READ | LCB_F_WRITE));
}

static __always_inline int on_begin(void *ctx, void *lock, __u32 flags)
{
	if (sleeping_lock(flags))
		lock_try(ctx, lock, true);
	return 0;
}

static __always_inline int on_end(void *lock, int ret)
{
	if (ret)
		lock_abort(lock);
	else
		lock_acquired(lock, false);
	return 0;
}

TP_BTF_RAW(contention_begin, contention_begin, void *lock, unsigned int flags)
{
	return on_begin(ctx, lock, flags);
}

TP_BTF_RAW(contention_end, contention_end, void *lock, int ret)
{
	return on_end(lock, ret);
}

/* The classic tracepoints' records (the fields after the 8-byte common header), read as plain structs. */
struct contention_begin_tp {
	__u64 common;
	void *lock_addr;
	unsigned int flags;
};

struct contention_end_tp {
	__u64 common;
	void *lock_addr;
	int ret;
};

SEC("tracepoint/lock/contention_begin")
int contention_begin_tp(struct contention_begin_tp *ctx)
{
	return on_begin(ctx, ctx->lock_addr, ctx->flags);
}

SEC("tracepoint/lock/contention_end")
int contention_end_tp(struct contention_end_tp *ctx)
{
	return on_end(ctx->lock_addr, ctx->ret);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
