// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of argdist's and trace's tests, whose events are known: after a line on stdin it calls work(n) 10, 20
 * and 30 times with n = 1, 2, 3 (returning n*10-25, sleeping n*100 us), opens MISSING missing files
 * /nonexistent/TAG-PID-I (I from 0: each fails with ENOENT) and /dev/null NULL_OPENS times, and writes 7 bytes of 1
 * and 5 of 4096 to /dev/null; exits 0. TAG, MISSING and NULL_OPENS are -D defines, so each test has its own build. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#if !defined(TAG) || !defined(MISSING) || !defined(NULL_OPENS)
#error "build with -DTAG=\"name\" -DMISSING=n -DNULL_OPENS=n"
#endif

__attribute__((noinline)) int work(int n) { usleep(100 * n); return n * 10 - 25; }

int main(void) {
    static char buf[4096];
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < 10; i++) work(1);
    for (int i = 0; i < 20; i++) work(2);
    for (int i = 0; i < 30; i++) work(3);
    for (int i = 0; i < MISSING; i++) {
        char missing[64];
        snprintf(missing, sizeof missing, "/nonexistent/" TAG "-%d-%d", getpid(), i);
        if (open(missing, O_RDONLY) >= 0) return 1;
    }
    int fd = -1;
    for (int i = 0; i < NULL_OPENS; i++) { fd = open("/dev/null", O_WRONLY); if (fd < 0) return 1; }
    for (int i = 0; i < 7; i++) if (write(fd, buf, 1) != 1) return 1;
    for (int i = 0; i < 5; i++) if (write(fd, buf, 4096) != 4096) return 1;
    return 0;
}
