// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The workload of the container test, built static and run alone in a FROM scratch image: `calls N` waits for a
 * byte on stdin, makes exactly N getppid() system calls, then waits for stdin to close. The test expects exactly
 * N in the exporter's syscount counter for this process. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char go;
    if (argc < 2 || read(0, &go, 1) != 1)
        return 1;
    for (int i = 0; i < atoi(argv[1]); i++)
        syscall(SYS_getppid);
    return read(0, &go, 1) < 0;
}
