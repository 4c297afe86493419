// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A helper of funccount's tests: twenty functions, fn_NN called NN+1 times after a byte on stdin: more matches
 * than one object's slot programs. */
#include <unistd.h>
#define F(n) __attribute__((noinline)) void fn_##n(void) { __asm__ volatile(""); }
F(00) F(01) F(02) F(03) F(04) F(05) F(06) F(07) F(08) F(09)
F(10) F(11) F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19)
#define CALL(n) for (int i = 0; i <= 1##n - 100; i++) fn_##n();
int main(void)
{
    char go;
    if (read(0, &go, 1) != 1)
        return 1;
    CALL(00) CALL(01) CALL(02) CALL(03) CALL(04) CALL(05) CALL(06) CALL(07) CALL(08) CALL(09)
    CALL(10) CALL(11) CALL(12) CALL(13) CALL(14) CALL(15) CALL(16) CALL(17) CALL(18) CALL(19)
    return 0;
}
