// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The main helper of gethostlatency's tests: resolves two warm-up names in a loop until a byte arrives on stdin,
 * then resolves each NAME COUNT times through getaddrinfo and gethostbyname, printing each call's outcome (the
 * calls the tool must report, exactly), and ends with the sentinel name corebpf-done-PID.invalid. */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int by_getaddrinfo(const char *name)
{
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(name, NULL, &hints, &res))
		return 0;
	freeaddrinfo(res);
	return 1;
}

static int by_gethostbyname(const char *name)
{
	return gethostbyname(name) != NULL;
}

/* helper COUNT NAME...: after the go byte, resolves each NAME COUNT times with getaddrinfo and gethostbyname. */
int main(int argc, char **argv)
{
	struct pollfd go = { .fd = 0, .events = POLLIN };
	int count = atoi(argv[1]);
	char byte, done[64];

	while (poll(&go, 1, 20) == 0) {
		by_getaddrinfo("corebpf-warmup-gai.invalid");
		by_gethostbyname("corebpf-warmup-ghbn.invalid");
	}
	if (read(0, &byte, 1) != 1)
		return 2;
	for (int i = 0; i < count; i++) {
		for (int n = 2; n < argc; n++) {
			printf("getaddrinfo %s %s\n", argv[n], by_getaddrinfo(argv[n]) ? "ok" : "fail");
			printf("gethostbyname %s %s\n", argv[n], by_gethostbyname(argv[n]) ? "ok" : "fail");
		}
	}
	snprintf(done, sizeof(done), "corebpf-done-%d.invalid", (int)getpid());
	by_getaddrinfo(done);
	return fflush(stdout) != 0;
}
