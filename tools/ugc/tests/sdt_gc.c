// SPDX-License-Identifier: Apache-2.0 OR MIT
// A native program with CPython's collection probes (provider python, gc__start(int generation) and
// gc__done(long collected)), for ugc's test where no Python is installed (the kernel-matrix guests): after a go
// byte on stdin it makes GCS pairs, the i-th (from 0) of generation i % 3 collecting 10 * i objects, prints
// "done" and exits.
#include <stdio.h>
#include <unistd.h>
#include <sys/sdt.h>

#ifndef GCS
#define GCS 5
#endif

int main(void)
{
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	for (long i = 0; i < GCS; i++) {
		int generation = i % 3;
		long collected = 10 * i;

		DTRACE_PROBE1(python, gc__start, generation);
		usleep(1000);
		DTRACE_PROBE1(python, gc__done, collected);
	}
	printf("done\n");
	fflush(stdout);
	return 0;
}
