// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The test helper of capable: waits for a byte on stdin, then makes capability checks whose number and kind are
 * known, prints "done" and waits for stdin to close. As root:
 *   - SETUIDS setuid(0) calls, each one CAP_SETUID check asked for by a set*id() call (INSETID 1);
 *   - CHOWNS chown() calls of its scratch file to another owner, each one CAP_CHOWN check;
 *   - MMAPS private writable anonymous mappings, each one CAP_SYS_ADMIN check the kernel does not audit (the
 *     memory accounting's question whether the caller may overcommit);
 *   - with "deny", it first drops CAP_CHOWN from its effective set, so each chown() check is denied (EPERM).
 * The system calls are made from the functions named here with frame pointers (inline `syscall`), so that a user
 * stack starts in them: setuid_calls, chown_calls. Usage: checker FILE SETUIDS CHOWNS MMAPS [deny] */
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static long raw_syscall3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noinline)) int setuid_calls(int n)
{
	int failed = 0;

	for (int i = 0; i < n; i++)
		failed += raw_syscall3(SYS_setuid, 0, 0, 0) != 0;
	return failed;
}

__attribute__((noinline)) int chown_calls(const char *path, int n)
{
	int denied = 0;

	for (int i = 0; i < n; i++)
		denied += raw_syscall3(SYS_chown, (long)path, 65534, -1) != 0;
	return denied;
}

static int mmap_calls(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return 1;
		munmap(p, 4096);
	}
	return 0;
}

/* Clears CAP_CHOWN from the effective set (raw capget/capset: no libcap needed). */
static int drop_chown(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return 1;
	data[0].effective &= ~(1u << CAP_CHOWN);
	return syscall(SYS_capset, &hdr, data) != 0;
}

int main(int argc, char **argv)
{
	char go;
	int deny = argc > 5 && !strcmp(argv[5], "deny");
	int denied;
	char msg[32];

	if (argc < 5 || (deny && drop_chown()) || read(0, &go, 1) != 1)
		return 1;
	if (setuid_calls(atoi(argv[2])))
		return 1;
	denied = chown_calls(argv[1], atoi(argv[3]));
	if (mmap_calls(atoi(argv[4])))
		return 1;
	/* write(), not printf(): stdio's buffer would be one more allocation, and a check. */
	snprintf(msg, sizeof(msg), "done %d\n", denied);
	if (write(1, msg, strlen(msg)) < 0)
		return 1;
	while (read(0, &go, 1) > 0)
		;
	return 0;
}
