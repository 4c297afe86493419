#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# The host tests' closing line, over both nextest passes (their JUnit reports in DIR/<profile>/junit.xml):
#   tests: N passed, N failed
# and, with -v, the seconds spent per test binary (what each tool's tests cost).
set -euo pipefail
dir=${1:?usage: test-summary.sh NEXTEST-DIR [-v]}
files=$(ls "$dir"/*/junit.xml 2> /dev/null || true)
[ -n "$files" ] || { echo "test-summary: no JUnit report under $dir" >&2; exit 1; }
# <testsuites name=".." tests="N" failures="F" errors="E" ...>
awk 'match($0, /<testsuites [^>]*>/) {
        s = substr($0, RSTART, RLENGTH)
        if (match(s, / tests="[0-9]+"/)) t += substr(s, RSTART + 8, RLENGTH - 9)
        if (match(s, / failures="[0-9]+"/)) f += substr(s, RSTART + 11, RLENGTH - 12)
        if (match(s, / errors="[0-9]+"/)) f += substr(s, RSTART + 9, RLENGTH - 10)
     }
     END { printf "tests: %d passed, %d failed\n", t - f, f }' $files
if [ "${2:-}" = -v ]; then
    # <testcase name=".." classname="corebpf-tests::runqlat" time="4.8">
    grep -ho '<testcase [^>]*>' $files |
        sed -n 's/.*classname="\([^"]*\)".*time="\([0-9.]*\)".*/\1 \2/p' |
        awk '{ s[$1] += $2 } END { for (b in s) printf "%8.1f s  %s\n", s[b], b }' | sort -rn
fi
