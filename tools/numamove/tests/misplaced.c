// SPDX-License-Identifier: Apache-2.0 OR MIT
/* numamove's workload: PAGES pages of anonymous memory placed on NUMA node 1 (mbind MPOL_BIND on that range only,
 * then the range's policy reset to the default, so the pages stay where they are but may move), no transparent
 * huge pages (MADV_NOHUGEPAGE: one page, one migration), and this process pinned to CPU (a CPU of node 0).
 * Prints "ready <pid>" once every page is on node 1 (checked with move_pages), then, on "go" from stdin, touches
 * the pages over and over, so that NUMA balancing, once the test turns it on, finds them misplaced and moves them
 * to node 0, until all have moved or SECONDS have passed; prints "moved <n>", the pages now on node 0, and waits
 * for the end of stdin. No libnuma: raw system calls.
 *
 *	misplaced PAGES CPU SECONDS */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MPOL_DEFAULT 0
#define MPOL_BIND 2

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* How many of the pages are on `node` now. */
static long on_node(void **pages, int *status, long n, int node)
{
	long count = 0;

	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0))
		die("move_pages");
	for (long i = 0; i < n; i++)
		count += status[i] == node;
	return count;
}

int main(int argc, char **argv)
{
	long n, page = sysconf(_SC_PAGESIZE);
	unsigned long node1 = 1UL << 1;
	struct timespec start, now;
	cpu_set_t cpus;
	char line[16], *mem;
	void **pages;
	int *status, seconds;

	if (argc != 4) {
		fprintf(stderr, "usage: misplaced PAGES CPU SECONDS\n");
		return 2;
	}
	n = atol(argv[1]);
	seconds = atoi(argv[3]);
	CPU_ZERO(&cpus);
	CPU_SET(atoi(argv[2]), &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus))
		die("sched_setaffinity");
	pages = calloc(n, sizeof(*pages));
	status = calloc(n, sizeof(*status));
	mem = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pages || !status || mem == MAP_FAILED)
		die("memory");
	if (madvise(mem, n * page, MADV_NOHUGEPAGE))
		die("madvise");
	if (syscall(SYS_mbind, mem, n * page, MPOL_BIND, &node1, 64, 0))
		die("mbind node 1");
	for (long i = 0; i < n; i++) {
		mem[i * page] = 1;
		pages[i] = mem + i * page;
	}
	if (syscall(SYS_mbind, mem, n * page, MPOL_DEFAULT, NULL, 0, 0))
		die("mbind default");
	if (on_node(pages, status, n, 1) != n) {
		fprintf(stderr, "misplaced: not every page is on node 1\n");
		return 1;
	}
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		for (int round = 0; round < 64; round++)
			for (long i = 0; i < n; i++)
				(*(volatile char *)&mem[i * page])++;
		if (on_node(pages, status, n, 0) == n)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= seconds)
			break;
	}
	printf("moved %ld\n", on_node(pages, status, n, 0));
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
