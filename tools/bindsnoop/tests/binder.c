// SPDX-License-Identifier: Apache-2.0 OR MIT
/* bindsnoop's ground truth: after a byte on stdin, binds TCP and UDP sockets, IPv4 and IPv6, with known options,
 * some to a port already taken (EADDRINUSE), plus binds bindsnoop must not show (a Unix socket, a descriptor that
 * is no socket). For every IPv4/IPv6 bind it prints what the tool should report:
 *     PROTO ADDR PORT OPTS IF RET
 * (the port the socket got, or asked for when the bind failed), then "done", and waits for its stdin to close so
 * that every socket stays open (and its port taken) while the test reads. An argument is the port of the first
 * (TCP, IPv4) bind and of the failing one after it, for -P. A second argument "v6long" adds two binds to an IPv6
 * address longer than 15 characters that the machine does not have: without IP_FREEBIND (EADDRNOTAVAIL, whose
 * text is the longest of a bind's errors but one), then with it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef IP_FREEBIND
#define IP_FREEBIND 15
#endif
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT 75
#endif

#define F 1
#define T 2
#define N 4
#define R 8
#define r 16

static void on(int fd, int level, int opt)
{
	int one = 1;

	if (setsockopt(fd, level, opt, &one, sizeof(one)))
		perror("setsockopt");
}

/* Binds a new socket of `family`/`type` to addr:port with options `opts` (and device "lo" if `lo`), prints the
 * expected line, returns the port the socket holds (or asked for). */
static int do_bind(int family, int type, const char *addr, int port, int opts, int lo)
{
	struct sockaddr_storage ss = {};
	socklen_t len;
	int fd = socket(family, type, 0), ret, ifx = 0;
	const char *proto = type == SOCK_STREAM ? "TCP" : "UDP";

	if (opts & F)
		on(fd, SOL_IP, IP_FREEBIND);
	if (opts & T)
		on(fd, family == AF_INET6 ? SOL_IPV6 : SOL_IP, family == AF_INET6 ? IPV6_TRANSPARENT : IP_TRANSPARENT);
	if (opts & N)
		on(fd, SOL_IP, IP_BIND_ADDRESS_NO_PORT);
	if (opts & R)
		on(fd, SOL_SOCKET, SO_REUSEADDR);
	if (opts & r)
		on(fd, SOL_SOCKET, SO_REUSEPORT);
	if (lo) {
		if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3))
			perror("SO_BINDTODEVICE");
		ifx = 1;
	}
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		inet_pton(AF_INET, addr, &a->sin_addr);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		inet_pton(AF_INET6, addr, &a->sin6_addr);
		len = sizeof(*a);
	}
	ret = bind(fd, (struct sockaddr *)&ss, len) ? -errno : 0;
	if (!ret) {
		getsockname(fd, (struct sockaddr *)&ss, &len);
		port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					       : ((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	printf("%s %s %d %c%c%c%c%c %d %d\n", proto, addr, port, opts & F ? 'F' : '.', opts & T ? 'T' : '.',
	       opts & N ? 'N' : '.', opts & R ? 'R' : '.', opts & r ? 'r' : '.', ifx, ret);
	return port;
}

int main(int argc, char **argv)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int p, ufd, nfd;
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	p = do_bind(AF_INET, SOCK_STREAM, "127.0.0.1", argc > 1 ? atoi(argv[1]) : 0, R, 0);
	do_bind(AF_INET, SOCK_STREAM, "127.0.0.1", p, 0, 0); /* EADDRINUSE */
	p = do_bind(AF_INET, SOCK_DGRAM, "127.0.0.1", 0, r, 0);
	do_bind(AF_INET, SOCK_DGRAM, "127.0.0.1", p, r, 0);
	do_bind(AF_INET, SOCK_DGRAM, "127.0.0.1", p, r, 0);
	do_bind(AF_INET, SOCK_DGRAM, "0.0.0.0", 0, 0, 1);
	do_bind(AF_INET, SOCK_STREAM, "127.0.0.1", 0, F | N, 0);
	p = do_bind(AF_INET6, SOCK_STREAM, "::1", 0, T, 0);
	do_bind(AF_INET6, SOCK_STREAM, "::1", p, 0, 0); /* EADDRINUSE */
	do_bind(AF_INET6, SOCK_DGRAM, "::", 0, R | r, 0);
	if (argc > 2 && !strcmp(argv[2], "v6long")) {
		do_bind(AF_INET6, SOCK_STREAM, "fd00:5ee:1234:5678:9abc:def0:4321:8765", 0, 0, 0); /* EADDRNOTAVAIL */
		do_bind(AF_INET6, SOCK_STREAM, "fd00:5ee:1234:5678:9abc:def0:4321:8765", 0, F, 0);
	}

	/* Not IPv4/IPv6: never shown. */
	ufd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "bindsnoop-test-%d", getpid());
	if (bind(ufd, (struct sockaddr *)&un, sizeof(un)))
		perror("bind AF_UNIX");
	nfd = open("/dev/null", O_RDONLY);
	if (!bind(nfd, (struct sockaddr *)&un, sizeof(un)) || errno != ENOTSOCK)
		perror("bind /dev/null");

	printf("done\n");
	fflush(stdout);
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
