// SPDX-License-Identifier: Apache-2.0 OR MIT
/* cachestat's test helper, one step per run:
 *   pages prepare FILE N   write N pages into FILE, fsync it, drop it from the page cache (POSIX_FADV_DONTNEED on
 *                          this file only) and print how many of its pages are still cached (mincore)
 *   pages read FILE        read FILE to its end in 64 KiB reads and print the pages read
 *   pages map FILE         map FILE and read a byte of each of its pages, then print the pages touched
 *   pages write FILE M     write M pages into FILE (new), without syncing, and print M */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define CHUNK (64 * 1024)

static char buf[CHUNK];

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void write_pages(const char *path, long n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		die("open");
	memset(buf, 'c', sizeof(buf));
	for (long i = 0; i < n; i++)
		if (write(fd, buf, PAGE) != PAGE)
			die("write");
	if (close(fd))
		die("close");
}

static long cached_pages(const char *path, long n)
{
	int fd = open(path, O_RDONLY);
	unsigned char *vec = calloc(n, 1);
	void *map;
	long cached = 0;

	if (fd < 0 || !vec)
		die("open");
	map = mmap(NULL, n * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	if (mincore(map, n * PAGE, vec))
		die("mincore");
	for (long i = 0; i < n; i++)
		cached += vec[i] & 1;
	munmap(map, n * PAGE);
	close(fd);
	free(vec);
	return cached;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "prepare")) {
		long n = atol(argv[3]);
		int fd;

		write_pages(argv[2], n);
		fd = open(argv[2], O_RDONLY);
		if (fd < 0 || fsync(fd))
			die("fsync");
		if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
			die("posix_fadvise");
		close(fd);
		printf("%ld\n", cached_pages(argv[2], n));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "read")) {
		int fd = open(argv[2], O_RDONLY);
		long bytes = 0;
		ssize_t r;

		if (fd < 0)
			die("open");
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			bytes += r;
		if (r < 0)
			die("read");
		printf("%ld\n", bytes / PAGE);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "map")) {
		int fd = open(argv[2], O_RDONLY);
		off_t size = fd < 0 ? 0 : lseek(fd, 0, SEEK_END);
		volatile const char *map;
		long sum = 0, pages = 0;

		if (fd < 0 || size <= 0)
			die("open");
		map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			die("mmap");
		for (off_t at = 0; at < size; at += PAGE, pages++)
			sum += map[at];
		if (sum != pages * 'c')
			die("contents");
		printf("%ld\n", pages);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "write")) {
		write_pages(argv[2], atol(argv[3]));
		printf("%s\n", argv[3]);
		return 0;
	}
	fprintf(stderr, "usage: pages prepare FILE N | read FILE | map FILE | write FILE M\n");
	return 2;
}
