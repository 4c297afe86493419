// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of tcpsubnet's tests: sends known byte counts over TCP to known IPv4 addresses, each to a listener
 * of its own on that address, so the bytes sent to each destination are exact.
 *
 * usage: netsend [-n] ADDR:BYTES...
 *   -n  in a network namespace of its own: loopback up, and each ADDR that is not 127.x added to it (so traffic
 *       to 10.x, 172.16.x, 192.168.x ... stays inside the helper)
 * Prints "ready" once set up, waits for a line, then for each ADDR:BYTES opens a listener on ADDR (any port),
 * connects to it, sends BYTES (the receiving end reads them all and sends nothing), closes both ends; prints
 * "done" and waits for a line (or the end of its input) before exiting. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[65536];

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void ifreq_addr(int fd, unsigned long req, const char *name, struct in_addr a) {
    struct ifreq ifr;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = a };
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    memcpy(&ifr.ifr_addr, &sa, sizeof sa);
    if (ioctl(fd, req, &ifr) < 0) die(name);
}

static void private_net(int n, struct in_addr *addrs) {
    struct ifreq ifr;
    int fd;
    if (unshare(CLONE_NEWNET) < 0) die("unshare");
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) die("SIOCGIFFLAGS");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) die("SIOCSIFFLAGS");
    for (int i = 0; i < n; i++) {
        char name[IFNAMSIZ];
        if ((ntohl(addrs[i].s_addr) >> 24) == 127) continue;
        snprintf(name, sizeof name, "lo:%d", i);
        ifreq_addr(fd, SIOCSIFADDR, name, addrs[i]);
        ifreq_addr(fd, SIOCSIFNETMASK, name, (struct in_addr){ .s_addr = 0xffffffff });
    }
    close(fd);
}

static void send_to(struct in_addr addr, long n) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = addr };
    socklen_t len = sizeof sa;
    int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), s;
    long got = 0, r;
    if (bind(l, (struct sockaddr *)&sa, len) < 0 || listen(l, 1) < 0) die("listen");
    getsockname(l, (struct sockaddr *)&sa, &len);
    if (connect(c, (struct sockaddr *)&sa, len) < 0) die("connect");
    if ((s = accept(l, NULL, NULL)) < 0) die("accept");
    memset(buf, 'x', sizeof buf);
    for (long left = n; left > 0;) {
        long w = send(c, buf, left < (long)sizeof buf ? left : (long)sizeof buf, 0);
        if (w <= 0) die("send");
        left -= w;
    }
    shutdown(c, SHUT_WR);
    while ((r = recv(s, buf, sizeof buf, 0)) > 0) got += r;
    if (got != n) {
        fprintf(stderr, "received %ld of %ld bytes\n", got, n);
        exit(1);
    }
    close(s);
    close(c);
    close(l);
}

int main(int argc, char **argv) {
    int netns = argc > 1 && strcmp(argv[1], "-n") == 0, n = argc - 1 - netns;
    struct in_addr addrs[64];
    long bytes[64];
    char line[64];
    if (n < 1 || n > 64) return 2;
    for (int i = 0; i < n; i++) {
        char *arg = argv[1 + netns + i], *colon = strchr(arg, ':');
        if (!colon) return 2;
        *colon = 0;
        if (inet_pton(AF_INET, arg, &addrs[i]) != 1) return 2;
        bytes[i] = atol(colon + 1);
    }
    if (netns) private_net(n, addrs);
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("ready\n");
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < n; i++) send_to(addrs[i], bytes[i]);
    printf("done\n");
    fgets(line, sizeof line, stdin);
    return 0;
}
