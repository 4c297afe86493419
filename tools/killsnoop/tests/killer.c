// SPDX-License-Identifier: Apache-2.0 OR MIT
/* killsnoop's test helper: waits for a line on stdin, then makes known kill, tkill and tgkill calls at a child of
 * its own (which ignores SIGUSR1 and SIGUSR2) and at a PID already reaped, checks each result, and prints
 * "CHILD DEAD" (the two PIDs) once done:
 *   kill(child, 0)                  0       the existence probe
 *   kill(child, SIGUSR1)            0
 *   kill(child, SIGUSR2)            0
 *   kill(dead, SIGTERM)             -ESRCH  dead is a child already reaped
 *   kill(child, 65)                 -EINVAL no such signal
 *   tkill(child, SIGUSR1)           0
 *   tgkill(child, child, SIGUSR2)   0
 *   kill(child, SIGKILL)            0       then the child is reaped and the helper exits */
#define _GNU_SOURCE
#include <errno.h>
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

	if (pipe(ready))
		return 100;
	child = fork();
	if (child == 0) {
		signal(SIGUSR1, SIG_IGN);
		signal(SIGUSR2, SIG_IGN);
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
	if (kill(child, 0) || kill(child, SIGUSR1) || kill(child, SIGUSR2))
		return 103;
	if (kill(dead, SIGTERM) != -1 || errno != ESRCH)
		return 104;
	if (syscall(SYS_kill, child, 65) != -1 || errno != EINVAL)
		return 105;
	if (syscall(SYS_tkill, child, SIGUSR1) || syscall(SYS_tgkill, child, child, SIGUSR2))
		return 106;
	if (kill(child, SIGKILL))
		return 107;
	waitpid(child, NULL, 0);
	printf("%d %d\n", child, dead);
	return 0;
}
