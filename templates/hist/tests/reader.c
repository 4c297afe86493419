// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of template: once a byte arrives on stdin, reads /dev/zero 100 times 4096 bytes and 30 times
 * 100 bytes, then waits for stdin to close. Its reads are the ground truth: 1 read of one byte (the go), 100 in
 * the 4096-8191 slot, 30 in the 64-127 slot. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
	static char buf[4096];
	char go;
	int fd = open("/dev/zero", O_RDONLY);

	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < 100; i++)
		if (read(fd, buf, 4096) != 4096)
			return 1;
	for (int i = 0; i < 30; i++)
		if (read(fd, buf, 100) != 100)
			return 1;
	write(1, "done\n", 5);
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
