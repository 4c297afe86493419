// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of biotop: `rw PATH WRITES READS` opens PATH (a disk or a file written and synced beforehand)
 * with O_DIRECT and, once a byte arrives on stdin, writes WRITES times 16 KiB from offset 0, then reads READS times
 * 4 KiB from 1 MiB on, one request at a time (each pread/pwrite waits for its request, so none merge). It prints
 * "done" and waits for stdin to close: a tool sees exactly WRITES write requests of 16 KiB and READS read requests
 * of 4 KiB submitted by this process. `rw PATH busy` is a neighbour instead: it writes 16 KiB blocks over the first
 * 4 MiB of PATH, round and round, until it is killed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int writes, reads, fd;
	void *buf;
	char go;

	if (argc != 4 || posix_memalign(&buf, 4096, 16384))
		return 1;
	memset(buf, 'w', 16384);
	if (!strcmp(argv[2], "busy")) {
		fd = open(argv[1], O_WRONLY | O_DIRECT);
		for (long i = 0; fd >= 0; i = (i + 1) % 256)
			if (pwrite(fd, buf, 16384, (off_t)i * 16384) != 16384)
				return 1;
		return 1;
	}
	writes = atoi(argv[2]);
	reads = atoi(argv[3]);
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < writes; i++)
		if (pwrite(fd, buf, 16384, (off_t)i * 16384) != 16384)
			return 1;
	for (int i = 0; i < reads; i++)
		if (pread(fd, buf, 4096, (1 << 20) + (off_t)i * 4096) != 4096)
			return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
