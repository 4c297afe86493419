// SPDX-License-Identifier: Apache-2.0 OR MIT
/* sigsnoop's test helper: waits for a line on stdin, then sends known signals to a child of its own that blocks
 * SIGUSR1 and ignores SIGUSR2, and prints "CHILD DEAD" (the two PIDs) once done:
 *   kill(child, SIGUSR1)            queued (0)
 *   kill(child, SIGUSR1)            already pending (2)
 *   kill(child, SIGUSR2)            ignored (1)
 *   kill(dead, 0)                   ESRCH: dead is a child already reaped (no signal is generated)
 *   tgkill(child, child, SIGUSR1)   queued on the thread (0)
 *   tkill(child, SIGUSR1)           already pending on the thread (2)
 *   kill(child, SIGKILL)            delivered (0), then the child is reaped */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	char line[16], c;
	int ready[2];
	pid_t child, dead;
	sigset_t usr1;

	if (pipe(ready))
		return 100;
	child = fork();
	if (child == 0) {
		signal(SIGUSR2, SIG_IGN);
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr1, NULL);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	if (read(ready[0], &c, 1) != 1)
		return 101;
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	if (!fgets(line, sizeof line, stdin))
		return 102;
	if (kill(child, SIGUSR1) || kill(child, SIGUSR1) || kill(child, SIGUSR2))
		return 103;
	if (kill(dead, 0) != -1)
		return 104;
	if (syscall(SYS_tgkill, child, child, SIGUSR1) || syscall(SYS_tkill, child, SIGUSR1))
		return 105;
	if (kill(child, SIGKILL))
		return 106;
	waitpid(child, NULL, 0);
	printf("%d %d\n", child, dead);
	return 0;
}
