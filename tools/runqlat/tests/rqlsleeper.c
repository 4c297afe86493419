// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of runqlat's tests. `rqlsleeper N`: waits for a line on stdin, then sleeps 1 ms N times and prints
 * the change over the loop of its /proc/self/schedstat runs and of its involuntary context switches (the ground
 * truth of the counts); then waits for stdin to close. `rqlsleeper spin`: spins until killed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
static void stat(unsigned long long *runs, long *ivcsw) {
    unsigned long long on, waited;
    struct rusage ru;
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (!f || fscanf(f, "%llu %llu %llu", &on, &waited, runs) != 3) exit(3);
    fclose(f);
    getrusage(RUSAGE_SELF, &ru);
    *ivcsw = ru.ru_nivcsw;
}
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "spin")) { prctl(PR_SET_NAME, "rqlspinner"); for (;;) {} }
    prctl(PR_SET_NAME, "rqlsleeper");
    int n = argc > 1 ? atoi(argv[1]) : 100;
    char line[64];
    printf("%d\n", getpid()); fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    unsigned long long r0, r1;
    long i0, i1;
    stat(&r0, &i0);
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < n; i++) nanosleep(&ts, NULL);
    stat(&r1, &i1);
    printf("%llu %ld\n", r1 - r0, i1 - i0); fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {}
    return 0;
}
