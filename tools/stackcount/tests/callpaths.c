// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of stackcount's tests, with known call paths: after a line on stdin, target() (one getppid() each) is
 * called 37 times from caller_a() and 23 times from caller_b(), and hot() 300 times from one place in main and 700
 * times from another, and libc's puts() 11 times; then it lives `argv[1]` ms more (the tool saves a process's maps when it first sees it) and
 * exits. Built -O0, so every function sets up its frame and the kernel can name a uprobe's caller. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int target(int x) { return (int)getppid() + x; }
int caller_a(int x) { return target(x) + 1; }
int caller_b(int x) { return target(x) + 2; }
/* Called from two places in main (SITE_A and SITE_B times), whose return addresses differ. */
__attribute__((noinline)) int hot(int x) { __asm__ volatile("" ::: "memory"); return x + 1; }

int main(int argc, char **argv) {
    char line[8];
    if (!fgets(line, sizeof line, stdin)) return 1;
    volatile int s = 0;
    for (int i = 0; i < 37; i++) s += caller_a(i);
    for (int i = 0; i < 23; i++) s += caller_b(i);
    for (int i = 0; i < 300; i++) s += hot(i);
    for (int i = 0; i < 700; i++) s += hot(i);
    for (int i = 0; i < 11; i++) puts("stackcount");
    /* Live a little after the calls (the tool saves a process's maps when it first sees it), then exit. */
    usleep(argc > 1 ? atoi(argv[1]) * 1000 : 0);
    return 0;
}
