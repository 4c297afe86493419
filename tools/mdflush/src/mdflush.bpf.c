// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* mdflush: one record per flush request an md (software RAID) array receives, sent from the task that issued it.
 *
 * Two ways in, one record:
 *  - md_flush_request(mddev, bio), the md driver's own entry for a bio carrying REQ_PREFLUSH, as BCC: fentry, else
 *    a kprobe (the md module must be loaded when the tool starts, or the function is not there to attach to);
 *  - block:block_bio_queue (tp_btf, else raw_tp), where every bio submitted to a bio-based device passes once,
 *    md arrays included: a bio with REQ_PREFLUSH whose disk is an md array is the same request md_flush_request
 *    will see, in the same task (md handles bios in the submitter's context). The tracepoint lost its queue
 *    argument in 5.11 (Debian's 5.10 still has it): one program pair for each form, and user space keeps the one
 *    whose arity the kernel's BTF has (each reads its bio at a fixed offset of the context, as the verifier wants).
 *    This path catches arrays created after the tool started as well, and needs no kernel-function tracing.
 * The disk is bio->bi_bdev->bd_disk (5.12+) or bio->bi_disk (before), chosen by CO-RE field existence; the
 * REQ_PREFLUSH bit is read from the kernel's enum req_flag_bits by CO-RE as well. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ringbuf.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "mdflush.h"

/* Flushes that did not fit in the ring buffer. */
__u64 lost = 0;

/* Makes struct event visible to the skeleton's generated `types` module. */
struct event _event_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Before 5.12 a bio named its disk directly. */
struct bio___with_disk {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *bio_gendisk(struct bio *bio)
{
	struct bio___with_disk *old = (void *)bio;

	if (bpf_core_field_exists(old->bi_disk))
		return BPF_CORE_READ(old, bi_disk);
	return BPF_CORE_READ(bio, bi_bdev, bd_disk);
}

static __always_inline int record(struct gendisk *disk)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct event *e;

	e = ringbuf_reserve(&events, sizeof(*e), &lost);
	if (!e)
		return 0;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (bpf_probe_read_kernel_str(e->disk, sizeof(e->disk), disk->disk_name) < 0)
		e->disk[0] = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("fentry/md_flush_request")
int BPF_PROG(md_flush_fentry, void *mddev, struct bio *bio)
{
	return record(bio_gendisk(bio));
}

SEC("kprobe/md_flush_request")
int BPF_KPROBE(md_flush_kprobe, void *mddev, struct bio *bio)
{
	return record(bio_gendisk(bio));
}

/* True for a gendisk of the md driver: the fixed major, or a partitionable array's "md_d<N>" name. */
static __always_inline bool is_md(struct gendisk *disk)
{
	char name[5] = {};

	if (BPF_CORE_READ(disk, major) == MD_MAJOR)
		return true;
	bpf_probe_read_kernel_str(name, sizeof(name), disk->disk_name);
	return name[0] == 'm' && name[1] == 'd' && name[2] == '_' && name[3] == 'd';
}

static __always_inline int bio_queued(struct bio *bio)
{
	__u64 preflush = 1ULL << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH);
	struct gendisk *disk;

	if (!(BPF_CORE_READ(bio, bi_opf) & preflush))
		return 0;
	disk = bio_gendisk(bio);
	if (!disk || !is_md(disk))
		return 0;
	return record(disk);
}

/* block_bio_queue(bio), 5.11 and later. */
TP_BTF_RAW(bio_queue, block_bio_queue, struct bio *bio)
{
	return bio_queued(bio);
}

/* block_bio_queue(q, bio), before. */
TP_BTF_RAW(bio_queue_q, block_bio_queue, struct request_queue *q, struct bio *bio)
{
	return bio_queued(bio);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
