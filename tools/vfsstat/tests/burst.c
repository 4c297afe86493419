// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of vfsstat's tests: makes known numbers of each VFS call in one burst (reads of /dev/zero, writes to
 * /dev/null, fsyncs, opens, files made with mknod, FIFOs, directories, opens of a missing file), the counts given
 * on its command line, which the tests expect in the tool's columns. Usage below, at main. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* usage: helper DIR READS WRITES FSYNCS OPENS CREATES FIFOS MKDIRS FAILED_OPENS
 * Prints its PID, waits for a line on stdin, makes the burst (creates, FIFOs and directories in DIR, removed
 * again: half with the *at calls), prints "done" and waits for stdin to close. */
int main(int argc, char **argv)
{
	char path[4096], line[64], c = 0;
	long n[9];
	int i, zero, null, file;

	if (argc != 10)
		return 2;
	for (i = 0; i < 8; i++)
		n[i] = atol(argv[i + 2]);
	zero = open("/dev/zero", O_RDONLY);
	null = open("/dev/null", O_WRONLY);
	snprintf(path, sizeof(path), "%s/fsync", argv[1]);
	file = open(path, O_RDWR | O_CREAT, 0600);
	if (zero < 0 || null < 0 || file < 0 || write(file, "x", 1) != 1) {
		perror("open");
		return 1;
	}
	printf("%d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (i = 0; i < n[0]; i++)
		if (read(zero, &c, 1) != 1)
			return 3;
	for (i = 0; i < n[1]; i++)
		if (write(null, &c, 1) != 1)
			return 4;
	for (i = 0; i < n[2]; i++)
		if (fsync(file))
			return 5;
	for (i = 0; i < n[3]; i++) {
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0)
			return 6;
		close(fd);
	}
	for (i = 0; i < n[4]; i++) {
		snprintf(path, sizeof(path), "%s/f%d", argv[1], i);
		if ((i % 2 ? mknodat(AT_FDCWD, path, S_IFREG | 0600, 0) : mknod(path, 0600, 0)) ||
		    (i % 2 ? unlinkat(AT_FDCWD, path, 0) : unlink(path)))
			return 7;
	}
	for (i = 0; i < n[5]; i++) {
		snprintf(path, sizeof(path), "%s/p%d", argv[1], i);
		if (mknod(path, S_IFIFO | 0600, 0) || unlink(path))
			return 8;
	}
	for (i = 0; i < n[6]; i++) {
		snprintf(path, sizeof(path), "%s/d%d", argv[1], i);
		if ((i % 2 ? mkdirat(AT_FDCWD, path, 0700) : mkdir(path, 0700)) ||
		    (i % 2 ? unlinkat(AT_FDCWD, path, AT_REMOVEDIR) : rmdir(path)))
			return 9;
	}
	snprintf(path, sizeof(path), "%s/missing", argv[1]);
	for (i = 0; i < n[7]; i++)
		if (open(path, O_RDONLY) >= 0)
			return 10;
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
