/* SPDX-License-Identifier: GPL-2.0 */
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

#endif
