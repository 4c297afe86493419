// SPDX-License-Identifier: Apache-2.0 OR MIT
// A native program with glibc's thread-start probe (provider libc, pthread_start(thread, start_routine, arg)),
// for uthreads' test of its C path where the C library has no probes (Debian's glibc): after a go byte on stdin
// it starts THREADS threads one after another, each running worker_routine, which fires the probe first (as
// glibc's start_thread does, in the new thread) and prints its TID; then it prints "done" and exits.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/sdt.h>

#ifndef THREADS
#define THREADS 4
#endif

__attribute__((noinline)) void *worker_routine(void *arg)
{
	DTRACE_PROBE3(libc, pthread_start, (void *)pthread_self(), (void *)worker_routine, arg);
	printf("%d\n", gettid());
	fflush(stdout);
	return arg;
}

int main(void)
{
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	for (long i = 0; i < THREADS; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, worker_routine, (void *)i) || pthread_join(t, NULL))
			return 1;
	}
	printf("done\n");
	fflush(stdout);
	return 0;
}
