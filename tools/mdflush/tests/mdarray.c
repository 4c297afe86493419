// SPDX-License-Identifier: Apache-2.0 OR MIT
/* mdflush's workload: builds an md RAID1 array without superblocks from two devices (md's ioctls, as
 * `mdadm --build` does: there is no mdadm in the test guests), then, on "go" from stdin, writes one block with
 * O_DIRECT and calls fsync() on the array N times: each fsync of a block device sends exactly one empty flush
 * request (REQ_PREFLUSH) to it, from this process. Prints "ready <pid>" once built and "done" after the N
 * fsyncs; on end of stdin it stops the array and exits.
 *
 *	mdarray NAME DEVICE_A DEVICE_B SIZE_KIB N
 *
 * NAME is an array the md driver already has (created with /sys/module/md_mod/parameters/new_array); NAME "-"
 * builds nothing and writes to DEVICE_A itself, a disk that is no md array. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/major.h>
#include <linux/raid/md_p.h>
#include <linux/raid/md_u.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int open_wait(const char *path, int flags)
{
	for (int i = 0; i < 200; i++) {
		int fd = open(path, flags);

		if (fd >= 0)
			return fd;
		usleep(25000);
	}
	die(path);
	return -1;
}

int main(int argc, char **argv)
{
	char path[64], line[16];
	mdu_array_info_t array;
	void *block;
	int ctl, fd, n;

	if (argc != 6) {
		fprintf(stderr, "usage: mdarray NAME DEVICE_A DEVICE_B SIZE_KIB N\n");
		return 2;
	}
	n = atoi(argv[5]);
	if (!strcmp(argv[1], "-")) {
		snprintf(path, sizeof(path), "%s", argv[2]);
		ctl = -1;
		goto built;
	}
	snprintf(path, sizeof(path), "/dev/%s", argv[1]);
	ctl = open_wait(path, O_RDWR);

	memset(&array, 0, sizeof(array));
	array.level = 1;
	array.size = atoi(argv[4]);
	array.nr_disks = 2;
	array.raid_disks = 2;
	array.not_persistent = 1;
	array.state = 1 << MD_SB_CLEAN;	/* in sync already: no resync */
	array.active_disks = 2;
	array.working_disks = 2;
	array.chunk_size = 64 * 1024;
	if (ioctl(ctl, SET_ARRAY_INFO, &array))
		die("SET_ARRAY_INFO");
	for (int i = 0; i < 2; i++) {
		mdu_disk_info_t disk;
		struct stat st;

		if (stat(argv[2 + i], &st))
			die(argv[2 + i]);
		memset(&disk, 0, sizeof(disk));
		disk.number = i;
		disk.raid_disk = i;
		disk.major = major(st.st_rdev);
		disk.minor = minor(st.st_rdev);
		disk.state = (1 << MD_DISK_ACTIVE) | (1 << MD_DISK_SYNC);
		if (ioctl(ctl, ADD_NEW_DISK, &disk))
			die("ADD_NEW_DISK");
	}
	if (ioctl(ctl, RUN_ARRAY, 0))
		die("RUN_ARRAY");
built:

	fd = open_wait(path, O_RDWR | O_DIRECT);
	if (posix_memalign(&block, 4096, 4096))
		die("posix_memalign");
	memset(block, 0x5a, 4096);
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < n; i++) {
		if (pwrite(fd, block, 4096, (off_t)i * 4096) != 4096)
			die("pwrite");
		if (fsync(fd))
			die("fsync");
	}
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	close(fd);
	if (ctl >= 0 && ioctl(ctl, STOP_ARRAY, 0))
		die("STOP_ARRAY");
	return 0;
}
