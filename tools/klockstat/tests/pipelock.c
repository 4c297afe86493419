// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of klockstat: kernel mutex contention at a known place. Once a byte arrives on stdin, 8 threads
 * write 64 bytes at a time into one pipe that 2 threads drain, in rounds of WRITES writes each, until stdin
 * closes: every write takes the pipe's mutex in the kernel's pipe write function (pipe_write, anon_pipe_write
 * since 6.16), and writers collide on it. Whether two collide in a given round depends on the scheduler, so the
 * test lets them write until the tool has seen it. Each writer makes WRITES writes at least. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define WRITERS 8
#define READERS 2
#define WRITES 2000

static int p[2];
static atomic_int stop;

static void *writer(void *arg)
{
	char buf[64] = { 0 };

	do {
		for (int i = 0; i < WRITES; i++)
			if (write(p[1], buf, sizeof(buf)) != sizeof(buf))
				exit(1);
	} while (!atomic_load(&stop));
	return NULL;
}

static void *reader(void *arg)
{
	char buf[4096];

	while (read(p[0], buf, sizeof(buf)) > 0)
		;
	return NULL;
}

int main(void)
{
	pthread_t w[WRITERS], r[READERS];
	char go;

	if (pipe(p) || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (int i = 0; i < WRITERS; i++)
		pthread_create(&w[i], NULL, writer, NULL);
	while (read(0, &go, 1) > 0)
		;
	atomic_store(&stop, 1);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	close(p[1]);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	return 0;
}
