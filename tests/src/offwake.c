// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of the off-CPU wakeup tests (offwaketime, wakeuptime; see offwake.rs). `helper K T`: after a byte on
 * stdin, a thread named "reader" blocks K times reading a pipe in main -> reader_loop -> reader_wait, and a thread
 * named "writer" wakes it each time by writing the pipe from writer_loop -> writer_wake after T ms. Both system
 * calls are made from those functions themselves (raw syscalls), so they are the innermost user frames. With a
 * third argument the helper lingers after its run until stdin closes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static int k = 10, ms = 20;

static inline __attribute__((always_inline)) long raw3(long nr, long a, long b, long c)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#endif
	return ret;
}

#if defined(__x86_64__)
#define NR_READ 0
#define NR_WRITE 1
#else
#define NR_READ 63
#define NR_WRITE 64
#endif

__attribute__((noinline)) void reader_wait(void)
{
	char c;
	raw3(NR_READ, fds[0], (long)&c, 1);
}

__attribute__((noinline)) void reader_loop(void)
{
	for (int i = 0; i < k; i++)
		reader_wait();
}

__attribute__((noinline)) void writer_wake(void)
{
	char c = 'w';
	raw3(NR_WRITE, fds[1], (long)&c, 1);
}

__attribute__((noinline)) void *writer_loop(void *arg)
{
	prctl(PR_SET_NAME, "writer");
	for (int i = 0; i < k; i++) {
		struct timespec ts = { 0, ms * 1000000L };
		nanosleep(&ts, NULL);
		writer_wake();
	}
	return arg;
}

int main(int argc, char **argv)
{
	char c;
	pthread_t writer;
	k = argc > 1 ? atoi(argv[1]) : 10;
	ms = argc > 2 ? atoi(argv[2]) : 20;
	if (pipe(fds) || read(0, &c, 1) != 1)
		return 1;
	prctl(PR_SET_NAME, "reader");
	pthread_create(&writer, NULL, writer_loop, NULL);
	reader_loop();
	pthread_join(writer, NULL);
	/* `helper K T linger`: say "done" and live on until stdin closes (a tool that names a process's frames from
	 * its memory maps can then read them). */
	if (argc > 3) {
		printf("done\n");
		fflush(stdout);
		while (read(0, &c, 1) > 0)
			;
	}
	return 0;
}
