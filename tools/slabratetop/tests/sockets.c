// SPDX-License-Identifier: Apache-2.0 OR MIT
/* slabratetop's test helper: after a byte on stdin, opens and closes N4 UDP/IPv4 and N6 UDP/IPv6 sockets
 * (argv[1], argv[2]), one at a time: each allocates its sock from the kernel's "UDP" or "UDPv6" slab cache once,
 * then prints "done" and waits for stdin to close. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int open_close(int family, long n)
{
	for (long i = 0; i < n; i++) {
		int fd = socket(family, SOCK_DGRAM, IPPROTO_UDP);

		if (fd < 0) {
			perror("socket");
			return -1;
		}
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char go;

	if (argc != 3)
		return 2;
	if (read(0, &go, 1) != 1)
		return 1;
	if (open_close(AF_INET, atol(argv[1])) || open_close(AF_INET6, atol(argv[2])))
		return 1;
	if (write(1, "done\n", 5) != 5)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
