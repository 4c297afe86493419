// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* kvmexit: counts KVM's VM exits per thread, vendor (VMX or SVM) and exit reason, at the kvm:kvm_exit tracepoint.
 *
 * Only the classic tracepoint carries the exit reason: the raw tracepoint's arguments are the vCPU and the vendor
 * (`isa`), and the reason is computed inside the event's assignment, so tp_btf and raw_tp would have to repeat
 * that vendor code. Its record is read through a plain struct: the fields used (exit_reason at 8, isa at 24) sit
 * at the same offsets from 5.10 to 6.18. Filters: -p is filter.bpf.h's target_tgid; -t, -T and -v's thread are
 * the keys of `tids`, filled before attaching, when filter_tids is set. Counts are cumulative; user space reads
 * them once, at the end. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "kvmexit.h"

/* The kvm:kvm_exit record (/sys/kernel/tracing/events/kvm/kvm_exit/format), up to the fields read. */
struct kvm_exit_record {
	__u64 common;
	__u32 exit_reason;
	__u32 pad;
	__u64 guest_rip;
	__u32 isa;
};

const volatile bool filter_tids = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TIDS);
	__type(key, __u32);
	__type(value, __u8);
} tids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, struct exit_key);
	__type(value, __u64);
} counts SEC(".maps");

/* Exits not counted because `counts` was full (user space reports them). */
__u64 counts_full = 0;

static const __u64 zero;

SEC("tracepoint/kvm/kvm_exit")
int kvm_exit(struct kvm_exit_record *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct exit_key key = {};
	__u64 *count;

	key.tgid = pid_tgid >> 32;
	key.tid = (__u32)pid_tgid;
	if (!tgid_wanted(key.tgid))
		return 0;
	if (filter_tids && !bpf_map_lookup_elem(&tids, &key.tid))
		return 0;
	key.isa = ctx->isa;
	key.reason = ctx->exit_reason;
	count = bpf_map_lookup_or_try_init(&counts, &key, &zero);
	if (!count) {
		__sync_fetch_and_add(&counts_full, 1);
		return 0;
	}
	__sync_fetch_and_add(count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
