// SPDX-License-Identifier: Apache-2.0 OR MIT
/* filelife's test workload: in DIR (which holds pre.txt, made before tracing began), once a line arrives on
 * stdin, creates seven files in different ways, sleeps SLEEP_MS, then deletes six of them in different ways,
 * deletes pre.txt (opened with O_CREAT, but it existed: not a creation) and fails to delete a missing file;
 * keep.txt is created and left. Prints "done" at the end.
 *
 *   a.txt      open(O_CREAT|O_EXCL), deleted with unlink (or unlinkat where there is no unlink)
 *   b.txt      creat (or openat), renamed b2.txt, deleted with unlinkat(dirfd, "b2.txt")
 *   c.txt      openat2 (or openat), deleted with unlinkat(AT_FDCWD)
 *   sub/d.txt  openat, deleted by the path "sub/d.txt"
 *   e.txt      openat, deleted by its absolute path
 *   sub/e.txt  openat after e.txt (the same name elsewhere, younger), deleted by the path "sub/e.txt" last
 *   keep.txt   openat, not deleted */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLEEP_MS 300

struct how {
	unsigned long long flags, mode, resolve;
};

static void check(long r, const char *what)
{
	if (r < 0) {
		perror(what);
		exit(1);
	}
}

static void made(long fd, const char *what)
{
	check(fd, what);
	close(fd);
}

static long remove_path(const char *path)
{
#ifdef SYS_unlink
	return syscall(SYS_unlink, path);
#else
	return syscall(SYS_unlinkat, AT_FDCWD, path, 0);
#endif
}

int main(int argc, char **argv)
{
	char line[16], abs[4096];
	struct timespec nap = { SLEEP_MS / 1000, (SLEEP_MS % 1000) * 1000000L };
	long fd;
	int dir;

	if (argc != 2 || chdir(argv[1]) != 0) {
		fprintf(stderr, "usage: life DIR\n");
		return 2;
	}
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	made(open("a.txt", O_CREAT | O_EXCL | O_WRONLY, 0644), "a.txt");
#ifdef SYS_creat
	made(syscall(SYS_creat, "b.txt", 0644), "b.txt");
#else
	made(openat(AT_FDCWD, "b.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644), "b.txt");
#endif
	struct how how = { O_CREAT | O_WRONLY, 0644, 0 };
	fd = syscall(SYS_openat2, AT_FDCWD, "c.txt", &how, sizeof(how));
	if (fd < 0)
		fd = openat(AT_FDCWD, "c.txt", O_CREAT | O_WRONLY, 0644);
	made(fd, "c.txt");
	check(mkdir("sub", 0755), "sub");
	made(openat(AT_FDCWD, "sub/d.txt", O_CREAT | O_WRONLY, 0644), "sub/d.txt");
	made(openat(AT_FDCWD, "e.txt", O_CREAT | O_WRONLY, 0644), "e.txt");
	made(openat(AT_FDCWD, "sub/e.txt", O_CREAT | O_WRONLY, 0644), "sub/e.txt");
	made(openat(AT_FDCWD, "keep.txt", O_CREAT | O_WRONLY, 0644), "keep.txt");
	made(openat(AT_FDCWD, "pre.txt", O_CREAT | O_WRONLY, 0644), "pre.txt");

	nanosleep(&nap, NULL);

	check(remove_path("a.txt"), "unlink a.txt");
	check(rename("b.txt", "b2.txt"), "rename b.txt");
	dir = open(".", O_RDONLY | O_DIRECTORY);
	check(dir, ".");
	check(unlinkat(dir, "b2.txt", 0), "unlinkat b2.txt");
	close(dir);
	check(unlinkat(AT_FDCWD, "c.txt", 0), "unlinkat c.txt");
	check(remove_path("sub/d.txt"), "unlink sub/d.txt");
	snprintf(abs, sizeof(abs), "%s/e.txt", argv[1]);
	check(remove_path(abs), "unlink e.txt");
	check(remove_path("sub/e.txt"), "unlink sub/e.txt");
	check(remove_path("pre.txt"), "unlink pre.txt");
	if (remove_path("missing.txt") == 0)
		return 1;
	printf("done\n");
	return 0;
}
