// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The C helper of profile's tests. `helper SECS [read]`: for SECS seconds calls main -> outer_fn -> hot_fn in a
 * loop; hot_fn spins in user space, or with "read" reads 1 MiB of /dev/zero (time spent in the kernel). Built
 * with -DPRINT_ADDRS it first says where its functions are (`hot_fn 0x...` and `outer_fn 0x...` lines). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static char buf[1 << 20];
static int zero_fd = -1;

void hot_fn(void)
{
	if (zero_fd >= 0) {
		if (read(zero_fd, buf, sizeof(buf)) < 0)
			exit(2);
		return;
	}
	for (int i = 0; i < 100000; i++)
		sink += i;
}

void outer_fn(void)
{
	hot_fn();
	sink++;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 10, start = now();
	if (argc > 2 && strcmp(argv[2], "read") == 0)
		zero_fd = open("/dev/zero", O_RDONLY);
#ifdef PRINT_ADDRS
	printf("hot_fn %p\nouter_fn %p\n", (void *)hot_fn, (void *)outer_fn);
	fflush(stdout);
#endif
	while (now() - start < secs)
		outer_fn();
	return 0;
}
