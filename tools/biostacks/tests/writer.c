// SPDX-License-Identifier: Apache-2.0 OR MIT
/* biostacks' test helper: opens argv[1] (a file the test wrote and synced, or a device) for O_DIRECT writes,
 * waits for a byte on stdin, then overwrites it with 50 writes of 16 KiB at offsets 64 KiB apart, one at a time
 * (each returns after its request completes, so none is merged with another), prints "done" and waits for stdin
 * to close. Every write is one block request started by this task, from the direct-I/O write path. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITES 50
#define SIZE (16 * 1024)
#define STRIDE (64 * 1024)

int main(int argc, char **argv)
{
	void *buf;
	char go;
	int fd;

	if (argc != 2 || posix_memalign(&buf, 4096, SIZE))
		return 1;
	memset(buf, 'w', SIZE);
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < WRITES; i++)
		if (pwrite(fd, buf, SIZE, (off_t)i * STRIDE) != SIZE)
			return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
