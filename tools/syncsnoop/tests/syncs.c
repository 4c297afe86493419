// SPDX-License-Identifier: Apache-2.0 OR MIT
/* syncsnoop's helper: `syncs FILE`. Opens FILE, maps its first page, waits for a line on stdin (so that it syncs
 * only once the tool is attached), then calls fsync 3 times, fdatasync 4, syncfs 2, sync_file_range 5 and msync 6
 * on it, and prints "FD T0 T1": its descriptor and CLOCK_MONOTONIC (ns) before and after the calls. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	char line[16];
	unsigned long long t0, t1;
	int fd = open(argv[1], O_RDWR);
	char *map;

	if (fd < 0 || write(fd, "some data\n", 10) != 10)
		return 1;
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return 1;
	if (!fgets(line, sizeof line, stdin))
		return 1;
	t0 = now();
	for (int i = 0; i < 3; i++)
		if (fsync(fd))
			return 2;
	for (int i = 0; i < 4; i++)
		if (fdatasync(fd))
			return 3;
	for (int i = 0; i < 2; i++)
		if (syncfs(fd))
			return 4;
	for (int i = 0; i < 5; i++)
		if (sync_file_range(fd, 0, 10, SYNC_FILE_RANGE_WRITE))
			return 5;
	for (int i = 0; i < 6; i++) {
		map[0] = 'S';
		if (msync(map, 4096, MS_SYNC))
			return 6;
	}
	t1 = now();
	printf("%d %llu %llu\n", fd, t0, t1);
	return 0;
}
