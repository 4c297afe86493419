// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of trace's and argdist's expression tests, whose calls are known. After a line on stdin it calls:
 * - fail_or(n) for n = 1..30: returns -1 (a long) when n % 3 == 0, else n;
 * - take_ts(ts) 4 times with ts = {i, 1000 * i + 7} for i = 1..4, and nanosleep(2) (the syscall itself) twice with
 *   {0, 1234567};
 * - take_name(name, len) with "alpha" 3 times, "alphabet" 2 times, "beta" 5 times, and once with a 300-character
 *   string of 'x' (each built at run time on the stack, so its page is present when a probe reads it);
 * - maybe(n) for n = 1..7: returns a string for odd n, NULL for even;
 * - scaled(size) for size = 100 (x1), 200 (x2), 300 (x3): returns size * 2;
 * - many(1, 2, 3, 4, 5, 6) once;
 * - the USDT probe exprs:tick(i, name) for i = 1..6, name "even" or "odd" as i is;
 * - take_fn(scaled) once (a function's address as an argument);
 * then exits 0. Every function is noinline and has a side effect, so no call is folded away. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/sdt.h>

volatile long sink;
static char text[] = "present";

__attribute__((noinline)) long fail_or(long n) { sink += n; return n % 3 == 0 ? -1 : n; }
__attribute__((noinline)) int take_ts(struct timespec *ts) { sink += ts->tv_nsec; return 0; }
__attribute__((noinline)) int take_name(const char *name, long len) { sink += name[0] + len; return 0; }
__attribute__((noinline)) char *maybe(long n) { sink += n; return (n & 1) ? text : NULL; }
__attribute__((noinline)) long scaled(long size) { sink += size; return size * 2; }
__attribute__((noinline)) long take_fn(long (*fn)(long)) { sink += (long)fn; return 0; }
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f) {
    sink += a + b + c + d + e + f;
    return a;
}

static void name_times(const char *name, int times) {
    char buf[320];
    snprintf(buf, sizeof buf, "%s", name);
    for (int i = 0; i < times; i++) take_name(buf, (long)strlen(buf));
}

int main(void) {
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (long n = 1; n <= 30; n++) fail_or(n);
    for (int i = 1; i <= 4; i++) {
        struct timespec ts = {i, 1000 * i + 7};
        take_ts(&ts);
    }
    struct timespec nap = {0, 1234567};
    for (int i = 0; i < 2; i++) syscall(SYS_nanosleep, &nap, NULL);
    name_times("alpha", 3);
    name_times("alphabet", 2);
    name_times("beta", 5);
    char longname[301];
    memset(longname, 'x', 300);
    longname[300] = 0;
    name_times(longname, 1);
    for (long n = 1; n <= 7; n++) maybe(n);
    for (long s = 1; s <= 3; s++)
        for (long i = 0; i < s; i++) scaled(100 * s);
    many(1, 2, 3, 4, 5, 6);
    for (long i = 1; i <= 6; i++) {
        char parity[8];
        snprintf(parity, sizeof parity, "%s", (i & 1) ? "odd" : "even");
        DTRACE_PROBE2(exprs, tick, i, parity);
    }
    take_fn(scaled);
    return 0;
}
