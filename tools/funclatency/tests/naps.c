// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of funclatency's tests: after a line on stdin, calls nap_1ms (sleeps 1 ms) 40 times and nap_20ms
 * (sleeps 20 ms) 8 times, timing each call itself with CLOCK_MONOTONIC, and walk(3) (recursing down to walk(0),
 * which sleeps 2 ms) 5 times; then prints "nap_1ms NS" and "nap_20ms NS", the total time it measured in each. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
__attribute__((noinline)) void nap_1ms(void) { usleep(1000); }
__attribute__((noinline)) void nap_20ms(void) { usleep(20000); }
__attribute__((noinline)) int walk(int n) { if (n == 0) { usleep(2000); return 0; } return walk(n - 1) + 1; }

int main(void) {
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    long long t1 = 0, t20 = 0, t;
    for (int i = 0; i < 40; i++) { t = now_ns(); nap_1ms(); t1 += now_ns() - t; }
    for (int i = 0; i < 8; i++) { t = now_ns(); nap_20ms(); t20 += now_ns() - t; }
    for (int i = 0; i < 5; i++) walk(3);
    printf("nap_1ms %lld\nnap_20ms %lld\n", t1, t20);
    return 0;
}
