// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* template: a log2 histogram of the bytes each read() returned, per process name.
 *
 * One classic tracepoint, syscalls:sys_exit_read, read through the plain context struct of syscall_tp.bpf.h (no
 * CO-RE relocation, so nothing to search in the kernel's BTF at start-up). The -p filter is filter.bpf.h's
 * target_tgid, set before load (0: off). Histograms are cumulative and never deleted; user space prints the
 * difference between two reads, so no read is lost between a read and a clear. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "bits.bpf.h"
#include "filter.bpf.h"
#include "maps.bpf.h"
#include "syscall_tp.bpf.h"
#include "template.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NAMES);
	__type(key, struct name_key);
	__type(value, struct hist);
} hists SEC(".maps");

/* Reads not counted because `hists` was full (user space reports them). */
__u64 hists_full = 0;

static const struct hist empty_hist;

SEC("tracepoint/syscalls/sys_exit_read")
int read_exit(struct syscall_exit_ctx *ctx)
{
	struct name_key key = {};
	struct hist *hist;
	__u64 slot;

	if (ctx->ret < 0 || !current_ids_wanted(bpf_get_current_pid_tgid()))
		return 0;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	hist = bpf_map_lookup_or_try_init(&hists, &key, &empty_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		return 0;
	}
	slot = log2l(ctx->ret);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->count, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
