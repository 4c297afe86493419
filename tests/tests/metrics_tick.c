// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of the metrics test: `helper N`, after a byte on stdin, calls metrics_tick N times, then waits for
 * stdin to close. The tests expect exactly N calls in funccount's counter. */
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) int metrics_tick(int x) { __asm__ volatile(""); return x + 1; }
int main(int argc, char **argv)
{
    char go;
    volatile int acc = 0;
    if (read(0, &go, 1) != 1)
        return 1;
    for (int i = 0; i < atoi(argv[1]); i++)
        acc += metrics_tick(i);
    return read(0, &go, 1) < 0;
}
