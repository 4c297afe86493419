// SPDX-License-Identifier: Apache-2.0 OR MIT
/* oomkill's test helper: joins the memory cgroup whose cgroup.procs file is argv[1], waits for a byte on stdin,
 * then allocates and touches memory 1 MiB at a time until the OOM killer ends it (exit 3 if it never does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	FILE *procs;
	char go;
	int i;

	if (argc != 2 || !(procs = fopen(argv[1], "w")))
		return 2;
	if (fprintf(procs, "%d\n", getpid()) < 0 || fclose(procs))
		return 2;
	if (read(0, &go, 1) != 1)
		return 2;
	for (i = 0; i < 1 << 16; i++) {
		char *p = malloc(1 << 20);

		if (!p)
			return 3;
		memset(p, i | 1, 1 << 20);
	}
	return 3;
}
