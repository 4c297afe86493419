// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of template: once a byte arrives on stdin, calls chdir("/") 20 times (each succeeds) and 5 times
 * a directory that does not exist, whose name holds an escape sequence and a newline (each fails with ENOENT),
 * prints "done", then waits for stdin to close. Its calls are the ground truth. */
#include <unistd.h>

int main(void)
{
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
	for (int i = 0; i < 20; i++)
		if (chdir("/") != 0)
			return 1;
	for (int i = 0; i < 5; i++)
		if (chdir("/no-such-dir\033[31m\nx") == 0)
			return 1;
	write(1, "done\n", 5);
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
