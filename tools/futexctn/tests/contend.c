// SPDX-License-Identifier: Apache-2.0 OR MIT
/* futexctn's test helper: a pthread mutex contended a known number of times.
 *
 * usage: contend THREADS ROUNDS [PAUSE_MS]. Prints "lock 0x<address of the mutex>", then waits for a byte on stdin. Each
 * round the main thread takes the mutex, starts THREADS threads that each try to take it, waits (reading
 * /proc/self/task/TID/syscall) until every one of them sleeps in futex() on the mutex, then lets it go: the
 * threads take it one after the other, each woken by the one before, so each thread makes exactly one futex wait
 * on the mutex that blocked and was woken. PAUSE_MS (default 0) is slept between rounds. Prints "waits N" (THREADS * ROUNDS) and "done", then waits for end of
 * file on stdin. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long taken;

static void __attribute__((noinline)) hold_a_while(void)
{
	struct timespec ts = { 0, 1000000 };

	taken++;
	nanosleep(&ts, NULL);
}

/* Takes the mutex, holds it a millisecond, lets it go. */
static void __attribute__((noinline)) lock_and_hold(void)
{
	pthread_mutex_lock(&lock);
	hold_a_while();
	pthread_mutex_unlock(&lock);
}

/* The contending thread's body. glibc keeps no frame pointer, so the user stack of the futex wait goes from the
 * innermost glibc frame to this function, the caller of lock_and_hold: the name the test looks for. */
static void *__attribute__((noinline)) contender(void *arg)
{
	(void)arg;
	lock_and_hold();
	return NULL;
}

/* True once thread `tid` sleeps in futex() (syscall 202 on x86-64) on the mutex. */
static int waits_on_lock(pid_t tid)
{
	char path[64], buf[256];
	unsigned long nr, addr;
	FILE *f;
	int ok = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%lu %lx", &nr, &addr) == 2)
		ok = nr == SYS_futex && addr == (unsigned long)&lock;
	fclose(f);
	return ok;
}

static pid_t tids[256];
static pid_t *volatile tid_slot;

static void *start(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	return contender(NULL);
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 5;
	int pause_ms = argc > 3 ? atoi(argv[3]) : 0;
	pthread_t th[256];
	char c;

	if (threads < 1 || threads > 256 || rounds < 1)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("lock %#lx\n", (unsigned long)&lock);
	if (read(0, &c, 1) != 1)
		return 1;
	for (int r = 0; r < rounds; r++) {
		pthread_mutex_lock(&lock);
		memset(tids, 0, sizeof(tids));
		for (int i = 0; i < threads; i++)
			if (pthread_create(&th[i], NULL, start, &tids[i]))
				return 1;
		for (int i = 0; i < threads; i++) {
			struct timespec ts = { 0, 1000000 };

			while (!__atomic_load_n(&tids[i], __ATOMIC_ACQUIRE) || !waits_on_lock(tids[i]))
				nanosleep(&ts, NULL);
		}
		pthread_mutex_unlock(&lock);
		for (int i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
		if (pause_ms > 0) {
			struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	printf("waits %lu\n", taken);
	printf("done\n");
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
