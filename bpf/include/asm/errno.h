/* SPDX-License-Identifier: GPL-2.0 */
/* <linux/errno.h> (included by libbpf's usdt.bpf.h) wants <asm/errno.h>, which clang -target bpf does not find
 * in the multiarch include directory; the generic one is what every architecture but alpha/mips/parisc/sparc
 * uses, and BPF programs only need the values. */
#include <asm-generic/errno.h>
