// SPDX-License-Identifier: Apache-2.0 OR MIT
/* execsnoop's helper for an exec by a thread other than the main one: `thread_exec TAG` waits for a line on stdin,
 * starts a thread that execs `/bin/true TAG thread` and waits in the main thread (the exec ends it). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static char *tag;

static void *exec_true(void *arg)
{
	char *argv[] = { "/bin/true", tag, "thread", NULL };

	(void)arg;
	execv(argv[0], argv);
	_exit(100);
}

int main(int argc, char **argv)
{
	char line[16];
	pthread_t t;

	if (argc < 2 || !fgets(line, sizeof line, stdin))
		return 101;
	tag = argv[1];
	if (pthread_create(&t, NULL, exec_true, NULL))
		return 102;
	for (;;)
		pause();
}
