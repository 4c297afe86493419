// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* bashreadline: one record per line bash reads interactively, from a uretprobe on readline (or on
 * readline_internal_teardown, which returns the same line, where the file defines it, as BCC does) in /bin/bash
 * or in libreadline: one uretprobe_multi link of one offset on 6.6+, else a classic uretprobe.
 *
 * The probe is on a file, so it fires in every process that maps it; only tasks named "bash" are reported, as in
 * BCC (other programs linked with libreadline, or a script interpreter's own readline use, are not). A NULL
 * return (end of input) is no line. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "ringbuf.bpf.h"
#include "bashreadline.h"

/* Lines not reported because the ring buffer was full. */
__u64 lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

static __always_inline int on_return(const char *line)
{
	char comm[TASK_COMM_LEN];
	__u64 id;
	struct event *e;
	long len;
	char next = 0;

	if (!line)
		return 0;
	bpf_get_current_comm(comm, sizeof(comm));
	if (comm[0] != 'b' || comm[1] != 'a' || comm[2] != 's' || comm[3] != 'h' || comm[4] != 0)
		return 0;
	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	id = bpf_get_current_pid_tgid();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	__builtin_memcpy(e->comm, comm, sizeof(comm));
	len = bpf_probe_read_user_str(e->line, sizeof(e->line), line);
	if (len <= 0) {
		/* Not readable (not expected: bash has just written it): no line to report. */
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	e->len = len - 1;
	e->truncated = len == sizeof(e->line) && !bpf_probe_read_user(&next, 1, line + MAX_LINE - 1) && next;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(readline_return, const char *line)
{
	return on_return(line);
}

SEC("uretprobe.multi")
int BPF_URETPROBE(readline_return_multi, const char *line)
{
	return on_return(line);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
