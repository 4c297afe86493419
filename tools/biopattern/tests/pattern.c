// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of biopattern: opens argv[1] (a disk or a file) with O_DIRECT and, once a byte arrives on
 * stdin, reads a known pattern from it one request at a time (each pread waits for its request, so none merge):
 * SEQ + 1 reads of 8 KiB back to back from offset 0, then RND reads of 4 KiB at offsets none of which starts where
 * the read before it ended (a gap of 8 KiB between them, walking backwards). It prints "done" and waits for stdin
 * to close. On a disk of its own, the first read has no predecessor, so a tool counts SEQ sequential and RND random
 * requests, SEQ * 8 + RND * 4 KiB. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const int seq = 30, rnd = 10;
	off_t base = (off_t)(seq + 1) * 8192;
	void *buf;
	char go;
	int fd;

	if (argc != 2 || posix_memalign(&buf, 4096, 8192))
		return 1;
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i <= seq; i++)
		if (pread(fd, buf, 8192, (off_t)i * 8192) != 8192)
			return 1;
	for (int i = rnd - 1; i >= 0; i--)
		if (pread(fd, buf, 4096, base + 8192 + (off_t)i * 12288) != 4096)
			return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
