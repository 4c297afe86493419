// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Map helpers shared by the tools' BPF programs. */
#ifndef __COREBPF_MAPS_BPF_H
#define __COREBPF_MAPS_BPF_H

#include <bpf/bpf_helpers.h>
#include <asm-generic/errno-base.h>

/* Returns the value for key, inserting init first if the key is new. NULL only when the map is full. */
static __always_inline void *
bpf_map_lookup_or_try_init(void *map, const void *key, const void *init)
{
	void *val;
	long err;

	val = bpf_map_lookup_elem(map, key);
	if (val)
		return val;

	err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (err && err != -EEXIST)
		return 0;

	return bpf_map_lookup_elem(map, key);
}

/* The value a new counter starts from. */
static const __u64 zero_counter;

/* Adds `n` to the __u64 counter of `key` in `map` (a hash: a new key starts at 0); when the map is full, counts
 * the event in `*lost` instead. Atomic, so that several CPUs (or a preempted uprobe program) may add at once. */
static __always_inline void counter_add(void *map, const void *key, __u64 n, __u64 *lost)
{
	__u64 *count = bpf_map_lookup_or_try_init(map, key, &zero_counter);

	if (count)
		__sync_fetch_and_add(count, n);
	else
		__sync_fetch_and_add(lost, 1);
}

/* Adds one to the counter of `key` (counter_add()). */
static __always_inline void counter_inc(void *map, const void *key, __u64 *lost)
{
	counter_add(map, key, 1, lost);
}

#endif
