// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of tcpsynbl's tests: a loopback listener with a known backlog that never accepts, and N connections
 * to it made one at a time, each only once the previous one is in the accept queue, so the queue length seen
 * at each handshake is exactly 0, 1, ..., N-1.
 *
 * usage: fill 4|6 BACKLOG N
 * Prints "ready" once listening, waits for a line, connects N times, prints "done" and waits for a line (or the
 * end of its input) before exiting. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* The listener's accept-queue length: TCP_INFO's tcpi_unacked on a listening socket. */
static unsigned queued(int l) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(l, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0) die("TCP_INFO");
    return ti.tcpi_unacked;
}

int main(int argc, char **argv) {
    int v6, backlog, n, l, one = 1;
    struct sockaddr_storage ss;
    socklen_t len;
    char line[64];
    if (argc != 4) return 2;
    v6 = argv[1][0] == '6';
    backlog = atoi(argv[2]);
    n = atoi(argv[3]);
    memset(&ss, 0, sizeof ss);
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    l = socket(ss.ss_family, SOCK_STREAM, 0);
    if (v6) setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&ss, len) < 0 || listen(l, backlog) < 0) die("listen");
    getsockname(l, (struct sockaddr *)&ss, &len);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < n; i++) {
        int c = socket(ss.ss_family, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&ss, len) < 0) die("connect");
        for (int tries = 0; queued(l) < (unsigned)i + 1; tries++) {
            struct timespec ms = { 0, 1000000 };
            if (tries > 10000) {
                fprintf(stderr, "connection %d never reached the accept queue\n", i);
                return 1;
            }
            nanosleep(&ms, NULL);
        }
    }
    printf("done\n");
    fgets(line, sizeof line, stdin);
    return 0;
}
