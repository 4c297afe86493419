// SPDX-License-Identifier: Apache-2.0 OR MIT
/* solisten's ground truth: after a byte on stdin, listens on TCP sockets, IPv4 and IPv6, with known backlogs: one
 * bound to a port, one never bound (the kernel picks its port at listen), one with a backlog above somaxconn (the
 * kernel caps it), one that fails (a connected socket: EINVAL), and a UDP socket (EOPNOTSUPP: never shown). For
 * every TCP listen it prints what solisten should report:
 *     PROTO ADDR PORT BACKLOG RET
 * then "done", and keeps its sockets until its stdin closes. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int somaxconn(void)
{
	FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
	int n = 4096;

	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = 4096;
		fclose(f);
	}
	return n;
}

static void report(int fd, int family, int backlog, int ret)
{
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	char addr[64] = "?";
	int port;

	getsockname(fd, (struct sockaddr *)&ss, &len);
	if (family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	} else {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, sizeof(addr));
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	printf("TCPv%d %s %d %d %d\n", family == AF_INET ? 4 : 6, addr, port, backlog, ret);
}

/* A TCP socket of `family`, bound to `addr` port 0 unless addr is NULL, listening with `backlog`. */
static int do_listen(int family, const char *addr, int backlog, int shown)
{
	struct sockaddr_storage ss = {};
	int fd = socket(family, SOCK_STREAM, 0), ret;

	if (addr) {
		if (family == AF_INET) {
			((struct sockaddr_in *)&ss)->sin_family = AF_INET;
			inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr);
		} else {
			((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
			inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr);
		}
		if (bind(fd, (struct sockaddr *)&ss, sizeof(ss)))
			perror("bind");
	}
	ret = listen(fd, backlog) ? -errno : 0;
	report(fd, family, shown, ret);
	return fd;
}

int main(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	socklen_t len = sizeof(to);
	int first, c, u;
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	first = do_listen(AF_INET, "127.0.0.1", 7, 7);
	do_listen(AF_INET6, "::1", 100, 100);
	do_listen(AF_INET, NULL, 3, 3);
	do_listen(AF_INET6, "::", 1 << 20, somaxconn());

	/* A connected socket cannot listen: EINVAL, reported with what it asked. */
	getsockname(first, (struct sockaddr *)&to, &len);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&to, sizeof(to)))
		perror("connect");
	report(c, AF_INET, 9, listen(c, 9) ? -errno : 0);

	/* UDP: listen is not for datagrams (EOPNOTSUPP), never shown. */
	u = socket(AF_INET, SOCK_DGRAM, 0);
	if (!listen(u, 5) || errno != EOPNOTSUPP)
		perror("listen UDP");

	printf("done\n");
	fflush(stdout);
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
