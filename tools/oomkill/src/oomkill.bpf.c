// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* oomkill: one record per OOM kill, from the classic tracepoint oom:mark_victim. It fires in the task that ran the
 * OOM killer, once the victim has been chosen and sent SIGKILL: `current` is the trigger (the task whose allocation
 * failed), the tracepoint's fields describe the victim.
 *
 * The record's layout changed over time: 5.x and 6.1 carry only the victim's pid; 6.8 added its name (a
 * __data_loc string), its memory (total_vm, anon/file/shmem rss, page tables, in kB) and oom_score_adj; 6.9 its
 * uid. Each is read only where this kernel's struct trace_event_raw_mark_victim has it (CO-RE existence checks),
 * and event.have says which were. Failed ring-buffer reservations are counted in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "ringbuf.bpf.h"
#include "oomkill.h"

__u64 lost = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

SEC("tracepoint/oom/mark_victim")
int mark_victim(struct trace_event_raw_mark_victim *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;
	__u32 loc;

	e = ringbuf_reserve_zeroed(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->fpid = id >> 32;
	e->ftid = (__u32)id;
	e->tpid = BPF_CORE_READ(ctx, pid);
	bpf_get_current_comm(e->fcomm, sizeof(e->fcomm));
	if (bpf_core_field_exists(ctx->__data_loc_comm)) {
		loc = BPF_CORE_READ(ctx, __data_loc_comm);
		bpf_probe_read_kernel_str(e->tcomm, sizeof(e->tcomm), (void *)ctx + (loc & 0xffff));
		e->have |= HAVE_COMM;
	} else if (e->tpid == e->ftid) {
		/* The trigger chose itself: its name is the victim's. */
		bpf_get_current_comm(e->tcomm, sizeof(e->tcomm));
		e->have |= HAVE_COMM;
	}
	if (bpf_core_field_exists(ctx->anon_rss)) {
		e->total_vm_kb = BPF_CORE_READ(ctx, total_vm);
		e->anon_rss_kb = BPF_CORE_READ(ctx, anon_rss);
		e->file_rss_kb = BPF_CORE_READ(ctx, file_rss);
		e->shmem_rss_kb = BPF_CORE_READ(ctx, shmem_rss);
		e->pgtables_kb = BPF_CORE_READ(ctx, pgtables);
		e->oom_score_adj = BPF_CORE_READ(ctx, oom_score_adj);
		e->have |= HAVE_MEM;
	}
	if (bpf_core_field_exists(ctx->uid)) {
		e->uid = BPF_CORE_READ(ctx, uid);
		e->have |= HAVE_UID;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
