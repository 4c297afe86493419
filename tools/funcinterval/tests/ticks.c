// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of funcinterval's tests: after a line on stdin, calls tick_a and tick_b in turn, CALLS times each,
 * sleeping GAP_US microseconds after every call; tick_b makes one getppid system call. It reads CLOCK_MONOTONIC
 * just before and just after every call and prints one line per call, "NAME BEFORE_NS AFTER_NS", so the test
 * knows every gap between calls (to within the call's own length) without trusting the sleeps. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CALLS 30
#define GAP_US 5500

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
__attribute__((noinline)) void tick_a(void) { __asm__ volatile(""); }
__attribute__((noinline)) void tick_b(void) { syscall(SYS_getppid); }

int main(void) {
    static long long before[2 * CALLS], after[2 * CALLS];
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < 2 * CALLS; i++) {
        before[i] = now_ns();
        if (i % 2) tick_b(); else tick_a();
        after[i] = now_ns();
        usleep(GAP_US);
    }
    for (int i = 0; i < 2 * CALLS; i++) printf("%s %lld %lld\n", i % 2 ? "tick_b" : "tick_a", before[i], after[i]);
    return 0;
}
