// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of funcslower's tests: after a line on stdin, calls slow_call(i, 0x1000 + i) (sleeps 30 ms, returns
 * the sum of its arguments) SLOW times and quick_call(i, 0x2000 + i) (sleeps 1 ms, returns their product) QUICK
 * times, each from outer_caller, reading CLOCK_MONOTONIC around every call. Then prints one line per call,
 * "NAME A B RESULT NS", NS the time the helper measured around the call. With the argument "once": after the line,
 * one call of patient_call(1, 2) (sleeps 300 ms) from outer_caller, and an exit as soon as it returns. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOW 5
#define QUICK 20

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
__attribute__((noinline)) long slow_call(int a, long b) { usleep(30000); return a + b; }
__attribute__((noinline)) long quick_call(int a, long b) { usleep(1000); return a * b; }
__attribute__((noinline)) long patient_call(int a, long b) { usleep(300000); return a + b; }
__attribute__((noinline)) long outer_caller(long (*f)(int, long), int a, long b, long long *ns) {
    long long t = now_ns();
    long r = f(a, b);
    *ns = now_ns() - t;
    return r;
}

int main(int argc, char **argv) {
    char line[16];
    long r;
    long long ns;
    static char report[4096];
    int len = 0;
    if (!fgets(line, sizeof line, stdin)) return 1;
    if (argc > 1 && strcmp(argv[1], "once") == 0) return outer_caller(patient_call, 1, 2, &ns) == 3 ? 0 : 1;
    for (int i = 0; i < SLOW; i++) {
        r = outer_caller(slow_call, i, 0x1000 + i, &ns);
        len += snprintf(report + len, sizeof report - len, "slow_call %d %ld %ld %lld\n", i, 0x1000L + i, r, ns);
    }
    for (int i = 0; i < QUICK; i++) {
        r = outer_caller(quick_call, i, 0x2000 + i, &ns);
        len += snprintf(report + len, sizeof report - len, "quick_call %d %ld %ld %lld\n", i, 0x2000L + i, r, ns);
    }
    fputs(report, stdout);
    return 0;
}
