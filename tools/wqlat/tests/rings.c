// SPDX-License-Identifier: Apache-2.0 OR MIT
/* wqlat's test helper: N io_uring instances set up and closed, one after another.
 *
 *   rings N
 *
 * Prints its PID and waits for a line on stdin; then sets up and closes N rings (io_uring_setup(2), close(2))
 * and prints "done". Closing a ring queues exactly one work item, the ring's exit work (on the "iou_exit"
 * workqueue since Linux 6.x; on a shared one before), so the helper queues exactly N of them. */
#define _GNU_SOURCE
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct io_uring_params params;
	char line[16];
	int i, n, fd;

	if (argc != 2)
		return 2;
	n = atoi(argv[1]);
	printf("%d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 3;
	for (i = 0; i < n; i++) {
		memset(&params, 0, sizeof(params));
		fd = syscall(__NR_io_uring_setup, 4, &params);
		if (fd < 0) {
			perror("io_uring_setup");
			return 4;
		}
		close(fd);
	}
	printf("done\n");
	return 0;
}
