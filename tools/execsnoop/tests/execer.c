// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of execsnoop's tests. `helper TAG K MAXARG UID`: after a line on stdin, (as UID unless it is -1)
 * forks K children that exec `/bin/true TAG <i> <even|odd> x1..xMAXARG`, one child that execs a missing file
 * (ENOENT) and one that fexecve()s /bin/true (an execveat), waiting for each; exits 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void run(char *path, char **argv, int fexec) {
    pid_t pid = fork();
    if (pid == 0) {
        if (fexec) {
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            extern char **environ;
            fexecve(fd, argv, environ);
        } else {
            execv(path, argv);
        }
        _exit(127);
    }
    waitpid(pid, NULL, 0);
}

int main(int argc, char **argv) {
    char *tag = argv[1];
    int k = atoi(argv[2]), extra = atoi(argv[3]), uid = atoi(argv[4]);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    if (uid >= 0 && setuid(uid)) return 1;
    for (int i = 0; i < k; i++) {
        char num[16], xs[200][8];
        char *args[208] = {"/bin/true", tag, num, i % 2 ? "odd" : "even"};
        snprintf(num, sizeof num, "%d", i);
        for (int x = 0; x < extra && x < 200; x++) {
            snprintf(xs[x], sizeof xs[x], "x%d", x + 1);
            args[4 + x] = xs[x];
        }
        run("/bin/true", args, 0);
    }
    char missing[256];
    snprintf(missing, sizeof missing, "/nonexistent/%s", tag);
    char *margs[] = {missing, tag, NULL};
    run(missing, margs, 0);
    char *fargs[] = {"fexecve-true", tag, NULL};
    run("/bin/true", fargs, 1);
    return 0;
}
