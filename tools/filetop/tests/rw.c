// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of filetop: `rw PATH` creates PATH and, once a byte arrives on stdin, makes a known set of reads
 * and writes, then prints "done" and waits for stdin to close:
 * - PATH (a regular file): 7 write() of 4096 bytes, then from offset 0, 5 read() of 1000 bytes, then one
 *   pwrite64() of 300 bytes and 2 pread64() of 200 bytes;
 * - /dev/null (a character device, BCC's type O): 3 write() of 512 bytes;
 * - a socket pair (type S): 2 write() of 100 bytes on one end, 2 read() of 100 bytes on the other.
 * Its stdin and stdout are pipes, which have no name: filetop never shows them. */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[4096];
	int fd, null, sv[2];
	char go;

	if (argc != 2)
		return 1;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	null = open("/dev/null", O_WRONLY);
	if (fd < 0 || null < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	memset(buf, 'f', sizeof(buf));
	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < 7; i++)
		if (write(fd, buf, 4096) != 4096)
			return 1;
	if (lseek(fd, 0, SEEK_SET) != 0)
		return 1;
	for (int i = 0; i < 5; i++)
		if (read(fd, buf, 1000) != 1000)
			return 1;
	if (pwrite(fd, buf, 300, 8192) != 300)
		return 1;
	for (int i = 0; i < 2; i++)
		if (pread(fd, buf, 200, 100) != 200)
			return 1;
	for (int i = 0; i < 3; i++)
		if (write(null, buf, 512) != 512)
			return 1;
	for (int i = 0; i < 2; i++)
		if (write(sv[0], buf, 100) != 100 || read(sv[1], buf, 100) != 100)
			return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
