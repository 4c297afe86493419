// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of tcppktlat: one end of a loopback TCP connection whose reads are known.
 *
 *	peer ADDR PORT SLEEP_MS SIZE...
 *
 * connects to ADDR:PORT, then waits for a byte on stdin (the test starts its tracers meanwhile). Then, for each
 * SIZE, it waits until SIZE bytes have arrived (FIONREAD, which reads nothing), sleeps SLEEP_MS, takes them with
 * one recv() and answers with one byte. So each message is picked up once, at least SLEEP_MS after its last
 * byte arrived. It prints "done" and exits when all are read. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 17];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage sa = {};
	struct sockaddr_in *sin = (struct sockaddr_in *)&sa;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&sa;
	int port, fd, avail, one = 1;
	long sleep;
	char go;

	if (argc < 5)
		return 2;
	port = atoi(argv[2]);
	sleep = atol(argv[3]);
	if (inet_pton(AF_INET, argv[1], &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, argv[1], &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
	} else {
		return 2;
	}
	fd = socket(sa.ss_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("connect");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 4; i < argc; i++) {
		int size = atoi(argv[i]);

		if (size <= 0 || size > (int)sizeof(buf))
			return 2;
		do {
			if (ioctl(fd, FIONREAD, &avail) < 0)
				return 1;
			if (avail < size)
				usleep(1000);
		} while (avail < size);
		sleep_ms(sleep);
		if (recv(fd, buf, size, MSG_WAITALL) != size || send(fd, "k", 1, 0) != 1) {
			perror("exchange");
			return 1;
		}
	}
	printf("done\n");
	fflush(stdout);
	close(fd);
	return 0;
}
