// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* gethostlatency: latency of the resolver calls getaddrinfo, gethostbyname, gethostbyname2 (and their _r forms),
 * from uprobes on entry and uretprobes on return, one ring-buffer record per completed call.
 *
 * A call is recorded per thread. glibc's gethostbyname calls gethostbyname_r (and gethostbyname2 calls
 * gethostbyname2_r) through the same exported address, so a thread can be inside two traced functions at once;
 * only the outermost call is reported. Which call a return belongs to is told by the stack pointer: a nested call
 * enters with a lower stack pointer than the call around it, and only the outermost call's return brings the stack
 * pointer back above (x86) or to (arm64) its entry value. A record left behind by a call whose return was never
 * seen (a longjmp out of the resolver) is replaced by the thread's next call from the same or a shallower stack
 * depth.
 *
 * The name is read at entry; a BPF program cannot fault a page in, so when the name's page is not yet in memory
 * (a constant name in a process's read-only data, on its first lookup) the read fails, and it is read again at
 * return, when the resolver has touched it. Programs come in two sets: uprobe.multi (one link for every entry,
 * the function as the BPF cookie, one for every return; 6.6+), else a uprobe per function. */
/* Only struct pt_regs is read, through PT_REGS_*(): its layout is the architecture's ABI, so no access needs
 * CO-RE, and without a CO-RE relocation libbpf need not read the kernel's BTF (a third of the start-up). */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "filter.bpf.h"
#include "ringbuf.bpf.h"
#include "gethostlatency.h"

#define MAX_CALLS 10240


/* Completed calls dropped because the ring buffer was full. */
__u64 lost = 0;
/* Calls not timed because MAX_CALLS threads were already inside a resolver call. */
__u64 untimed = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_CALLS);
	__type(key, __u32);
	__type(value, struct call);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

static const struct call zero_call;

/* Makes the record type visible to the skeleton's generated `types` module. */
struct call _call_type = {};

/* Whether a return at stack pointer `sp` ends the call that entered at `entry_sp` (and not one nested in it). */
static __always_inline bool returns_from(__u64 sp, __u64 entry_sp)
{
#if defined(__TARGET_ARCH_x86)
	/* `ret` popped the return address that was on top of the stack at entry. */
	return sp > entry_sp;
#else
	/* The return address was in a register: the stack pointer is back to its entry value. */
	return sp >= entry_sp;
#endif
}

/* Reads the name at `addr` into the call; true if it could be read. */
static __always_inline bool read_host(struct call *call, const char *addr)
{
	long len;
	char last = 0;

	len = bpf_probe_read_user_str(&call->host, sizeof(call->host), addr);
	if (len <= 0) {
		call->host[0] = 0;
		return false;
	}
	/* A full buffer holds HOST_LEN - 1 characters: the name was longer if the next one is not its end. */
	if (len == sizeof(call->host) && !bpf_probe_read_user(&last, 1, addr + HOST_LEN - 1) && last)
		call->truncated = 1;
	return true;
}

static __always_inline int on_entry(struct pt_regs *ctx, __u32 func)
{
	const char *host = (const char *)PT_REGS_PARM1(ctx);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 sp = PT_REGS_SP(ctx);
	struct call *call;

	if (!host)
		return 0;
	if (!tgid_wanted(pid))
		return 0;

	call = bpf_map_lookup_elem(&starts, &tid);
	/* Called from inside a traced call of this thread: that outer call is the one reported. */
	if (call && sp < call->entry_sp)
		return 0;
	if (bpf_map_update_elem(&starts, &tid, &zero_call, BPF_ANY)) {
		__sync_fetch_and_add(&untimed, 1);
		return 0;
	}
	call = bpf_map_lookup_elem(&starts, &tid);
	if (!call)
		return 0;

	call->entry_sp = sp;
	call->pid = pid;
	call->tid = tid;
	call->func = func;
	call->host_addr = (__u64)host;
	bpf_get_current_comm(&call->comm, sizeof(call->comm));
	call->host_unread = !read_host(call, host);
	call->ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_return(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call *call;

	call = bpf_map_lookup_elem(&starts, &tid);
	if (!call)
		return 0;
	if (!returns_from(PT_REGS_SP(ctx), call->entry_sp))
		return 0;
	call->ts = bpf_ktime_get_ns() - call->ts;
	/* The resolver has read the name by now: its page is in memory. */
	if (call->host_unread && read_host(call, (const char *)call->host_addr))
		call->host_unread = 0;
	ringbuf_output(&events, call, sizeof(*call), &lost);
	bpf_map_delete_elem(&starts, &tid);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(getaddrinfo_entry)
{
	return on_entry(ctx, FUNC_GETADDRINFO);
}

SEC("uprobe")
int BPF_KPROBE(gethostbyname_entry)
{
	return on_entry(ctx, FUNC_GETHOSTBYNAME);
}

SEC("uprobe")
int BPF_KPROBE(gethostbyname2_entry)
{
	return on_entry(ctx, FUNC_GETHOSTBYNAME2);
}

SEC("uprobe")
int BPF_KPROBE(gethostbyname_r_entry)
{
	return on_entry(ctx, FUNC_GETHOSTBYNAME_R);
}

SEC("uprobe")
int BPF_KPROBE(gethostbyname2_r_entry)
{
	return on_entry(ctx, FUNC_GETHOSTBYNAME2_R);
}

SEC("uretprobe")
int BPF_KRETPROBE(resolver_return)
{
	return on_return(ctx);
}

/* uprobe_multi: one link for every entry, the function (enum resolver_func) as each one's cookie. */
SEC("uprobe.multi")
int BPF_KPROBE(resolver_entry_multi)
{
	return on_entry(ctx, (__u32)bpf_get_attach_cookie(ctx));
}

SEC("uretprobe.multi")
int BPF_KRETPROBE(resolver_return_multi)
{
	return on_return(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
