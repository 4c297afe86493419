// SPDX-License-Identifier: Apache-2.0 OR MIT
// A native program making a known number of allocations of a known size, for uobjnew's C test (also the kernel
// matrix's, whose guests have no Java): after a go byte on stdin it calls malloc(SIZE) BLOCKS times, keeping every
// block, frees them, prints "done" and exits.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef BLOCKS
#define BLOCKS 100
#endif
#ifndef SIZE
#define SIZE 4243
#endif

void *volatile kept[BLOCKS];

int main(void)
{
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < BLOCKS; i++)
		kept[i] = malloc(SIZE);
	for (int i = 0; i < BLOCKS; i++)
		free(kept[i]);
	printf("done\n");
	fflush(stdout);
	return 0;
}
