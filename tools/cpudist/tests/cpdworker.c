// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of cpudist's tests. `cpdworker K`: waits for a line on stdin, then K times runs 5 ms and sleeps
 * 10 ms, and prints the change over the loop of its schedstat runs and on-CPU ns and of its involuntary context
 * switches (the ground truth the histograms are checked against); then waits for EOF. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
static void stat(unsigned long long *runs, unsigned long long *on, long *ivcsw) {
    unsigned long long waited;
    struct rusage ru;
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (!f || fscanf(f, "%llu %llu %llu", on, &waited, runs) != 3) exit(3);
    fclose(f);
    getrusage(RUSAGE_SELF, &ru);
    *ivcsw = ru.ru_nivcsw;
}
static long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
int main(int argc, char **argv) {
    prctl(PR_SET_NAME, "cpdworker");
    int k = argc > 1 ? atoi(argv[1]) : 10;
    char line[64];
    printf("%d\n", getpid()); fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    unsigned long long r0, o0, r1, o1;
    long i0, i1;
    stat(&r0, &o0, &i0);
    struct timespec sl = {0, 10000000};
    for (int i = 0; i < k; i++) {
        long long end = now() + 5000000;
        while (now() < end) {}
        nanosleep(&sl, NULL);
    }
    stat(&r1, &o1, &i1);
    printf("%llu %llu %ld\n", r1 - r0, o1 - o0, i1 - i0); fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {}
    return 0;
}
