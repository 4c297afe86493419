#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Checks that the kernel matrix catches a broken fallback and says why: runs vm/vmtest.sh on vm/selfcheck.scenarios
# (scenarios that force an attach mechanism the tool cannot use) and passes only if the matrix fails, marks each
# of those scenarios FAIL in its table, and prints the tool's own one-line reason.
#
#   vm/selfcheck.sh            # on KERNELS=6.1 unless KERNELS is set
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
KERNELS=${KERNELS:-6.1} TOOLS= VM_LOG_LINK=latest-selfcheck VM_SCENARIOS=$repo/vm/selfcheck.scenarios "$repo/vm/vmtest.sh" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
fail() {
    echo "vmtest-selfcheck: FAILED: $*" >&2
    exit 1
}
[ "$rc" = 1 ] || fail "vm/vmtest.sh exited $rc on broken scenarios; expected 1"
grep -q '^biolatency .*FAIL .*kprobe(fail)' "$out" || fail "the table does not mark biolatency/kprobe FAIL"
grep -q "tool said: biolatency: COREBPF_ATTACH=kprobe allows none of this tool's attach mechanisms" "$out" ||
    fail "the failure does not show the tool's reason"
grep -q '^funccount .*FAIL .*fentry(fail)' "$out" || fail "the table does not mark funccount/fentry FAIL"
grep -q "tool said: funccount: .*corebpf_no_such_function" "$out" ||
    fail "the failure does not show funccount's reason (naming corebpf_no_such_function)"
echo "vmtest-selfcheck: ok: the broken fallbacks failed the matrix, with readable reasons"
