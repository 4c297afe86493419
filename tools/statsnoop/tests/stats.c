// SPDX-License-Identifier: Apache-2.0 OR MIT
/* statsnoop's helper: `stats DIR K`. Waits for a line on stdin (so that it stats only once the tool is attached),
 * then: K x stat(DIR/present.txt) (glibc: newfstatat), 1 x statx(DIR/sub), 1 x lstat(DIR/missing.txt) (ENOENT),
 * and, where the architecture has them, the raw stat(present.txt), lstat(missing.txt), statfs(sub) and
 * fstat(an fd of present.txt); last stat(DIR/end) (ENOENT), a marker. Prints "raw FD" on stdout if it made the raw
 * calls. With a third argument, `names`, it first takes a command name holding an ESC sequence and a newline
 * and stats DIR/<a name holding the same> (ENOENT) once. Exits 0 if every result was the expected one. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char present[4096], sub[4096], missing[4096], line[16];
	struct stat st;
	struct statx stx;
	int k = atoi(argv[2]);

	snprintf(present, sizeof present, "%s/present.txt", argv[1]);
	snprintf(sub, sizeof sub, "%s/sub", argv[1]);
	snprintf(missing, sizeof missing, "%s/missing.txt", argv[1]);
	if (!fgets(line, sizeof line, stdin))
		return 1;
	if (argc > 3) {
		char odd[4096];

		snprintf(odd, sizeof odd, "%s/b\033[31m\nad", argv[1]);
		if (prctl(PR_SET_NAME, "st\033[2J\nx") || stat(odd, &st) != -1 || errno != ENOENT)
			return 7;
	}
	for (int i = 0; i < k; i++)
		if (stat(present, &st))
			return 2;
	if (statx(AT_FDCWD, sub, 0, STATX_BASIC_STATS, &stx))
		return 3;
	if (lstat(missing, &st) != -1 || errno != ENOENT)
		return 4;
#if defined(SYS_stat) && defined(SYS_lstat) && defined(SYS_fstat)
	{
		struct statfs sfs;
		int fd = open(present, O_RDONLY);

		if (fd < 0 || syscall(SYS_stat, present, &st) || syscall(SYS_lstat, missing, &st) != -1 ||
		    syscall(SYS_statfs, sub, &sfs) || syscall(SYS_fstat, fd, &st))
			return 5;
		printf("raw %d\n", fd);
	}
#endif
	/* The last call, a marker the test waits for in the anchor's output. */
	snprintf(missing, sizeof missing, "%s/end", argv[1]);
	if (stat(missing, &st) != -1)
		return 6;
	return 0;
}
