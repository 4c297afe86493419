// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What differs between the architectures the tools are built for (x86-64 and arm64), for the programs that read a
 * system call's saved registers (raw_syscalls:sys_exit, whose only arguments are the registers and the return
 * value) or a uprobe's. The build helper defines __TARGET_ARCH_x86 or __TARGET_ARCH_arm64 from Cargo's target.
 *
 * - syscall_nr_of(regs): the number of the system call the task entered; x86 keeps it in orig_ax, arm64 in its
 *   own syscallno field of pt_regs (SYSCALL_NR_FIELD); tp_syscall_nr(regs) reads it from a tracepoint's
 *   argument with TP_READ (tp_btf_raw.bpf.h).
 * - tp_syscall_arg(regs, n): argument n (0-5) of the system call, from raw_syscalls:sys_enter's registers with
 *   TP_READ: x86 passes them in di, si, dx, r10, r8, r9; arm64 in x0-x5 (x0 is overwritten by the return value,
 *   so only at the entry).
 * - compat_regs(regs): the task runs 32-bit code (its numbers name other calls): on x86 its code segment is not
 *   the 64-bit one (__USER_CS, 0x33); on arm64 the saved PSTATE has the AArch32 bit (PSR_MODE32_BIT, 0x10).
 *   tp_compat_regs(regs) asks the same of a tracepoint's argument with TP_READ.
 * - entry_caller(regs): at a user function's first instruction (a uprobe on its entry), the return address into
 *   its caller. The function has not saved its frame record yet, so the kernel's frame-pointer walk of the user
 *   stack goes from the function straight to its caller's caller: arm64's call leaves the address in the link
 *   register (x30), x86's pushes it on the top of the stack, where newer x86 kernels (6.11 on) read it themselves
 *   (older ones, and arm64's, do not). User space puts it second in the stack unless it is there already
 *   (common::stacks::with_entry_caller). */
#ifndef __COREBPF_ARCH_BPF_H
#define __COREBPF_ARCH_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR_FIELD orig_ax
#define ___SYSCALL_ARG0 di
#define ___SYSCALL_ARG1 si
#define ___SYSCALL_ARG2 dx
#define ___SYSCALL_ARG3 r10
#define ___SYSCALL_ARG4 r8
#define ___SYSCALL_ARG5 r9
/* The task runs 32-bit code: its code segment is not __USER_CS. */
#define COMPAT_FIELD cs
#define ___compat_value(cs) (((cs) & 0xffff) != 0x33)

static __always_inline __u64 entry_caller(struct pt_regs *regs)
{
	__u64 caller = 0;

	bpf_probe_read_user(&caller, sizeof(caller), (void *)BPF_CORE_READ(regs, sp));
	return caller;
}
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR_FIELD syscallno
#define ___SYSCALL_ARG0 regs[0]
#define ___SYSCALL_ARG1 regs[1]
#define ___SYSCALL_ARG2 regs[2]
#define ___SYSCALL_ARG3 regs[3]
#define ___SYSCALL_ARG4 regs[4]
#define ___SYSCALL_ARG5 regs[5]
/* The task runs AArch32 code: PSR_MODE32_BIT in the saved PSTATE. */
#define COMPAT_FIELD pstate
#define ___compat_value(pstate) (((pstate) & 0x10) != 0)

static __always_inline __u64 entry_caller(struct pt_regs *regs)
{
	return BPF_CORE_READ(regs, regs[30]);
}
#else
#error "arch.bpf.h: the system call registers of this architecture are not known (x86 and arm64 are)"
#endif

static __always_inline long syscall_nr_of(struct pt_regs *regs)
{
	return BPF_CORE_READ(regs, SYSCALL_NR_FIELD);
}

static __always_inline bool compat_regs(struct pt_regs *regs)
{
	return ___compat_value(BPF_CORE_READ(regs, COMPAT_FIELD));
}

#define tp_syscall_nr(regs) ((long)TP_READ(regs, SYSCALL_NR_FIELD))
#define tp_compat_regs(regs) ___compat_value(TP_READ(regs, COMPAT_FIELD))
#define ___tp_syscall_arg(regs, field) ((long)TP_READ(regs, field))
#define tp_syscall_arg(regs, n) ___tp_syscall_arg(regs, ___SYSCALL_ARG##n)

#endif /* __COREBPF_ARCH_BPF_H */
