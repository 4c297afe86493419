// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What a task histogram is kept per: the values of runqlat's and cpudist's `.rodata` `per` (C side;
 * common::output::taskhist::Per holds the same numbers for Rust, and its tests read them from here). */
#ifndef __COREBPF_PER_H
#define __COREBPF_PER_H

#define PER_ALL 0	/* one histogram */
#define PER_PROCESS 1	/* -P: per process (tgid) */
#define PER_THREAD 2	/* -L: per thread */
#define PER_PIDNS 3	/* --pidnss: per PID namespace */

#endif
