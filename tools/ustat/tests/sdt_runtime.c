// SPDX-License-Identifier: Apache-2.0 OR MIT
// A native stand-in for a language runtime, for ustat's tests where no runtime is installed (the kernel-matrix
// guests): built with -DJAVA it carries HotSpot's probes (providers hotspot and hotspot_jni), else CPython's
// (provider python); ustat knows it by its file name (java-... or python-...). After a go byte on stdin it fires
// each counted probe a known number of times (below), plus HotSpot's memory-pool probe, which ustat does not
// count, prints "done" and exits.
#include <stdio.h>
#include <unistd.h>
#include <sys/sdt.h>

/* How many times each probe fires: method entries, collections, allocations, class loads, exceptions, threads. */
#define METHODS 41
#define GCS 7
#define OBJNEWS 13
#define CLOADS 5
#define EXCPS 3
#define THREADS 2

int main(void)
{
	char go;

	if (read(0, &go, 1) != 1)
		return 1;
#ifdef JAVA
	for (long i = 0; i < METHODS; i++)
		DTRACE_PROBE1(hotspot, method__entry, i);
	for (long i = 0; i < GCS; i++) {
		DTRACE_PROBE1(hotspot, gc__begin, i);
		/* A collection visits several memory pools: not collections of their own. */
		DTRACE_PROBE1(hotspot, mem__pool__gc__begin, i);
		DTRACE_PROBE1(hotspot, mem__pool__gc__begin, i + 1);
	}
	for (long i = 0; i < OBJNEWS; i++)
		DTRACE_PROBE1(hotspot, object__alloc, i);
	for (long i = 0; i < CLOADS; i++)
		DTRACE_PROBE1(hotspot, class__loaded, i);
	for (long i = 0; i < EXCPS; i++)
		DTRACE_PROBE1(hotspot_jni, ExceptionOccurred__entry, i);
	for (long i = 0; i < THREADS; i++)
		DTRACE_PROBE1(hotspot, thread__start, i);
#else
	for (long i = 0; i < METHODS; i++)
		DTRACE_PROBE1(python, function__entry, i);
	for (long i = 0; i < GCS; i++)
		DTRACE_PROBE1(python, gc__start, i % 3);
#endif
	printf("done\n");
	fflush(stdout);
	return 0;
}
