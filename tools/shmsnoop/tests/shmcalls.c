// SPDX-License-Identifier: Apache-2.0 OR MIT
/* shmsnoop's ground truth: once "go" arrives on stdin, makes a known series of System V shared memory calls
 * through the C library and prints what the test needs to predict every line shmsnoop shows for them:
 *
 *   main thread: shmget(KEY, 20000, IPC_CREAT|IPC_EXCL|0600)  -> ID
 *                shmget(KEY, 20000, IPC_CREAT|IPC_EXCL|0600)  -> -EEXIST
 *                shmget(KEY, 0, 0)                           -> ID
 *                shmat(ID, NULL, SHM_RDONLY)                 -> A1
 *                shmat(ID, NULL, 0)                          -> A2
 *                shmdt(A1), shmdt(A2)                        -> 0, 0
 *                shmdt(A2)                                   -> -EINVAL (no longer attached)
 *                shmctl(ID, IPC_STAT, &ds)                   -> 0
 *                shmctl(ID, IPC_RMID, NULL)                  -> 0
 *                shmat(ID, NULL, 0)                          -> -EINVAL (removed)
 *   a thread:    shmget(IPC_PRIVATE, 4096, 0640)             -> TID_ID, then shmctl(TID_ID, IPC_RMID, NULL) -> 0
 *
 * KEY is made from the PID, so that runs side by side never share a segment. The thread starts first and waits
 * for the main thread's calls to end. The helper prints its thread's TID on a first line at once (for -t), then,
 * when every call is done, "KEY ID A1 A2 DS TID_ID" (KEY, A1, A2 and DS in hexadecimal, without 0x). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>

static int thread_id;
static pid_t thread_tid;
static pthread_barrier_t started, main_done;

static void *thread_calls(void *arg)
{
	(void)arg;
	thread_tid = gettid();
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&main_done);
	thread_id = shmget(IPC_PRIVATE, 4096, 0640);
	if (thread_id < 0 || shmctl(thread_id, IPC_RMID, NULL) != 0) {
		perror("thread shm");
		exit(1);
	}
	return NULL;
}

static void expect_error(long got, int err, const char *what)
{
	if (got != -1 || errno != err) {
		fprintf(stderr, "%s: want errno %d, got %ld (errno %d)\n", what, err, got, errno);
		exit(1);
	}
}

int main(void)
{
	char line[16];
	struct shmid_ds ds;
	key_t key = (key_t)(0x5e000000u | ((unsigned)getpid() & 0xffffff));
	void *a1, *a2;
	pthread_t t;
	int id;

	if (pthread_barrier_init(&started, NULL, 2) || pthread_barrier_init(&main_done, NULL, 2) ||
	    pthread_create(&t, NULL, thread_calls, NULL))
		return 1;
	pthread_barrier_wait(&started);
	printf("%d\n", (int)thread_tid);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	id = shmget(key, 20000, IPC_CREAT | IPC_EXCL | 0600);
	if (id < 0) {
		perror("shmget");
		return 1;
	}
	expect_error(shmget(key, 20000, IPC_CREAT | IPC_EXCL | 0600), EEXIST, "second shmget");
	if (shmget(key, 0, 0) != id) {
		perror("shmget lookup");
		return 1;
	}
	a1 = shmat(id, NULL, SHM_RDONLY);
	a2 = shmat(id, NULL, 0);
	if (a1 == (void *)-1 || a2 == (void *)-1 || shmdt(a1) || shmdt(a2)) {
		perror("shmat/shmdt");
		return 1;
	}
	expect_error(shmdt(a2), EINVAL, "second shmdt");
	if (shmctl(id, IPC_STAT, &ds) || ds.shm_segsz != 20000 || shmctl(id, IPC_RMID, NULL)) {
		perror("shmctl");
		return 1;
	}
	expect_error((long)shmat(id, NULL, 0), EINVAL, "shmat after IPC_RMID");
	pthread_barrier_wait(&main_done);
	if (pthread_join(t, NULL))
		return 1;
	printf("%x %d %lx %lx %lx %d\n", (unsigned)key, id, (unsigned long)a1, (unsigned long)a2, (unsigned long)&ds,
	       thread_id);
	return 0;
}
