// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The floor of each attach mechanism: an empty program (return 0) per kind of hook, for `make bench`'s
 * per-program figure (bench/progcost.py). bench/floor.py compiles this file, loads the programs of the kinds a
 * measurement asks for and attaches them, so the kernel's own clock (kernel.bpf_stats_enabled) times what a
 * program that does nothing costs on that hook. No vmlinux.h: none of them reads anything. */
#define SEC(name) __attribute__((section(name), used))

SEC("tp_btf/sys_enter") int floor_tp_btf(void *ctx) { return 0; }
SEC("raw_tp/sys_enter") int floor_raw_tp(void *ctx) { return 0; }
SEC("tracepoint/raw_syscalls/sys_enter") int floor_tracepoint(void *ctx) { return 0; }
/* bench/floor.py attaches these two to the C library's write() and the perf_event one to a CPU clock. */
SEC("uprobe") int floor_uprobe(void *ctx) { return 0; }
SEC("uretprobe") int floor_uretprobe(void *ctx) { return 0; }
SEC("perf_event") int floor_perf_event(void *ctx) { return 0; }

char LICENSE[] SEC("license") = "Dual BSD/GPL";
