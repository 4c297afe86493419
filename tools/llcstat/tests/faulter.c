// SPDX-License-Identifier: Apache-2.0 OR MIT
/* llcstat's test helper: page faults of a known number, by thread, on one CPU.
 *
 *	faulter CPU MAIN_PAGES THREAD_PAGES FILE_PAGES FILE
 *
 * Pins itself (and so its thread) to CPU, maps MAIN_PAGES + THREAD_PAGES anonymous pages and FILE_PAGES pages of
 * FILE (written, synced and dropped from the page cache, read without readahead), starts one thread, prints
 * "ready" and waits for a byte on stdin. Then the main thread touches its MAIN_PAGES anonymous pages (one minor
 * fault each) and FILE_PAGES file pages (one major fault each: read from disk), the thread touches its
 * THREAD_PAGES pages (one minor fault each), and it prints "done TID MAJOR MINOR ..." with each thread's own
 * counts of the faults between the go byte and the print (getrusage), then waits for stdin to close.
 *
 * Everything the work runs is run once before "ready", so no first use of a code or stack page adds a fault of
 * its own while llcstat counts. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static long page;
static char *anon_main, *anon_thread, *file_map;
static long n_main, n_thread, n_file;
static int go_pipe[2], back_pipe[2];
static char report[512];
static struct rusage before_thread, after_thread;
static long thread_tid;

static void touch(char *p, long pages, int write)
{
	volatile char sink = 0;
	for (long i = 0; i < pages; i++) {
		if (write)
			p[i * page] = 1;
		else
			sink += ((volatile char *)p)[i * page];
	}
	(void)sink;
}

static void *thread_main(void *arg)
{
	char c;
	char warm[1];
	(void)arg;
	thread_tid = syscall(SYS_gettid);
	/* Warm-up: the same calls as the work, on a page already present. */
	touch(warm, 1, 1);
	getrusage(RUSAGE_THREAD, &before_thread);
	if (write(back_pipe[1], "r", 1) != 1 || read(go_pipe[0], &c, 1) != 1)
		exit(1);
	getrusage(RUSAGE_THREAD, &before_thread);
	touch(anon_thread, n_thread, 1);
	getrusage(RUSAGE_THREAD, &after_thread);
	if (write(back_pipe[1], "d", 1) != 1)
		exit(1);
	/* Stays until the main thread ends the run, so that no exit path of a thread runs while llcstat counts. */
	while (read(go_pipe[0], &c, 1) > 0)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	cpu_set_t set;
	pthread_t th;
	struct rusage before, after;
	char c, warm[1];
	int fd;

	if (argc != 6) {
		fprintf(stderr, "usage: faulter CPU MAIN_PAGES THREAD_PAGES FILE_PAGES FILE\n");
		return 2;
	}
	page = sysconf(_SC_PAGESIZE);
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[1]), &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	n_main = atol(argv[2]);
	n_thread = atol(argv[3]);
	n_file = atol(argv[4]);

	anon_main = mmap(NULL, (n_main + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	anon_thread = mmap(NULL, (n_thread + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon_main == MAP_FAILED || anon_thread == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(anon_main, (n_main + 1) * page, MADV_NOHUGEPAGE);
	madvise(anon_thread, (n_thread + 1) * page, MADV_NOHUGEPAGE);

	/* The file: written, synced, dropped from the page cache, then mapped for reading without readahead. */
	fd = open(argv[5], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	char *buf = calloc(1, page);
	for (long i = 0; i < n_file + 1; i++) {
		buf[0] = (char)i;
		if (write(fd, buf, page) != page) {
			perror("write");
			return 1;
		}
	}
	fsync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	file_map = mmap(NULL, (n_file + 1) * page, PROT_READ, MAP_SHARED, fd, 0);
	if (file_map == MAP_FAILED) {
		perror("mmap file");
		return 1;
	}
	madvise(file_map, (n_file + 1) * page, MADV_RANDOM);

	if (pipe(go_pipe) || pipe(back_pipe)) {
		perror("pipe");
		return 1;
	}
	if (pthread_create(&th, NULL, thread_main, NULL)) {
		perror("pthread_create");
		return 1;
	}
	if (read(back_pipe[0], &c, 1) != 1)
		return 1;
	/* Warm-up of the main thread's path: the calls the work makes, on pages already present. */
	touch(warm, 1, 1);
	touch(warm, 1, 0);
	getrusage(RUSAGE_THREAD, &before);
	snprintf(report, sizeof(report), "warm %d %ld %ld %ld %ld %ld\n", 0, 0L, 0L, 0L, 0L, 0L);
	printf("ready %d\n", getpid());
	fflush(stdout);

	if (read(0, &c, 1) != 1)
		return 1;
	getrusage(RUSAGE_THREAD, &before);
	touch(anon_main, n_main, 1);
	touch(file_map, n_file, 0);
	getrusage(RUSAGE_THREAD, &after);
	if (write(go_pipe[1], "g", 1) != 1 || read(back_pipe[0], &c, 1) != 1)
		return 1;
	int len = snprintf(report, sizeof(report), "done %d %ld %ld %ld %ld %ld\n", getpid(),
			   after.ru_majflt - before.ru_majflt, after.ru_minflt - before.ru_minflt, thread_tid,
			   after_thread.ru_majflt - before_thread.ru_majflt,
			   after_thread.ru_minflt - before_thread.ru_minflt);
	if (write(1, report, len) != len)
		return 1;
	while (read(0, &c, 1) > 0)
		;
	close(go_pipe[1]);
	pthread_join(th, NULL);
	unlink(argv[5]);
	return 0;
}
