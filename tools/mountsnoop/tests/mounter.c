// SPDX-License-Identifier: Apache-2.0 OR MIT
/* mountsnoop's test helper. It moves into a mount namespace of its own and makes every mount private there, so
 * nothing it mounts reaches the host; makes a directory DIR; prints "ready DIR" and waits for a line on stdin;
 * then makes these calls, checking each result, and prints "FSFD MFD" (the two descriptors it got):
 *   mount("corebpf-test", DIR, "tmpfs", MS_NOSUID|MS_NODEV|MS_NOEXEC, "size=1m,mode=0700")   0
 *   umount2(DIR, 0)                                                                       0
 *   mount("none", DIR/missing, "tmpfs", 0, NULL)                                          -ENOENT
 *   fsopen("tmpfs", FSOPEN_CLOEXEC)                                                       FSFD
 *   fsconfig(FSFD, FSCONFIG_SET_STRING, "size", "2m", 0)                                  0
 *   fsconfig(FSFD, FSCONFIG_CMD_CREATE, NULL, NULL, 0)                                    0
 *   fsmount(FSFD, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV|MOUNT_ATTR_NOEXEC)                    MFD
 *   move_mount(MFD, "", AT_FDCWD, DIR, MOVE_MOUNT_F_EMPTY_PATH)                           0
 *   umount2(DIR, MNT_DETACH)                                                              0
 * and removes DIR. The new mount API goes through syscall(2) (the constants are glibc's, 2.36+). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	char dir[] = "/tmp/mountsnoop-XXXXXX", missing[64], line[16];
	long fsfd, mfd;

	if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 100;
	if (!mkdtemp(dir))
		return 101;
	snprintf(missing, sizeof missing, "%s/missing", dir);
	printf("ready %s\n", dir);
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 102;
	if (mount("corebpf-test", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0700"))
		return 103;
	if (umount2(dir, 0))
		return 104;
	if (mount("none", missing, "tmpfs", 0, NULL) != -1 || errno != ENOENT)
		return 105;
	fsfd = syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return 106;
	if (syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, "size", "2m", 0) ||
	    syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
		return 107;
	mfd = syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mfd < 0)
		return 108;
	if (syscall(SYS_move_mount, mfd, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH))
		return 109;
	if (umount2(dir, MNT_DETACH))
		return 110;
	close(mfd);
	close(fsfd);
	rmdir(dir);
	printf("%ld %ld\n", fsfd, mfd);
	return 0;
}
