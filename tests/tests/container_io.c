// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The workload of the container tests of bitesize and futexctn: `container_io NAME FILE WRITES WAITS`.
 * Takes NAME as its comm, opens FILE (written and synced by the test: these are overwrites) with O_DIRECT, and once
 * a byte arrives on stdin writes WRITES times 64 KiB to it, one request at a time, then makes WAITS contended
 * futex waits: a second thread sleeps in FUTEX_WAIT until this one, having seen it asleep in the kernel (its state
 * in /proc is S, and it does nothing else), changes the word and wakes it. Every wait blocks and is woken, so each
 * is one wait futexctn counts. Prints "done" and waits for stdin to close. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int word;
static volatile int waiter_tid;
static volatile int rounds_left;

static long futex(int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* The waiter: one FUTEX_WAIT per round, on the word being 0; the waker sets it to 1 and wakes it. */
static void *waiter(void *arg)
{
	(void)arg;
	waiter_tid = (int)syscall(SYS_gettid);
	while (rounds_left > 0) {
		while (__atomic_load_n(&word, __ATOMIC_ACQUIRE) == 0)
			futex(&word, FUTEX_WAIT_PRIVATE, 0);
		__atomic_store_n(&word, 0, __ATOMIC_RELEASE);
		__atomic_sub_fetch(&rounds_left, 1, __ATOMIC_ACQ_REL);
	}
	return NULL;
}

/* Whether thread `tid` of this process is asleep (state S). */
static int asleep(int tid)
{
	char path[64], buf[256], *state;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	state = strrchr(buf, ')');
	return state && state[1] == ' ' && state[2] == 'S';
}

int main(int argc, char **argv)
{
	pthread_t thread;
	void *buf;
	char go;
	int fd, writes, waits;

	if (argc != 5 || posix_memalign(&buf, 4096, 65536))
		return 1;
	writes = atoi(argv[3]);
	waits = atoi(argv[4]);
	memset(buf, 'c', 65536);
	if (prctl(PR_SET_NAME, argv[1], 0, 0, 0))
		return 1;
	fd = open(argv[2], O_WRONLY | O_DIRECT);
	if (fd < 0 || read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < writes; i++)
		if (pwrite(fd, buf, 65536, (off_t)i * 65536) != 65536)
			return 1;
	rounds_left = waits;
	if (waits > 0) {
		if (pthread_create(&thread, NULL, waiter, NULL))
			return 1;
		for (int done = 0; done < waits; done++) {
			/* The waiter is back in FUTEX_WAIT for this round: the word is 0 and it sleeps. */
			while (!waiter_tid || rounds_left != waits - done || __atomic_load_n(&word, __ATOMIC_ACQUIRE) ||
			       !asleep(waiter_tid))
				usleep(200);
			__atomic_store_n(&word, 1, __ATOMIC_RELEASE);
			futex(&word, FUTEX_WAKE_PRIVATE, 1);
		}
		pthread_join(thread, NULL);
	}
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
