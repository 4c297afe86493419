// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Trial programs for `corebpf-tools features`: one tiny program per attach mechanism, each loaded and attached
// on its own to a target every kernel has, then detached. Whether the kernel takes it is the answer.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

__u64 cookie_seen = 0;

SEC("tp_btf/sched_process_fork")
int BPF_PROG(probe_tp_btf) { return 0; }

SEC("raw_tp/sched_process_fork")
int probe_raw_tp(void *ctx) { return 0; }

SEC("tracepoint/sched/sched_process_fork")
int probe_tracepoint(void *ctx) { return 0; }

SEC("fentry/vfs_read")
int BPF_PROG(probe_fentry) { return 0; }

SEC("kprobe/vfs_read")
int BPF_KPROBE(probe_kprobe) { return 0; }

SEC("kprobe.multi")
int probe_kprobe_multi(struct pt_regs *ctx) { return 0; }

SEC("uprobe")
int BPF_UPROBE(probe_uprobe) { return 0; }

SEC("uprobe.multi")
int probe_uprobe_multi(struct pt_regs *ctx) { return 0; }

SEC("uprobe")
int BPF_UPROBE(probe_cookie)
{
	cookie_seen = bpf_get_attach_cookie(ctx);
	return 0;
}

SEC("perf_event")
int probe_perf_event(void *ctx) { return 0; }
