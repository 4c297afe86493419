// SPDX-License-Identifier: Apache-2.0 OR MIT
/* A helper of gethostlatency's tests: a dynamically linked program that calls no resolver function. */
int main(void) { return 0; }
