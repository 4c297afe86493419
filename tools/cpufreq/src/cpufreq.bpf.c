// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* cpufreq: the frequency each CPU runs at when it is sampled, as linear histograms system-wide and per process
 * name.
 *
 * `freqs_mhz` holds each CPU's current frequency: user space fills it from the cpufreq driver's scaling_cur_freq
 * before attaching, and the power:cpu_frequency tracepoint (tp_btf, else raw_tp) keeps it current as the driver
 * changes it. A perf event per CPU (the software cpu-clock, at -f Hz) runs `do_sample`, which adds the sampled
 * CPU's frequency to the system-wide histogram and, unless the CPU is idle, to the running process name's one.
 * Histograms are cumulative and read when the run ends (or at each Prometheus scrape). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "tp_btf_raw.bpf.h"
#include "filter.bpf.h"
#include "cpufreq.h"

CGROUP_FILTER;

__u32 freqs_mhz[MAX_CPU_NR] = {};
struct hist syswide = {};

/* Samples not counted per process because the hists map was full. */
__u64 hists_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, struct hkey);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist zero;

/* `cpu` as an index into freqs_mhz that the verifier sees is in bounds: the callers have checked it already, and the
 * mask in assembly is kept where the compiler would drop a C one as redundant. */
static __always_inline __u32 cpu_index(__u32 cpu)
{
	asm volatile("%0 &= %1" : "+r"(cpu) : "i"(MAX_CPU_NR - 1));
	return cpu;
}

/* Makes the structs visible to the skeleton's generated `types` module. */
struct hkey _hkey_type = {};

TP_BTF_RAW(cpu_frequency, cpu_frequency, unsigned int state, unsigned int cpu_id)
{
	/* The driver's change applies to the CPU whatever task runs there: not filtered by cgroup. */
	if (cpu_id >= MAX_CPU_NR)
		return 0;
	freqs_mhz[cpu_index(cpu_id)] = state / 1000;
	return 0;
}

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id(), pid = (__u32)bpf_get_current_pid_tgid();
	__u64 freq_mhz, slot;
	struct hkey key = {};
	struct hist *hist;

	if (!cgroup_wanted())
		return 0;
	if (cpu >= MAX_CPU_NR)
		return 0;
	freq_mhz = freqs_mhz[cpu_index(cpu)];
	if (!freq_mhz)
		return 0;
	slot = freq_mhz / HIST_STEP_SIZE;
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&syswide.slots[slot], 1);
	__sync_fetch_and_add(&syswide.sum_mhz, freq_mhz);
	if (!pid)
		return 0;
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	hist = bpf_map_lookup_elem(&hists, &key);
	if (!hist) {
		bpf_map_update_elem(&hists, &key, &zero, BPF_NOEXIST);
		hist = bpf_map_lookup_elem(&hists, &key);
		if (!hist) {
			__sync_fetch_and_add(&hists_full, 1);
			return 0;
		}
	}
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->sum_mhz, freq_mhz);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
