// SPDX-License-Identifier: Apache-2.0 OR MIT
/* ksnoop's test helper: opens FILE, waits for one byte on stdin, then makes N write(2)s of 1234 bytes to it and M
 * pwrite(2)s of 99 bytes at offset 1000000, and exits: no other write of any kind after the byte, so every
 * vfs_write of this process that a tracer sees is one of these. Usage: writer FILE N M */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[4096];
	int fd, n, m, i;
	char go;

	if (argc != 4)
		return 2;
	n = atoi(argv[2]);
	m = atoi(argv[3]);
	memset(buf, 'k', sizeof(buf));
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (i = 0; i < n; i++)
		if (write(fd, buf, 1234) != 1234)
			_exit(1);
	for (i = 0; i < m; i++)
		if (pwrite(fd, buf, 99, 1000000) != 99)
			_exit(1);
	_exit(0);
}
