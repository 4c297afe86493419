// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Shared between funccount.bpf.c and main.rs. */
#ifndef __FUNCCOUNT_H
#define __FUNCCOUNT_H

/* Slot programs per kind in one BPF object (see funccount.bpf.c). */
#define FUNCCOUNT_SLOTS 16
/* System call numbers the raw sys_enter/sys_exit programs look up (x86-64 has about 470). */
#define SYSCALL_SLOTS 1024

#endif
