// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* USDT arguments for the language-runtime tools (ugc, uthreads, ucalls, ...): a probe's argument as a number, 0
 * when it cannot be read; a runtime's counted string (a pointer and a length, not NUL-terminated, as HotSpot
 * passes names) copied into a fixed buffer with its NUL; and the class and method names of a call probe, from
 * where the runtime passes them (common::runtime::CallArgs, packed in the probe's USDT cookie). */
#ifndef __COREBPF_USDT_ARGS_BPF_H
#define __COREBPF_USDT_ARGS_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/usdt.bpf.h>

/* USDT argument `n` (from 0), or 0 if it cannot be read. */
static __always_inline __u64 usdt_arg(struct pt_regs *ctx, __u64 n)
{
	long value = 0;

	if (bpf_usdt_arg(ctx, n, &value))
		return 0;
	return value;
}

/* Copies the `len` bytes at user address `str` into `dst` (`size` bytes, a constant power of two), cut to
 * size - 1 so that a NUL ends it; returns the bytes copied. `dst` must be zeroed beforehand. */
static __always_inline __u32 usdt_read_counted(char *dst, __u32 size, __u64 str, __u64 len)
{
	if (len > size - 1)
		len = size - 1;
	len &= size - 1;
	if (!len || bpf_probe_read_user(dst, len, (void *)str))
		return 0;
	return len;
}

/* The bit of a call probe's cookie that says its names are counted strings (HotSpot's): each name's pointer in
 * its argument and its length in the next. Bits 0-7 hold the class's argument (0xff: none), 8-15 the method's. */
#define USDT_CALL_COUNTED (1ULL << 16)
#define USDT_CALL_NO_CLASS 0xff

/* Reads the class (or file) and method names a call probe passes, as its cookie says, into zeroed buffers of
 * `class_size` and `method_size` bytes (constant powers of two). */
static __always_inline void usdt_read_call(struct pt_regs *ctx, __u64 cookie, char *clazz, __u32 class_size,
					   char *method, __u32 method_size)
{
	__u64 class_arg = cookie & 0xff, method_arg = (cookie >> 8) & 0xff;

	if (cookie & USDT_CALL_COUNTED) {
		usdt_read_counted(clazz, class_size, usdt_arg(ctx, class_arg), usdt_arg(ctx, class_arg + 1));
		usdt_read_counted(method, method_size, usdt_arg(ctx, method_arg), usdt_arg(ctx, method_arg + 1));
		return;
	}
	if (class_arg != USDT_CALL_NO_CLASS)
		bpf_probe_read_user_str(clazz, class_size, (void *)usdt_arg(ctx, class_arg));
	bpf_probe_read_user_str(method, method_size, (void *)usdt_arg(ctx, method_arg));
}

#endif
