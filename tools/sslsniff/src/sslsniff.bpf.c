// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* sslsniff: the plaintext a process hands to a TLS library or gets back from it, from a uprobe on entry (which
 * keeps the buffer's address per thread) and a uretprobe on return (which copies what the call read or wrote).
 *
 * The functions: OpenSSL's SSL_read/SSL_write (the byte count is the return value) and SSL_read_ex/SSL_write_ex
 * (1 on success, the count stored through the fourth argument, kept at entry), GnuTLS's
 * gnutls_record_recv/send and NSPR's PR_Read/PR_Recv/PR_Write/PR_Send (the count is the return value), and with
 * --handshake OpenSSL's SSL_do_handshake (timed only). Which return program runs tells what a call was.
 *
 * The record goes out through a per-CPU scratch slot: a header (struct ssl_event) followed by up to max_buf bytes;
 * user space sizes the slot to exactly that before loading, and the verifier knows max_buf (read-only data), so the
 * copy is bounded by the slot. The ring buffer gets the header and the bytes captured only. Programs come in two
 * sets: uprobe.multi (6.6+) and classic uprobes; each is attached once per function. */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "sslsniff.h"

/* Bytes of plaintext captured per call (--max-buffer-size). */
const volatile __u32 max_buf = 8192;
/* -c COMM: only tasks of exactly this name. */
const volatile bool filter_comm = false;
const volatile char target_comm[TASK_COMM_LEN] = {};

/* Records not sent because the ring buffer was full. */
__u64 lost = 0;
/* Calls not followed because MAX_CALLS threads were already inside traced calls. */
__u64 untracked = 0;

/* A call in progress, per thread. */
struct call {
	__u64 buf;		/* the caller's buffer */
	__u64 count_ptr;	/* _ex functions: where the library writes the count */
	__u64 ts;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_CALLS);
	__type(key, __u32);
	__type(value, struct call);
} calls SEC(".maps");

/* Handshakes in progress, per thread: their start time. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_CALLS);
	__type(key, __u32);
	__type(value, __u64);
} handshakes SEC(".maps");

/* One slot per CPU, sizeof(struct ssl_event) + max_buf bytes each (value and entry counts set by user space, so
 * no BTF type: its size would not match). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct ssl_event));
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Makes the record type visible to the skeleton's generated `types` module. */
struct ssl_event _ssl_event_type = {};

static __always_inline bool comm_wanted(const char *comm)
{
	if (!filter_comm)
		return true;
	for (int i = 0; i < TASK_COMM_LEN; i++) {
		if (comm[i] != target_comm[i])
			return false;
		if (!comm[i])
			break;
	}
	return true;
}

/* The current task passes -p, -u and -c. */
static __always_inline bool wanted(__u64 pid_tgid)
{
	char comm[TASK_COMM_LEN];

	if (!tgid_wanted(pid_tgid >> 32) || !current_uid_wanted())
		return false;
	if (filter_comm) {
		bpf_get_current_comm(comm, sizeof(comm));
		return comm_wanted(comm);
	}
	return true;
}

static __always_inline int on_entry(const void *buf, const void *count_ptr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct call call = {};

	if (!wanted(pid_tgid))
		return 0;
	call.buf = (__u64)buf;
	call.count_ptr = (__u64)count_ptr;
	call.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&calls, &tid, &call, BPF_ANY))
		__sync_fetch_and_add(&untracked, 1);
	return 0;
}

/* Fills the header of the CPU's scratch slot; NULL if there is none. */
static __always_inline struct ssl_event *start_event(__u64 pid_tgid, __u64 now, __u64 start, __u32 rw)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct ssl_event *e = bpf_map_lookup_elem(&scratch, &cpu);

	if (!e)
		return NULL;
	e->timestamp_ns = now;
	e->delta_ns = now - start;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->len = 0;
	e->captured = 0;
	e->buf_filled = 0;
	e->rw = rw;
	e->_pad = 0;
	bpf_get_current_comm(&e->comm, sizeof(e->comm));
	return e;
}

/* A read or write returned `ret`: 1 and the count behind count_ptr for the _ex functions, else the count. */
static __always_inline int on_return(long ret, __u32 rw, bool ex)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	__u64 now = bpf_ktime_get_ns();
	struct ssl_event *e;
	struct call *call;
	__u64 count = 0;
	__u64 copy;

	call = bpf_map_lookup_elem(&calls, &tid);
	if (!call)
		return 0;
	if (ex) {
		if ((int)ret != 1 || bpf_probe_read_user(&count, sizeof(count), (const void *)call->count_ptr))
			goto done;
	} else {
		if ((int)ret <= 0)
			goto done;
		count = (__u32)(int)ret;
	}
	if (count == 0 || count > 0x7fffffff)
		goto done;
	e = start_event(pid_tgid, now, call->ts, rw);
	if (!e)
		goto done;
	e->len = count;
	/* 64-bit, so that the bound checked is the very register passed on (no zero-extended copy of it). */
	copy = count;
	if (copy > (__u64)max_buf)
		copy = max_buf;
	if (!bpf_probe_read_user((void *)(e + 1), copy, (const void *)call->buf)) {
		e->buf_filled = 1;
		e->captured = copy;
	} else {
		copy = 0;
	}
	ringbuf_output(&events, e, sizeof(*e) + copy, &lost);
done:
	bpf_map_delete_elem(&calls, &tid);
	return 0;
}

static __always_inline int on_handshake_entry(void)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	__u64 ts;

	if (!wanted(pid_tgid))
		return 0;
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&handshakes, &tid, &ts, BPF_ANY))
		__sync_fetch_and_add(&untracked, 1);
	return 0;
}

static __always_inline int on_handshake_return(long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	__u64 now = bpf_ktime_get_ns();
	struct ssl_event *e;
	__u64 *start;

	start = bpf_map_lookup_elem(&handshakes, &tid);
	if (!start)
		return 0;
	/* A handshake that failed or must be called again (non-blocking I/O) is not reported. */
	if ((int)ret > 0) {
		e = start_event(pid_tgid, now, *start, RW_HANDSHAKE);
		if (e)
			ringbuf_output(&events, e, sizeof(*e), &lost);
	}
	bpf_map_delete_elem(&handshakes, &tid);
	return 0;
}

/* Each program twice: a classic uprobe and a uprobe_multi one. */
#define ENTRY(name, body)                                                                                          \
	SEC("uprobe") int BPF_KPROBE(name) { return body; }                                                        \
	SEC("uprobe.multi") int BPF_KPROBE(name##_multi) { return body; }
#define RETURN(name, body)                                                                                         \
	SEC("uretprobe") int BPF_KRETPROBE(name, long ret) { return body; }                                        \
	SEC("uretprobe.multi") int BPF_KRETPROBE(name##_multi, long ret) { return body; }

/* (ctx, buf, count[, count_ptr]): the buffer is the second argument of every traced function. */
ENTRY(rw_enter, on_entry((const void *)PT_REGS_PARM2(ctx), NULL))
ENTRY(rw_ex_enter, on_entry((const void *)PT_REGS_PARM2(ctx), (const void *)PT_REGS_PARM4(ctx)))
RETURN(read_exit, on_return(ret, RW_READ, false))
RETURN(write_exit, on_return(ret, RW_WRITE, false))
RETURN(read_ex_exit, on_return(ret, RW_READ, true))
RETURN(write_ex_exit, on_return(ret, RW_WRITE, true))
ENTRY(handshake_enter, on_handshake_entry())
RETURN(handshake_exit, on_handshake_return(ret))

char LICENSE[] SEC("license") = "Dual BSD/GPL";
