// SPDX-License-Identifier: Apache-2.0 OR MIT
/* The helper of runqlen's tests. `rqnspinner`: spins until killed. */
#include <sys/prctl.h>
int main(void) { prctl(PR_SET_NAME, "rqnspinner"); for (;;) {} }
