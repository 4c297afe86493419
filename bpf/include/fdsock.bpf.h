// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The struct file, or struct socket, behind a file descriptor of the current task, for tools that follow system
 * calls on their tracepoints (bind, listen, open, write) instead of the kernel functions they reach.
 *
 * fd_file(fd) walks task->files->fdt->fd[fd] with CO-RE: NULL for a descriptor out of range or closed.
 * fd_socket(fd) returns that file's private_data when its inode is a socket (S_IFSOCK in i_mode), else NULL (a
 * file naming something other than a socket has no struct socket there). */
#ifndef __COREBPF_FDSOCK_BPF_H
#define __COREBPF_FDSOCK_BPF_H

#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "tp_btf_raw.bpf.h"

#define FDSOCK_S_IFMT 00170000
#define FDSOCK_S_IFSOCK 0140000

static __always_inline struct file *fd_file(long fd)
{
	struct file **fds, *file = NULL;
	unsigned int max;

	if (fd < 0)
		return NULL;
	max = CURRENT_READ(files, fdt, max_fds);
	if ((unsigned long)fd >= max)
		return NULL;
	fds = CURRENT_READ(files, fdt, fd);
	if (bpf_core_read(&file, sizeof(file), &fds[fd]))
		return NULL;
	return file;
}

static __always_inline struct socket *fd_socket(long fd)
{
	struct file *file = fd_file(fd);

	if (!file || (BPF_CORE_READ(file, f_inode, i_mode) & FDSOCK_S_IFMT) != FDSOCK_S_IFSOCK)
		return NULL;
	return BPF_CORE_READ(file, private_data);
}

#endif
