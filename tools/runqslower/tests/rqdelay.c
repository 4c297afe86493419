// SPDX-License-Identifier: Apache-2.0 OR MIT
/* runqslower's test helper: scheduling delays of known length, on one CPU.
 *
 *   rqdelay CPU K MS TAG
 *
 * Three threads, all pinned to CPU: "<TAG>h", a hog (SCHED_FIFO priority 2), "<TAG>s", a sleeper (SCHED_FIFO
 * priority 1) and "<TAG>p", a spinner (SCHED_OTHER). The helper prints "PID SLEEPER_TID HOG_TID SPINNER_TID"
 * and waits for a line on stdin; then the spinner spins until the end, and, K times, the hog waits until the
 * sleeper is blocked reading a pipe, wakes it by writing the pipe, spins for MS milliseconds and sleeps 5 ms.
 * A task of a higher real-time priority is never preempted by one of a lower, so each of the K wakeups of the
 * sleeper waits at least MS ms for the CPU, and as the sleeper outranks every normal task, it gets the CPU from
 * the hog itself when the hog sleeps. The spinner is preempted (still runnable) by the hog and waits too. The
 * helper prints "done" and exits once the sleeper has read all K bytes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int cpu, k, ms;
static const char *tag;
static int wake[2];
static volatile pid_t sleeper_tid, hog_tid, spinner_tid;
static volatile int started, finished;

static void pin_and_name(const char *suffix)
{
	char name[16];
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		exit(10);
	snprintf(name, sizeof(name), "%s%s", tag, suffix);
	prctl(PR_SET_NAME, name);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The state letter of thread `tid` ('S' when blocked in read). */
static char state_of(pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] && p[2] ? p[2] : '?';
}

static void *sleeper(void *arg)
{
	char c;
	int i;

	(void)arg;
	pin_and_name("s");
	sleeper_tid = syscall(SYS_gettid);
	for (i = 0; i < k; i++)
		if (read(wake[0], &c, 1) != 1)
			exit(11);
	return NULL;
}

static void *spinner(void *arg)
{
	(void)arg;
	pin_and_name("p");
	spinner_tid = syscall(SYS_gettid);
	while (!started)
		usleep(1000);
	while (!finished)
		;
	return NULL;
}

static void *hog(void *arg)
{
	struct timespec pause = { 0, 5 * 1000 * 1000 };
	double start, deadline;
	int i;

	(void)arg;
	pin_and_name("h");
	hog_tid = syscall(SYS_gettid);
	while (!started)
		usleep(1000);
	for (i = 0; i < k; i++) {
		deadline = now_ms() + 10000;
		while (state_of(sleeper_tid) != 'S') {
			if (now_ms() > deadline)
				exit(14);
			nanosleep(&pause, NULL);
		}
		if (write(wake[1], "w", 1) != 1)
			exit(15);
		start = now_ms();
		while (now_ms() - start < ms)
			;
		nanosleep(&pause, NULL);
	}
	finished = 1;
	return NULL;
}

static void set_fifo(pid_t tid, int priority)
{
	struct sched_param param = { .sched_priority = priority };

	if (sched_setscheduler(tid, SCHED_FIFO, &param))
		exit(13);
}

int main(int argc, char **argv)
{
	pthread_t s, h, p;
	char line[16];

	if (argc != 5)
		return 2;
	cpu = atoi(argv[1]);
	k = atoi(argv[2]);
	ms = atoi(argv[3]);
	tag = argv[4];
	if (pipe(wake))
		return 3;
	if (pthread_create(&s, NULL, sleeper, NULL) || pthread_create(&h, NULL, hog, NULL) ||
	    pthread_create(&p, NULL, spinner, NULL))
		return 4;
	while (!sleeper_tid || !hog_tid || !spinner_tid)
		usleep(1000);
	printf("%d %d %d %d\n", getpid(), sleeper_tid, hog_tid, spinner_tid);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 5;
	set_fifo(sleeper_tid, 1);
	set_fifo(hog_tid, 2);
	started = 1;
	pthread_join(h, NULL);
	pthread_join(p, NULL);
	pthread_join(s, NULL);
	printf("done\n");
	return 0;
}
