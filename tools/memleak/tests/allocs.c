// SPDX-License-Identifier: Apache-2.0 OR MIT
/* memleak's workload with known allocations. On the line "go" (or at once with the argument "auto"):
 *   leak_a: 7 x malloc(4096), never freed (28672 bytes);
 *   leak_b: 3 x malloc(1000), freed on the line "free";
 *   leak_c: 2 x calloc(5, 200), never freed (2000 bytes);
 *   leak_d: malloc(100) grown by realloc to 3000, never freed (3000 bytes: the malloc is gone).
 * Prints "allocated" then "freed" after each step, then waits for end of input (with "auto": for ever). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile kept[16];
/* Volatile bounds, so that the compiler keeps one call site per loop. */
static volatile int seven = 7, three = 3, two = 2;

__attribute__((noinline)) void leak_a(void)
{
	for (int i = 0; i < seven; i++)
		kept[i] = malloc(4096);
}

__attribute__((noinline)) void leak_b(void)
{
	for (int i = 0; i < three; i++)
		kept[7 + i] = malloc(1000);
}

__attribute__((noinline)) void free_b(void)
{
	for (int i = 0; i < three; i++)
		free(kept[7 + i]);
}

__attribute__((noinline)) void leak_c(void)
{
	for (int i = 0; i < two; i++)
		kept[10 + i] = calloc(5, 200);
}

__attribute__((noinline)) void leak_d(void)
{
	void *p = malloc(100);
	kept[12] = realloc(p, 3000);
}

static void allocate(void)
{
	leak_a();
	leak_b();
	leak_c();
	leak_d();
}

int main(int argc, char **argv)
{
	char line[64];

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "auto") == 0) {
		allocate();
		for (;;)
			pause();
	}
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "go", 2) == 0) {
			allocate();
			printf("allocated\n");
		} else if (strncmp(line, "free", 4) == 0) {
			free_b();
			printf("freed\n");
		}
	}
	return 0;
}
