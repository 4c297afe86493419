// SPDX-License-Identifier: Apache-2.0 OR MIT
/* exitsnoop's test helper: `exiter MODE MS` waits for a line on stdin, sleeps MS milliseconds, then ends as MODE
 * says: `code3` exit(3); `zero` exit(0); `segv` a write through a null pointer (SIGSEGV, no core: RLIMIT_CORE 0);
 * `wait` waits to be killed; `thread` starts a thread that ends with pthread_exit() after MS ms, joins it and
 * exits 0 (two tasks end: the thread, then the process); `leader_first` starts a thread and ends the main thread
 * with pthread_exit() at once, and the thread calls exit(5) after MS ms (the process ends with its last thread). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int ms;

static void *exit5(void *arg)
{
	(void)arg;
	usleep(ms * 1000);
	exit(5);
}

static void *worker(void *arg)
{
	(void)arg;
	usleep(ms * 1000);
	pthread_exit(NULL);
}

int main(int argc, char **argv)
{
	char line[16];
	struct rlimit none = { 0, 0 };

	if (argc < 3)
		return 100;
	ms = atoi(argv[2]);
	setrlimit(RLIMIT_CORE, &none);
	if (!fgets(line, sizeof line, stdin))
		return 101;
	if (!strcmp(argv[1], "thread")) {
		pthread_t t;
		if (pthread_create(&t, NULL, worker, NULL))
			return 102;
		pthread_join(t, NULL);
		return 0;
	}
	if (!strcmp(argv[1], "leader_first")) {
		pthread_t t;
		if (pthread_create(&t, NULL, exit5, NULL))
			return 102;
		pthread_exit(NULL);
	}
	usleep(ms * 1000);
	if (!strcmp(argv[1], "code3"))
		exit(3);
	if (!strcmp(argv[1], "zero"))
		exit(0);
	if (!strcmp(argv[1], "segv")) {
		volatile int *p = NULL;
		*p = 1;
	}
	if (!strcmp(argv[1], "wait"))
		for (;;)
			pause();
	return 103;
}
