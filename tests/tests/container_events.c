// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A workload of the container tests, built static, run both alone in a FROM scratch image and on the host:
 * `events SELF PORT N` waits for a byte on stdin, makes N getppid() calls, then starts a child that executes SELF
 * (this program's path where it runs) as `SELF child PORT`; the child binds a TCP socket to 127.0.0.1:PORT and
 * exits with status 7. The parent reaps it, prints "done", then waits for stdin to close. execsnoop, exitsnoop and bindsnoop
 * see one exec, one exit and one bind of the child; the tests tell the container's from the host's by PORT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char go;
    if (argc == 3 && strcmp(argv[1], "child") == 0) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
            return 2;
        return 7;
    }
    if (argc < 4 || read(0, &go, 1) != 1)
        return 1;
    for (int i = 0; i < atoi(argv[3]); i++)
        syscall(SYS_getppid);
    pid_t child = fork();
    if (child == 0) {
        execl(argv[1], argv[1], "child", argv[2], (char *)NULL);
        _exit(3);
    }
    int status;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 7)
        return 4;
    if (write(1, "done\n", 5) != 5)
        return 5;
    return read(0, &go, 1) < 0;
}
