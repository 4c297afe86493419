// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A helper of gethostlatency's tests, built -static: it pauses until killed (a static program has no libc to probe). */
#include <unistd.h>
int main(void) { pause(); return 0; }
