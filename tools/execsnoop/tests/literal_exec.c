// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A helper of execsnoop's tests: after a line on stdin, forks a child that execs SCRIPT (a -D define: the path of
 * a shell script) with the arguments "one" and "two", all string literals whose pages the child has not touched;
 * exits 0 if the script did. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char line[8];
    int status;
    if (!fgets(line, sizeof line, stdin)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        execl(SCRIPT, SCRIPT, "one", "two", (char *)0);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
