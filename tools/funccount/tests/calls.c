// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The main helper of funccount's tests. `helper HOT COLD WRITES`: after a byte on stdin, calls hot_fn HOT times,
 * each time firing the USDT probe fchelper:tick and calling getpid(); writes WRITES bytes to /dev/null one at a
 * time; after a 100 ms pause calls cold_fn COLD times; exits 0. The counts the tests expect are these arguments. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/sdt.h>

__attribute__((noinline)) int hot_fn(int x) { __asm__ volatile(""); return x + 1; }
__attribute__((noinline)) int cold_fn(int x) { __asm__ volatile(""); return x * 2; }

int main(int argc, char **argv)
{
    int hot = atoi(argv[1]), cold = atoi(argv[2]), writes = atoi(argv[3]);
    int devnull = open("/dev/null", O_WRONLY);
    char go;
    volatile int acc = 0;

    if (devnull < 0 || read(0, &go, 1) != 1)
        return 1;
    for (int i = 0; i < hot; i++) {
        acc += hot_fn(i);
        DTRACE_PROBE1(fchelper, tick, i);
        acc += getpid();
    }
    for (int i = 0; i < writes; i++)
        if (write(devnull, "x", 1) != 1)
            return 1;
    usleep(100 * 1000);
    for (int i = 0; i < cold; i++)
        acc += cold_fn(i);
    return 0;
}
