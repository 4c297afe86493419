// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of opensnoop's tests. `helper DIR K`: chdir(DIR), wait for a line, then K opens of target.txt by a
 * relative path and K by its absolute one (openat), one open of missing.txt (ENOENT), a create of created.txt
 * (O_WRONLY|O_CREAT, mode 0640) and one openat2 of target.txt, each closed at once. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

int main(int argc, char **argv) {
    char abs[4096], line[16];
    int k = atoi(argv[2]);
    if (chdir(argv[1])) return 1;
    snprintf(abs, sizeof abs, "%s/target.txt", argv[1]);
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < k; i++) close(open("target.txt", O_RDONLY));
    for (int i = 0; i < k; i++) close(openat(AT_FDCWD, abs, O_RDONLY));
    if (open("missing.txt", O_RDONLY) != -1) return 1;
    close(open("created.txt", O_WRONLY | O_CREAT, 0640));
    struct open_how how = { .flags = O_RDONLY };
    int fd = syscall(SYS_openat2, AT_FDCWD, "target.txt", &how, sizeof how);
    if (fd < 0) return 1;
    close(fd);
    return 0;
}
