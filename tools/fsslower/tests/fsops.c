// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of fsslower and fsdist: `fsops PATH` waits for a byte on stdin, then does a known set of file
 * system operations on PATH, prints "done" and waits for stdin to close:
 * - open(O_RDWR | O_CREAT | O_TRUNC);
 * - pwrite() of 8192 bytes at offsets 0, 8192 and 16384; write() of 100 bytes (at the file position, 0);
 * - fsync(), fdatasync(); close();
 * - open(O_RDONLY); pread() of 5000 bytes at 10240; lseek() to 20480 and read() of 1000 bytes;
 * - fstat() of the descriptor and stat() of PATH; close().
 * So: 2 opens, 4 writes, 2 fsyncs, 2 reads and 2 getattrs. Its stdin and stdout are pipes, on no file system the
 * tools trace. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[8192];
	struct stat st;
	char go;
	int fd;

	if (argc != 2)
		return 1;
	memset(buf, 'f', sizeof(buf));
	if (read(0, &go, 1) != 1)
		return 1;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 1;
	for (int i = 0; i < 3; i++)
		if (pwrite(fd, buf, 8192, 8192 * i) != 8192)
			return 1;
	if (write(fd, buf, 100) != 100 || fsync(fd) || fdatasync(fd) || close(fd))
		return 1;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || pread(fd, buf, 5000, 10240) != 5000)
		return 1;
	if (lseek(fd, 20480, SEEK_SET) != 20480 || read(fd, buf, 1000) != 1000)
		return 1;
	if (fstat(fd, &st) || stat(argv[1], &st) || close(fd))
		return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
