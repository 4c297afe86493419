// SPDX-License-Identifier: Apache-2.0 OR MIT
/* drsnoop's test helper: cachefill PROCS FILE MIB joins the memory cgroup whose cgroup.procs file is PROCS, waits
 * for a byte on stdin, then writes MIB MiB to FILE (page cache the cgroup must reclaim to stay within its limit),
 * removes FILE and exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char block[1 << 20];

int main(int argc, char **argv)
{
	FILE *procs;
	char go;
	int fd, i, mib;

	if (argc != 4 || !(procs = fopen(argv[1], "w")))
		return 2;
	if (fprintf(procs, "%d\n", getpid()) < 0 || fclose(procs))
		return 2;
	mib = atoi(argv[3]);
	if (read(0, &go, 1) != 1)
		return 2;
	fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 3;
	memset(block, 'r', sizeof(block));
	for (i = 0; i < mib; i++)
		if (write(fd, block, sizeof(block)) != sizeof(block))
			return 4;
	close(fd);
	unlink(argv[2]);
	return 0;
}
