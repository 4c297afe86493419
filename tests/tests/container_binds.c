// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A workload of the container tests, built static and run alone in a FROM scratch image: `binds N PORT` waits for
 * a byte on stdin, binds N TCP sockets to 127.0.0.1:PORT, PORT+1, ... (in the container's own network namespace),
 * then waits for stdin to close. bindsnoop --container must show exactly these N binds for one container and none
 * of another's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char go;
    if (argc < 3 || read(0, &go, 1) != 1)
        return 1;
    int n = atoi(argv[1]), port = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port + i)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
            return 2;
    }
    return read(0, &go, 1) < 0;
}
