// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A workload of the container tests, built static, run both alone in a FROM scratch image and on the host:
 * `killtcp PORT` waits for a byte on stdin, probes itself with kill(getpid(), 0) (signal 0: nothing is
 * delivered), then makes one TCP session with itself on 127.0.0.1:PORT: it listens, connects, accepts, sends 100
 * bytes, closes the connecting end, reads the 100 bytes to end of file and closes the accepted end, so that both
 * ends are closed by this process. Then it prints "done" and waits for stdin to close. killsnoop sees one kill()
 * from it, tcplife two sessions (one end each) on PORT. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
/* Says which step failed, and why, on stdout (where the test reads "done"), and returns its code. */
static int fail(int step)
{
    printf("failed at step %d: errno %d\n", step, errno);
    fflush(stdout);
    return step;
}

int main(int argc, char **argv)
{
    char go, buf[100] = {0};
    if (argc < 2 || read(0, &go, 1) != 1)
        return 1;
    if (kill(getpid(), 0) != 0)
        return fail(2);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0)
        return fail(3);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) != 0)
        return fail(4);
    int s = accept(l, NULL, NULL);
    if (s < 0 || write(c, buf, sizeof(buf)) != sizeof(buf))
        return fail(5);
    close(c);
    ssize_t n, got = 0;
    while ((n = read(s, buf, sizeof(buf))) > 0)
        got += n;
    if (got != sizeof(buf))
        return fail(6);
    close(s);
    close(l);
    if (write(1, "done\n", 5) != 5)
        return 7;
    return read(0, &go, 1) < 0;
}
