// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A helper of gethostlatency's tests: a process whose first action is one lookup of a constant name in its
 * read-only data, on a 64 KiB boundary of its own (beyond the kernel's fault-around of the pages the start-up code
 * touches): the name's page is not in memory when the entry probe fires. `first-call N` calls resolver function N
 * of gethostlatency's list, with the name corebpf-first-<function>.invalid. */
#define _GNU_SOURCE
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

__attribute__((aligned(65536))) static const char names[5][64] = {
	"corebpf-first-getaddrinfo.invalid", "corebpf-first-gethostbyname.invalid",
	"corebpf-first-gethostbyname2.invalid", "corebpf-first-gethostbyname-r.invalid",
	"corebpf-first-gethostbyname2-r.invalid",
};
__attribute__((aligned(65536))) const char after[1] = { 1 };

int main(int argc, char **argv)
{
	struct hostent ret, *res;
	struct addrinfo *ai;
	char buf[4096];
	int err;

	switch (argv[1][0]) {
	case '0': return getaddrinfo(names[0], NULL, NULL, &ai) == 0;
	case '1': return gethostbyname(names[1]) != NULL;
	case '2': return gethostbyname2(names[2], AF_INET) != NULL;
	case '3': return gethostbyname_r(names[3], &ret, buf, sizeof(buf), &res, &err) == 0 && res;
	default: return gethostbyname2_r(names[4], AF_INET, &ret, buf, sizeof(buf), &res, &err) == 0 && res;
	}
}
