// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Power-of-two bucketing for in-kernel histograms. Slot 0 holds 0 and 1, slot i holds [2^i, 2^(i+1)); the
 * Rust side (common::hist) prints the same slots as BCC's star bars. */
#ifndef __COREBPF_BITS_BPF_H
#define __COREBPF_BITS_BPF_H

static __always_inline __u64 log2(__u32 v)
{
	__u32 shift, r;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u64 log2l(__u64 v)
{
	__u32 hi = v >> 32;

	if (hi)
		return log2(hi) + 32;
	return log2(v);
}

#endif
