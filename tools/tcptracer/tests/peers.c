// SPDX-License-Identifier: Apache-2.0 OR MIT
/* tcptracer's test helper: two processes making known TCP connections on loopback (argv[1]: 4 or 6).
 *
 * The parent (the server) listens on a fresh port and forks the client. It prints "pids SERVER CLIENT PORT
 * REFUSED\n" (REFUSED: a port nobody listens on) and waits for a byte on stdin. Then the client connects to
 * REFUSED (refused: never established), connects to PORT, sends "x", reads "y" and closes first; the server
 * accepts, reads "x", sends "y", reads the end of the stream and closes. The server prints "done CPORT\n" (the
 * client's port) once both are done, and exits 0. With "abort" as argv[2] the server closes at once after
 * sending "y" with SO_LINGER 0 (a reset, the connection going straight to CLOSE on both sides), and the client
 * waits for that reset before it closes. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int family;

static socklen_t loopback(struct sockaddr_storage *ss, unsigned short port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons(port);
		return sizeof(*a);
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	a->sin6_family = AF_INET6;
	a->sin6_addr = in6addr_loopback;
	a->sin6_port = htons(port);
	return sizeof(*a);
}

static unsigned short port_of(int fd, int peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if ((peer ? getpeername(fd, (struct sockaddr *)&ss, &len) : getsockname(fd, (struct sockaddr *)&ss, &len)))
		exit(3);
	return ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
				       : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* A socket bound to a fresh loopback port. */
static int bound(void)
{
	struct sockaddr_storage ss;
	socklen_t len = loopback(&ss, 0);
	int fd = socket(family, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len))
		exit(3);
	return fd;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	int go[2], l, probe, fd, status, abort_close;
	unsigned short port, refused;
	char c;
	pid_t client;

	if (argc != 2 && argc != 3)
		return 2;
	abort_close = argc == 3 && !strcmp(argv[2], "abort");
	family = strcmp(argv[1], "6") ? AF_INET : AF_INET6;
	l = bound();
	if (listen(l, 8))
		return 3;
	port = port_of(l, 0);
	probe = bound();
	refused = port_of(probe, 0);
	close(probe);
	if (pipe(go))
		return 3;
	client = fork();
	if (client < 0)
		return 3;
	if (client == 0) {
		socklen_t len;

		close(l);
		if (read(go[0], &c, 1) != 1)
			_exit(4);
		fd = socket(family, SOCK_STREAM, 0);
		len = loopback(&ss, refused);
		if (connect(fd, (struct sockaddr *)&ss, len) == 0)
			_exit(5);
		close(fd);
		fd = socket(family, SOCK_STREAM, 0);
		len = loopback(&ss, port);
		if (connect(fd, (struct sockaddr *)&ss, len) || write(fd, "x", 1) != 1 || read(fd, &c, 1) != 1 || c != 'y')
			_exit(6);
		if (abort_close && read(fd, &c, 1) >= 0)
			_exit(7);
		close(fd);
		_exit(0);
	}
	printf("pids %d %d %u %u\n", (int)getpid(), (int)client, port, refused);
	fflush(stdout);
	if (read(0, &c, 1) != 1)
		return 4;
	if (write(go[1], "g", 1) != 1)
		return 3;
	fd = accept(l, NULL, NULL);
	if (fd < 0 || read(fd, &c, 1) != 1 || c != 'x' || write(fd, "y", 1) != 1)
		return 6;
	port = port_of(fd, 1);
	if (abort_close) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
			return 3;
	} else if (read(fd, &c, 1) != 0) {
		return 7;
	}
	close(fd);
	if (waitpid(client, &status, 0) != client || !WIFEXITED(status) || WEXITSTATUS(status))
		return 8;
	printf("done %u\n", port);
	fflush(stdout);
	return 0;
}
