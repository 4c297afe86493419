// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of syscount's tests. `helper PATH N M [nowait]`: waits for a line (unless `nowait`), then makes
 * N getppid() and M open(PATH) (PATH must not exist, so each fails); exits 0. Architectures without open(2)
 * (arm64) make openat(AT_FDCWD, PATH) instead. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char line[16];
    long n = atol(argv[2]), m = atol(argv[3]);
    if (argc < 5 && !fgets(line, sizeof line, stdin)) return 1;
    for (long i = 0; i < n; i++) syscall(SYS_getppid);
    for (long i = 0; i < m; i++)
#ifdef SYS_open
        if (syscall(SYS_open, argv[1], O_RDONLY) != -1) return 1;
#else
        if (syscall(SYS_openat, AT_FDCWD, argv[1], O_RDONLY) != -1) return 1;
#endif
    return 0;
}
