// SPDX-License-Identifier: Apache-2.0 OR MIT
/* swapin's test helper: joins a memory cgroup, locks everything it has mapped so far (so that only its buffer
 * can be swapped out), maps PAGES pages of anonymous memory and fills each with its own non-zero pattern (a
 * zero-filled page may be swapped without I/O on 6.12+; distinct contents keep the pages apart), prints
 * "ready PID", then obeys one-letter commands on stdin:
 *   s  prints "state OUT CACHED PRESENT": the buffer's pages swapped out and not in the swap cache (touching
 *      each is one read from swap), swapped out but still in the swap cache (touching reads nothing), and in
 *      memory (from /proc/self/pagemap and mincore(2), neither of which faults a page in);
 *   t  reads every page of the buffer, checks its pattern and prints "touched BAD" (pages that did not match).
 * Usage: swapper CGROUP_PROCS PAGES [zero]  (zero: fill the pages with zeroes instead) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

static long pages;
static int zero;
static uint64_t *buf;
/* mincore's answers (static: mapped, and locked, before the buffer). */
static unsigned char vec[1 << 16];

static void say(const char *line)
{
	if (write(1, line, strlen(line)) < 0)
		_exit(3);
}

static uint64_t pattern(long page, long word)
{
	return zero ? 0 : ((uint64_t)page * 0x9E3779B97F4A7C15ull + (uint64_t)word) | 1;
}

static void state(void)
{
	long out = 0, cached = 0, present = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);
	char line[96];

	if (fd < 0 || mincore(buf, pages * PAGE, vec))
		_exit(4);
	for (long i = 0; i < pages; i++) {
		uint64_t entry;
		off_t at = ((uintptr_t)buf / PAGE + i) * sizeof(entry);

		if (pread(fd, &entry, sizeof(entry), at) != sizeof(entry))
			_exit(5);
		if (entry >> 63)
			present++;
		else if ((entry >> 62) & 1)
			(vec[i] & 1) ? cached++ : out++;
	}
	close(fd);
	snprintf(line, sizeof(line), "state %ld %ld %ld\n", out, cached, present);
	say(line);
}

static void touch(void)
{
	long bad = 0;
	char line[64];

	for (long i = 0; i < pages; i++) {
		volatile uint64_t *p = buf + i * (PAGE / sizeof(uint64_t));

		for (long w = 0; w < PAGE / (long)sizeof(uint64_t); w++) {
			if (p[w] != pattern(i, w)) {
				bad++;
				break;
			}
		}
	}
	snprintf(line, sizeof(line), "touched %ld\n", bad);
	say(line);
}

int main(int argc, char **argv)
{
	volatile char stack[256 * 1024];
	char line[64], c;
	int fd;

	if (argc < 3)
		return 2;
	pages = atol(argv[2]);
	if (pages < 1 || pages > (long)sizeof(vec))
		return 2;
	zero = argc > 3 && !strcmp(argv[3], "zero");
	snprintf(line, sizeof(line), "%d\n", getpid());
	fd = open(argv[1], O_WRONLY);
	if (fd < 0 || write(fd, line, strlen(line)) < 0)
		return 6;
	close(fd);
	/* The stack it will use, then everything mapped so far, kept in memory. */
	memset((char *)stack, 1, sizeof(stack));
	if (mlockall(MCL_CURRENT))
		return 7;
	buf = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return 8;
	madvise(buf, pages * PAGE, MADV_NOHUGEPAGE);
	for (long i = 0; i < pages; i++)
		for (long w = 0; w < PAGE / (long)sizeof(uint64_t); w++)
			buf[i * (PAGE / sizeof(uint64_t)) + w] = pattern(i, w);
	snprintf(line, sizeof(line), "ready %d\n", getpid());
	say(line);
	while (read(0, &c, 1) == 1) {
		if (c == 's')
			state();
		else if (c == 't')
			touch();
	}
	return 0;
}
