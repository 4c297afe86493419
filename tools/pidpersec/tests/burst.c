// SPDX-License-Identifier: Apache-2.0 OR MIT
/* pidpersec's helper: `burst N`. Waits for a line on stdin, then forks N children, each exiting at once, reaps
 * them, and prints "T0 T1": CLOCK_MONOTONIC (ns) before the first fork and after the last one returned. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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
	int n = atoi(argv[1]);
	unsigned long long t0, t1;

	if (!fgets(line, sizeof line, stdin))
		return 1;
	t0 = now();
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 2;
		if (pid == 0)
			_exit(0);
	}
	t1 = now();
	for (int i = 0; i < n; i++)
		if (wait(NULL) < 0)
			return 3;
	printf("%llu %llu\n", t0, t1);
	return 0;
}
