// SPDX-License-Identifier: Apache-2.0 OR MIT
/* cpufreq's test helper: runs on one CPU (argv[1]) for a known amount of its own CPU time (argv[2] ms).
 * Prints "ready" once pinned, spins after a byte on stdin, prints "done" and waits for stdin to close. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	cpu_set_t set;
	char c;
	if (argc != 3)
		return 2;
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[1]), &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	if (read(0, &c, 1) != 1)
		return 1;
	double end = cpu_ms() + atof(argv[2]);
	while (cpu_ms() < end)
		;
	printf("done\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
