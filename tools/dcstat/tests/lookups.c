// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of dcstat's tests: known path lookups in a fresh directory. Usage below, at main. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* usage: lookups DIR MISSES HITS OPENS
 * Goes into DIR (fresh and empty), makes the file "here", prints its PID and waits for a line on stdin. Then it
 * stats MISSES names that do not exist (each new to the dentry cache), stats "here" HITS times, opens OPENS more
 * names that do not exist (open's path differs from stat's), prints "done" and waits for stdin to close. */
int main(int argc, char **argv)
{
	char name[64], line[64];
	long misses, hits, opens, i;
	struct stat st;
	int fd;

	if (argc != 5 || chdir(argv[1]))
		return 2;
	misses = atol(argv[2]);
	hits = atol(argv[3]);
	opens = atol(argv[4]);
	fd = open("here", O_WRONLY | O_CREAT, 0600);
	if (fd < 0 || close(fd) || stat("here", &st))
		return 1;
	printf("%d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (i = 0; i < misses; i++) {
		snprintf(name, sizeof(name), "nope%ld", i);
		if (stat(name, &st) == 0)
			return 3;
	}
	for (i = 0; i < hits; i++)
		if (stat("here", &st))
			return 4;
	for (i = 0; i < opens; i++) {
		snprintf(name, sizeof(name), "gone%ld", i);
		if (open(name, O_RDONLY) >= 0)
			return 5;
	}
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
