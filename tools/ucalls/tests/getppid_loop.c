// SPDX-License-Identifier: Apache-2.0 OR MIT
// A native program making a known number of system calls, for ucalls' -S test (also the kernel matrix's, whose
// guests have no Java): after a go byte on stdin it calls getppid() CALLS times through syscall(2), prints "done"
// and exits.
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>

#ifndef CALLS
#define CALLS 1000
#endif

int main(void)
{
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < CALLS; i++)
		syscall(SYS_getppid);
	printf("done\n");
	fflush(stdout);
	return 0;
}
