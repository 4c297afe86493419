// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of tcptop's tests: makes loopback TCP connections to its own listener (a fresh port) and sends known
 * byte counts each way, so each connection's bytes are exact at both ends. Usage below, at main. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[65536];

static void send_all(int fd, long n) {
    memset(buf, 'x', sizeof buf);
    while (n > 0) {
        long w = send(fd, buf, n < (long)sizeof buf ? n : (long)sizeof buf, 0);
        if (w <= 0) exit(3);
        n -= w;
    }
}

static void recv_exact(int fd, long n) {
    while (n > 0) {
        long r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) exit(4);
        n -= r;
    }
}

static unsigned short port_of(int fd) {
    struct sockaddr_in6 sa;
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    return ntohs(sa.sin6_port); /* sin_port and sin6_port are at the same offset */
}

/* argv: 4|6 then A:B per connection (the client sends A bytes, the server B back). Prints its PID, waits for a
 * line, makes the connections (kept open), prints "client,server,A,B" for each on one line, waits for a line. */
int main(int argc, char **argv) {
    int v6 = argv[1][0] == '6', fam = v6 ? AF_INET6 : AF_INET;
    struct sockaddr_storage ss;
    socklen_t len;
    char line[64];
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
    printf("%d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    int l = socket(fam, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&ss, len) || listen(l, 16)) return 2;
    getsockname(l, (struct sockaddr *)&ss, &len);
    for (int i = 2; i < argc; i++) {
        long a = atol(argv[i]), b = atol(strchr(argv[i], ':') + 1);
        int c = socket(fam, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (struct sockaddr *)&ss, len)) return 2;
        int s = accept(l, NULL, NULL);
        if (s < 0) return 2;
        send_all(c, a);
        recv_exact(s, a);
        send_all(s, b);
        recv_exact(c, b);
        printf("%s%u,%u,%ld,%ld", i > 2 ? " " : "", port_of(c), port_of(l), a, b);
    }
    printf("\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 0;
    return 0;
}
