// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of bitesize: opens argv[1] with O_DIRECT, and once a byte arrives on stdin writes 40 times
 * 64 KiB and 30 times 4 KiB to it (one write at a time, each waiting for its request, so none merge), prints
 * "done" and waits for stdin to close. The file is written and synced beforehand by the test, so these writes
 * are pure data overwrites: 40 requests in the 64-127 KiB slot and 30 in the 4-7 KiB slot, issued by this task. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	void *buf;
	char go;
	int fd;

	if (argc != 2 || posix_memalign(&buf, 4096, 65536))
		return 1;
	memset(buf, 'b', 65536);
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < 40; i++)
		if (pwrite(fd, buf, 65536, (off_t)i * 65536) != 65536)
			return 1;
	for (int i = 0; i < 30; i++)
		if (pwrite(fd, buf, 4096, (off_t)(40 * 16 + i) * 4096) != 4096)
			return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
