// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* killsnoop: one record per kill, tkill or tgkill call, with its return value, from the syscalls tracepoints.
 * The whole kernel side is bpf/include/killcalls.bpf.h, which sigsnoop -k uses too: the programs, the record,
 * the ring buffer and the sender (-p), target (-T), signal (-s) and failed-only (-x) filters. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include "killcalls.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
