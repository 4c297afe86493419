// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The context of the syscalls:sys_enter_* and sys_exit_* tracepoints, and struct open_how, declared without CO-RE.
 *
 * Every syscall tracepoint has the same layout (see any events/syscalls/.../format file): the 8-byte common
 * header, the syscall number at offset 8, then the six argument words from offset 16 (enter) or the return value
 * at offset 16 (exit). It is the tracepoints' ABI, unchanged since syscall tracepoints began (2.6.33), and
 * struct open_how is UAPI (openat2, 5.6). vmlinux.h's trace_event_raw_sys_enter/exit and open_how carry
 * preserve_access_index, so each would cost every start-up one more search of the whole kernel BTF by libbpf's
 * CO-RE relocation, for offsets that cannot change; these plain structs cost none. */
#ifndef __COREBPF_SYSCALL_TP_BPF_H
#define __COREBPF_SYSCALL_TP_BPF_H

#include <vmlinux.h>

struct syscall_enter_ctx {
	__u64 common;		/* common_type, common_flags, common_preempt_count, common_pid */
	long id;		/* __syscall_nr (an int, padded) */
	unsigned long args[6];
};

struct syscall_exit_ctx {
	__u64 common;
	long id;
	long ret;
};

struct open_how_abi {
	__u64 flags;
	__u64 mode;
	__u64 resolve;
};

#endif /* __COREBPF_SYSCALL_TP_BPF_H */
