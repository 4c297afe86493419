// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* ttysnoop: the bytes written to one tty or pts device, in chunks of at most -s bytes, -c chunks a write.
 *
 * The device is the file whose inode number and file system (i_ino and i_sb->s_dev) user space found with stat()
 * and wrote into .rodata before load, so the same pts number in another devpts instance (a container's) is not
 * mistaken for it. Writes are caught:
 * - at the entry of the kernel's tty_write (fentry, else kprobe, as BCC), and of redirected_tty_write, which
 *   /dev/console's writes take instead: every write the device gets through the file, whatever system call (or
 *   splice, io_uring) made it. Since 5.11 (and stable 5.10.11) tty_write takes a
 *   struct kiocb and a struct iov_iter (one user buffer, ITER_UBUF from 6.0, or an array of iovec or kvec);
 *   before, a struct file and one user buffer. User space reads the function's arity in BTF and keeps the
 *   programs of the matching form. The count shown is the size asked for.
 * - else on the system calls' tracepoints, write, writev and pwritev2 (pwritev2 with offset -1 writes at the
 *   current position, so it reaches ttys; pwrite64 and pwritev always fail on them with ESPIPE): the entry finds
 *   the struct file behind the descriptor (fdsock.bpf.h's fd_file) and keeps the buffers of a write to the
 *   device, the exit sends the bytes the call reports written.
 * One record per chunk goes through the ring buffer; those that find it full are counted in `lost`. */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fdsock.bpf.h"
#include "ringbuf.bpf.h"
#include "syscall_tp.bpf.h"
#include "ttysnoop.h"

const volatile __u64 target_ino = 0;
const volatile __u32 target_dev = 0;
const volatile __u32 datasize = 256;
const volatile __u32 datacount = 16;

/* Chunks not sent because the ring buffer was full; writes not followed because `inflight` was full. */
__u64 lost = 0;
__u64 inflight_full = 0;

struct chunk _chunk_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* A chunk is built here, then copied onto the ring buffer with only the bytes it holds. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct chunk);
} scratch SEC(".maps");

/* What a write system call to the device asked for, from its entry to its result. */
struct write_start {
	__u64 buf;		/* the buffer, or the array of struct iovec */
	__u64 nsegs;		/* entries of that array; 0 for a plain buffer */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct write_start);
} inflight SEC(".maps");

/* Where the bytes of one write are: a buffer (base, left), then the segments still to come at vec. */
struct source {
	__u64 vec;
	__u64 nsegs;
	__u64 base;
	__u64 left;
	__u64 total_left;
	bool vec_kernel;	/* the segment array is in kernel memory (an iov_iter's), not the caller's */
	bool kernel;		/* the bytes are in kernel memory (ITER_KVEC) */
};

struct seg {
	__u64 base;
	__u64 len;
};

/* Sends the write's bytes in chunks of at most `datasize`, `datacount` chunks at most. `total` is the write's size.
 * Each turn of the loop sends one chunk (moving to the next segment first when the current one is used up), so
 * that the verifier sees the same state at every turn whichever way it went: an empty segment costs a turn. */
static __always_inline void send(struct source *src, __u64 total)
{
	__u32 zero = 0;
	struct chunk *c = bpf_map_lookup_elem(&scratch, &zero);
	__u64 id = bpf_get_current_pid_tgid();
	int i;

	if (!c)
		return;
	c->total = total;
	c->pid = id >> 32;
	c->tid = (__u32)id;
	c->flags = 0;
	c->pad = 0;
	bpf_get_current_comm(c->comm, sizeof(c->comm));
	/* The size too goes through the map value and back (see below). A plain buffer (left set) is the whole
	 * write. */
	src->total_left = *(volatile __u64 *)&c->total;
	if (src->left)
		src->left = src->total_left;
	for (i = 0; i < MAX_DATACOUNT; i++) {
		__u64 n;
		long err;

		if (i >= datacount || src->total_left == 0)
			break;
		if (src->left == 0) {
			struct seg seg;

			if (src->nsegs == 0)
				break;
			if (src->vec_kernel)
				err = bpf_probe_read_kernel(&seg, sizeof(seg), (void *)src->vec);
			else
				err = bpf_probe_read_user(&seg, sizeof(seg), (void *)src->vec);
			if (err)
				break;
			src->vec += sizeof(seg);
			src->nsegs--;
			src->base = seg.base;
			src->left = seg.len < src->total_left ? seg.len : src->total_left;
			if (src->left == 0)
				continue;
		}
		/* The size goes through the map value and back, so that the verifier bounds it by DATA_ROOM alone
		 * and does not keep every value of src->left apart (which would defeat its pruning of this loop). */
		c->len = src->left < datasize ? src->left : datasize;
		n = *(volatile __u32 *)&c->len;
		if (n > DATA_ROOM)
			n = DATA_ROOM;
		if (src->kernel)
			err = bpf_probe_read_kernel(c->data, n, (void *)src->base);
		else
			err = bpf_probe_read_user(c->data, n, (void *)src->base);
		c->index = i;
		if (err) {
			c->len = 0;
			c->flags = CHUNK_LAST | CHUNK_FAULT;
			ringbuf_output(&events, c, offsetof(struct chunk, data), &lost);
			return;
		}
		src->base += n;
		src->left -= n;
		src->total_left -= n;
		c->flags = src->total_left == 0 || i + 1 >= datacount ? CHUNK_LAST : 0;
		ringbuf_output(&events, c, offsetof(struct chunk, data) + n, &lost);
	}
}

static __always_inline bool is_target(struct file *file)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);

	return inode && BPF_CORE_READ(inode, i_ino) == target_ino && BPF_CORE_READ(inode, i_sb, s_dev) == target_dev;
}

/* --- kernel-function paths: tty_write --- */

/* iov_iter before 5.14: the kind and the direction in one `type`. */
struct iov_iter___old {
	unsigned int type;
} __attribute__((preserve_access_index));

/* iov_iter from 6.0: one user buffer of ITER_UBUF. */
struct iov_iter___ubuf {
	void *ubuf;
} __attribute__((preserve_access_index));

static __always_inline int on_write_iter(struct kiocb *iocb, struct iov_iter *from)
{
	struct source src = {};
	unsigned int type;

	if (!is_target(BPF_CORE_READ(iocb, ki_filp)))
		return 0;
	if (bpf_core_field_exists(from->iter_type))
		type = BPF_CORE_READ(from, iter_type);
	else
		type = BPF_CORE_READ((struct iov_iter___old *)from, type) & ~1u; /* minus WRITE */
	src.total_left = BPF_CORE_READ(from, count);
	if (bpf_core_enum_value_exists(enum iter_type, ITER_UBUF) && bpf_core_field_exists(struct iov_iter___ubuf, ubuf) &&
	    type == bpf_core_enum_value(enum iter_type, ITER_UBUF)) {
		src.base = (__u64)BPF_CORE_READ((struct iov_iter___ubuf *)from, ubuf);
		src.left = src.total_left;
	} else if (type == bpf_core_enum_value(enum iter_type, ITER_IOVEC) ||
		   type == bpf_core_enum_value(enum iter_type, ITER_KVEC)) {
		/* kvec and iov share the union's slot and struct kvec has struct iovec's layout. The array is the
		 * kernel's copy (import_iovec), the bytes the caller's (ITER_IOVEC) or the kernel's (ITER_KVEC). */
		src.vec = (__u64)BPF_CORE_READ(from, kvec);
		src.nsegs = BPF_CORE_READ(from, nr_segs);
		src.vec_kernel = true;
		src.kernel = type == bpf_core_enum_value(enum iter_type, ITER_KVEC);
	} else {
		return 0;
	}
	send(&src, src.total_left);
	return 0;
}

static __always_inline int on_write_buf(struct file *file, const char *buf, __u64 count)
{
	struct source src = { .base = (__u64)buf, .left = count, .total_left = count };

	if (is_target(file))
		send(&src, count);
	return 0;
}

SEC("fentry/tty_write")
int BPF_PROG(tty_write_fentry, struct kiocb *iocb, struct iov_iter *from)
{
	return on_write_iter(iocb, from);
}

SEC("kprobe/tty_write")
int BPF_KPROBE(tty_write_kprobe, struct kiocb *iocb, struct iov_iter *from)
{
	return on_write_iter(iocb, from);
}

/* /dev/console's own write function (console_fops): it does not go through tty_write. */
SEC("fentry/redirected_tty_write")
int BPF_PROG(console_write_fentry, struct kiocb *iocb, struct iov_iter *from)
{
	return on_write_iter(iocb, from);
}

SEC("kprobe/redirected_tty_write")
int BPF_KPROBE(console_write_kprobe, struct kiocb *iocb, struct iov_iter *from)
{
	return on_write_iter(iocb, from);
}

/* tty_write(struct file *, const char __user *, size_t, loff_t *) before 5.11 (and 5.10.11), and the same form of
 * redirected_tty_write. */
SEC("fentry/tty_write")
int BPF_PROG(tty_write_old_fentry, struct file *file, const char *buf, size_t count)
{
	return on_write_buf(file, buf, count);
}

SEC("kprobe/tty_write")
int BPF_KPROBE(tty_write_old_kprobe, struct file *file, const char *buf, size_t count)
{
	return on_write_buf(file, buf, count);
}

SEC("fentry/redirected_tty_write")
int BPF_PROG(console_write_old_fentry, struct file *file, const char *buf, size_t count)
{
	return on_write_buf(file, buf, count);
}

SEC("kprobe/redirected_tty_write")
int BPF_KPROBE(console_write_old_kprobe, struct file *file, const char *buf, size_t count)
{
	return on_write_buf(file, buf, count);
}

/* --- tracepoint path: the write system calls --- */

static __always_inline int started(long fd, __u64 buf, __u64 nsegs)
{
	struct write_start start = { .buf = buf, .nsegs = nsegs };
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct file *file = fd_file(fd);

	if (!file || !is_target(file))
		return 0;
	if (bpf_map_update_elem(&inflight, &tid, &start, BPF_ANY))
		__sync_fetch_and_add(&inflight_full, 1);
	return 0;
}

static __always_inline int finished(struct syscall_exit_ctx *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct write_start *start = bpf_map_lookup_elem(&inflight, &tid);
	struct source src = {};
	long ret = ctx->ret;

	if (!start)
		return 0;
	if (start->nsegs) {
		src.vec = start->buf;
		src.nsegs = start->nsegs;
	} else {
		src.base = start->buf;
		src.left = ret > 0 ? ret : 0;
	}
	bpf_map_delete_elem(&inflight, &tid);
	if (ret <= 0)
		return 0;
	src.total_left = ret;
	send(&src, ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_write")
int write_enter(struct syscall_enter_ctx *ctx)
{
	return started(ctx->args[0], ctx->args[1], 0);
}

SEC("tracepoint/syscalls/sys_enter_writev")
int writev_enter(struct syscall_enter_ctx *ctx)
{
	return started(ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_pwritev2")
int pwritev2_enter(struct syscall_enter_ctx *ctx)
{
	return started(ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_exit_write")
int write_exit(struct syscall_exit_ctx *ctx)
{
	return finished(ctx);
}

SEC("tracepoint/syscalls/sys_exit_writev")
int writev_exit(struct syscall_exit_ctx *ctx)
{
	return finished(ctx);
}

SEC("tracepoint/syscalls/sys_exit_pwritev2")
int pwritev2_exit(struct syscall_exit_ctx *ctx)
{
	return finished(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
