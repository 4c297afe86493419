// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* runqlen: run queue length sampled by a perf event on each CPU (99 Hz), as in-kernel linear histograms per CPU.
 *
 * The length is the CPU's run queue's nr_running (tasks of every scheduling class, queued or running) minus the
 * one running, reached from the current task (se.cfs_rq->rq) with CO-RE reads. BCC and libbpf-tools read the
 * current task's se.cfs_rq->nr_running instead (renamed nr_queued in 6.14), which counts only its own cgroup's
 * CFS queue, and which this host's verifier rejects. (The per-CPU `runqueues` variable would be simpler, but
 * its address is not in kallsyms without CONFIG_KALLSYMS_ALL.) Histograms are cumulative and never cleared, so reading them
 * at an interval loses no sample. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "runqlen.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* Makes the struct visible to the skeleton's generated `types` module. */
struct hist _hist_type = {};

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct task_struct *task = (void *)bpf_get_current_task();
	struct hist *hist;
	__u64 len;

	/* The current task's scheduling entity's queue leads to the CPU's run queue (every task has one, the idle
	 * task included). */
	len = BPF_CORE_READ(task, se.cfs_rq, rq, nr_running);
	/* Less the running task, if any: 0 is an idle CPU or one running task with none waiting. */
	if (len > 0)
		len--;
	if (len >= MAX_SLOTS)
		len = MAX_SLOTS - 1;
	hist = bpf_map_lookup_elem(&hists, &cpu);
	if (!hist)
		return 0;
	__sync_fetch_and_add(&hist->slots[len], 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
