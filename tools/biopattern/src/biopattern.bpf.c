// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* biopattern: for each disk, how many completed block requests started at the sector where the disk's previous
 * completion ended (sequential) and how many did not (random), with their bytes.
 *
 * One tracepoint, block_rq_complete(rq, error, nr_bytes), as a tp_btf program or else a raw_tp one (user space
 * keeps one by section). Its fields are what the classic tracepoint records: the disk is the request's gendisk
 * (major, first minor), the start is rq->__sector and the length nr_bytes in 512-byte sectors. The first
 * completion seen on a disk only sets where the next one is expected, so it is in neither count (as in
 * libbpf-tools). The counts are cumulative and never deleted, so nothing is lost between two reads; libbpf-tools
 * deletes its entries at each interval, which also forgets the disk's position. -d compares the request's
 * disk before anything is looked up. Only reads and writes count (block.bpf.h's request_moves_data, with the
 * operations' numbers user space reads from BTF) that transfer bytes: flushes, discards and write-zeroes, and
 * the empty write of a bare flush, transfer nothing. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "block.bpf.h"
#include "maps.bpf.h"
#include "biopattern.h"

const volatile bool filter_dev = false;
const volatile __u32 target_dev = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_DISKS);
	__type(key, __u32);
	__type(value, struct disk_pattern);
} patterns SEC(".maps");

/* Completions not counted because `patterns` was full (user space reports them). */
__u64 disks_full = 0;

/* Makes the struct visible to the skeleton's generated `types` module. */
struct disk_pattern _disk_pattern_type = {};

static const struct disk_pattern fresh;

TP_BTF_RAW(block_rq_complete, block_rq_complete)
{
	struct request *rq = (struct request *)ctx[0];
	__u32 nr_sectors = (__u32)ctx[2] >> 9;
	struct disk_pattern *p;
	__u64 sector;
	__u32 dev;

	/* A flush, discard or write-zeroes moves no data, nor does the empty write of a bare flush (REQ_PREFLUSH with no
	 * data, completed without reaching the device): none counts, nor moves the disk's position. */
	if (!nr_sectors || !request_moves_data(rq))
		return 0;
	dev = request_dev(rq);
	if (filter_dev && dev != target_dev)
		return 0;
	p = bpf_map_lookup_or_try_init(&patterns, &dev, &fresh);
	if (!p) {
		__sync_fetch_and_add(&disks_full, 1);
		return 0;
	}
	sector = TP_READ(rq, __sector);
	if (p->next_sector) {
		if (p->next_sector == sector)
			__sync_fetch_and_add(&p->sequential, 1);
		else
			__sync_fetch_and_add(&p->random, 1);
		__sync_fetch_and_add(&p->bytes, (__u64)nr_sectors << 9);
	}
	p->next_sector = sector + nr_sectors;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
