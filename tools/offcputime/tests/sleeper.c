// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of offcputime's tests: after a byte on stdin it blocks K times for MS ms in
 * main -> helper_sleep_outer -> helper_sleep (a raw nanosleep system call made from helper_sleep itself, so the user
 * stack's innermost frame is helper_sleep whatever the C library's frame pointers), and prints the wall time of
 * the blocks in microseconds: an upper bound of their time off CPU, which the tests check the tool's total against. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* nanosleep(2) made here, not in the C library, so that this function is the innermost user frame. */
static inline __attribute__((always_inline)) long raw_nanosleep(const struct timespec *ts)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "a"(35), "D"(ts), "S"(0) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = 101;
	register long x0 __asm__("x0") = (long)ts;
	register long x1 __asm__("x1") = 0;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
	ret = x0;
#else
	ret = nanosleep(ts, NULL);
#endif
	return ret;
}

__attribute__((noinline)) void helper_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	raw_nanosleep(&ts);
}

__attribute__((noinline)) void helper_sleep_outer(int k, long ms)
{
	for (int i = 0; i < k; i++)
		helper_sleep(ms);
}

static int k = 10;
static long ms = 20;

static void *sleeper_thread(void *arg)
{
	helper_sleep_outer(k, ms);
	return arg;
}

/* helper K MS [linger|thread]: waits for a byte on stdin, blocks K times for MS ms (with thread, in a thread it
 * starts then, as start_thread -> helper_sleep_outer -> helper_sleep), prints how long that took, then (with
 * linger) waits for stdin to close before exiting. */
int main(int argc, char **argv)
{
	char c;
	int thread = argc > 3 && strcmp(argv[3], "thread") == 0;
	struct timespec t0, t1;
	pthread_t t;
	k = argc > 1 ? atoi(argv[1]) : 10;
	ms = argc > 2 ? atol(argv[2]) : 20;
	if (read(0, &c, 1) != 1)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (thread) {
		if (pthread_create(&t, NULL, sleeper_thread, NULL) || pthread_join(t, NULL))
			return 1;
	} else {
		helper_sleep_outer(k, ms);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* The wall time of the blocks, in microseconds: an upper bound of their time off CPU. */
	printf("%ld\n", (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000);
	fflush(stdout);
	if (argc > 3 && !thread)
		while (read(0, &c, 1) > 0)
			;
	return 0;
}
