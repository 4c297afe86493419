// SPDX-License-Identifier: Apache-2.0 OR MIT
/* threadsnoop's test helper: waits for a line on stdin, then starts ALPHA threads running corebpf_alpha_worker and
 * BETA threads running corebpf_beta_worker with pthread_create (named, global, not inlined: symbols the test
 * expects by name), and then:
 *   join: joins them, prints "done", and waits for stdin to close;
 *   exit: exits at once (exit_group ends the threads), without joining;
 *   letters: as join, with the routines named f and d instead (one-letter C names, which are Itanium type codes if
 *   taken for a mangled name).
 * Usage: threads join|exit|letters ALPHA BETA */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) void *corebpf_alpha_worker(void *arg)
{
	__asm__ volatile("" ::: "memory");
	return arg;
}

__attribute__((noinline)) void *corebpf_beta_worker(void *arg)
{
	__asm__ volatile("" ::: "memory");
	return (char *)arg + 1;
}

__attribute__((noinline)) void *f(void *arg)
{
	__asm__ volatile("" ::: "memory");
	return (char *)arg + 2;
}

__attribute__((noinline)) void *d(void *arg)
{
	__asm__ volatile("" ::: "memory");
	return (char *)arg + 3;
}

int main(int argc, char **argv)
{
	pthread_t threads[64];
	int alpha, beta, n = 0;
	char line[16];
	int letters = argc == 4 && strcmp(argv[1], "letters") == 0;

	if (argc != 4)
		return 2;
	alpha = atoi(argv[2]);
	beta = atoi(argv[3]);
	if (alpha + beta > 64)
		return 2;
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < alpha; i++)
		if (pthread_create(&threads[n++], NULL, letters ? f : corebpf_alpha_worker, NULL))
			return 1;
	for (int i = 0; i < beta; i++)
		if (pthread_create(&threads[n++], NULL, letters ? d : corebpf_beta_worker, NULL))
			return 1;
	if (strcmp(argv[1], "exit") == 0)
		exit(0);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
