// SPDX-License-Identifier: Apache-2.0 OR MIT
/* kvmexit's test helper: a tiny KVM guest made with KVM's ioctls, with two vCPUs in real mode. vCPU i runs, in
 * a thread named "CPU i/KVM" (QEMU's name, which -v looks for), N_i `out` instructions to port 0x3f8 and then
 * `hlt`: N_i I/O exits and one HLT exit (plus the nested-paging faults of its first touches).
 *
 *   guest N0 N1      prints "PID TID0 TID1", waits for a byte on stdin, runs vCPU 0 to its hlt, then vCPU 1,
 *                    prints "io IO0 IO1" (the KVM_EXIT_IO exits each saw), and exits at the end of stdin. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MEM_SIZE 0x10000
#define PORT 0x3f8

struct vcpu {
	int index, fd, outs, io;
	pid_t tid;
	struct kvm_run *run;
	pthread_t thread;
};

static int kvm, vm;
static unsigned char *mem;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int turn = -1, named;

static void die(const char *what)
{
	fprintf(stderr, "guest: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Code of vCPU i at 0x1000 * (i + 1): mov dx, PORT; mov al, 'a'; out dx, al (outs times); hlt. */
static void setup(struct vcpu *v)
{
	unsigned int code = 0x1000 * (v->index + 1);
	unsigned char *p = mem + code;
	struct kvm_sregs sregs;
	struct kvm_regs regs = { .rip = code, .rflags = 2 };
	int size;

	*p++ = 0xba, *p++ = PORT & 0xff, *p++ = PORT >> 8;
	*p++ = 0xb0, *p++ = 'a';
	for (int i = 0; i < v->outs; i++)
		*p++ = 0xee;
	*p++ = 0xf4;
	v->fd = ioctl(vm, KVM_CREATE_VCPU, v->index);
	if (v->fd < 0)
		die("KVM_CREATE_VCPU");
	size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	v->run = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED)
		die("mmap kvm_run");
	if (ioctl(v->fd, KVM_GET_SREGS, &sregs) < 0)
		die("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs) < 0)
		die("KVM_SET_SREGS");
	if (ioctl(v->fd, KVM_SET_REGS, &regs) < 0)
		die("KVM_SET_REGS");
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	char name[16];

	snprintf(name, sizeof(name), "CPU %d/KVM", v->index);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&lock);
	v->tid = syscall(SYS_gettid);
	named++;
	pthread_cond_broadcast(&cond);
	while (turn != v->index)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (;;) {
		if (ioctl(v->fd, KVM_RUN, 0) < 0)
			die("KVM_RUN");
		if (v->run->exit_reason == KVM_EXIT_IO && v->run->io.port == PORT) {
			v->io++;
			continue;
		}
		if (v->run->exit_reason == KVM_EXIT_HLT)
			break;
		fprintf(stderr, "guest: vCPU %d: unexpected exit %u\n", v->index, v->run->exit_reason);
		exit(1);
	}
	pthread_mutex_lock(&lock);
	turn = v->index + 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	struct vcpu vcpus[2] = { { .index = 0 }, { .index = 1 } };
	struct kvm_userspace_memory_region region = { .memory_size = MEM_SIZE };
	char byte;

	if (argc != 3) {
		fprintf(stderr, "usage: guest N0 N1\n");
		return 2;
	}
	vcpus[0].outs = atoi(argv[1]);
	vcpus[1].outs = atoi(argv[2]);
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm");
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		die("KVM_CREATE_VM");
	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	region.userspace_addr = (unsigned long)mem;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		die("KVM_SET_USER_MEMORY_REGION");
	for (int i = 0; i < 2; i++) {
		setup(&vcpus[i]);
		if (pthread_create(&vcpus[i].thread, NULL, vcpu_thread, &vcpus[i]))
			die("pthread_create");
	}
	pthread_mutex_lock(&lock);
	while (named < 2)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	printf("%d %d %d\n", getpid(), vcpus[0].tid, vcpus[1].tid);
	fflush(stdout);
	if (read(0, &byte, 1) != 1)
		return 1;
	pthread_mutex_lock(&lock);
	turn = 0;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 2; i++)
		pthread_join(vcpus[i].thread, NULL);
	printf("io %d %d\n", vcpus[0].io, vcpus[1].io);
	fflush(stdout);
	while (read(0, &byte, 1) > 0)
		;
	return 0;
}
