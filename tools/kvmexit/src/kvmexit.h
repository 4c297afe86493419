// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What kvmexit.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and every struct as bpf::types::NAME. */
#ifndef __KVMEXIT_H
#define __KVMEXIT_H

/* (thread, vendor, exit reason) triples kept; exits of more are counted in counts_full and reported. */
#define MAX_KEYS 10240
/* Threads -T (or -t, or -v's thread) may name. */
#define MAX_TIDS 1024

/* The kvm_exit tracepoint's `isa` field: which vendor module's exit reasons the event carries. */
#define ISA_VMX 1
#define ISA_SVM 2

struct exit_key {
	__u32 tgid;
	__u32 tid;
	__u32 isa;
	__u32 reason;
};

#endif
