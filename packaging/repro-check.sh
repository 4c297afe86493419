#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Reproducibility check (what `make repro-check` does): builds the static corebpf-tools twice from the same commit (HEAD),
# in two copies of the source at different paths with separate target folders and separate cargo homes' paths
# remapped, then compares the binaries' and the .debs' sha256 and looks for build-machine paths in the binaries.
#
#   packaging/repro-check.sh
#
# Takes two full static builds (several minutes on 2 cores). REPRO_DIR picks the scratch folder (default: a new
# one under /var/tmp, removed afterwards when the check passes). ARCH (the Makefile's: x86_64 or aarch64) picks the
# architecture built (`make repro-check ARCH=aarch64`: the arm64 cross build). Exit 0 when every binary is identical.
set -eu

[ $# -eq 0 ] || { echo "usage: repro-check.sh" >&2; exit 2; }
repo=$(git rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse HEAD)
epoch=$(git -C "$repo" log -1 --format=%ct "$commit")
work=${REPRO_DIR:-$(mktemp -d /var/tmp/corebpf-repro.XXXXXX)}
arch=${ARCH:-$(uname -m)}
[ "$arch" != arm64 ] || arch=aarch64
triple=$arch-unknown-linux-gnu
echo "repro-check: commit $commit, two builds under $work"

for copy in one second-copy; do
    src=$work/$copy/corebpf-tools
    rm -rf "$work/$copy"
    mkdir -p "$src"
    git -C "$repo" archive "$commit" | tar -x -C "$src"
    echo "repro-check: building $src (log: $work/$copy.log)"
    (cd "$src" && env -u CARGO_TARGET_DIR make deb ARCH="$arch" SOURCE_DATE_EPOCH="$epoch") > "$work/$copy.log" 2>&1 || {
        tail -20 "$work/$copy.log" >&2
        echo "repro-check: the build in $src failed" >&2
        exit 1
    }
done

status=0
deb_a=$(ls "$work"/one/corebpf-tools/target/debian/*.deb)
deb_b=$(ls "$work"/second-copy/corebpf-tools/target/debian/*.deb)
[ "$arch" = "$(uname -m)" ] || echo "repro-check: built for $arch: $(basename "$deb_a")"
if cmp -s "$deb_a" "$deb_b"; then
    echo "identical  $(sha256sum < "$deb_a" | cut -d' ' -f1)  $(basename "$deb_a") ($(stat -c %s "$deb_a") bytes)"
else
    echo "DIFFERENT  $(basename "$deb_a")"
    status=1
fi
for t in corebpf-tools; do
    a=$work/one/corebpf-tools/target/$triple/dist/$t
    b=$work/second-copy/corebpf-tools/target/$triple/dist/$t
    sa=$(sha256sum < "$a" | cut -d' ' -f1)
    sb=$(sha256sum < "$b" | cut -d' ' -f1)
    if [ "$sa" = "$sb" ]; then
        echo "identical  $sa  $t ($(stat -c %s "$a") bytes)"
    else
        echo "DIFFERENT  $sa $sb  $t"
        status=1
    fi
    for path in "$work" "${CARGO_HOME:-$HOME/.cargo}" "$repo"; do
        if grep -q -a -F "$path" "$a"; then
            echo "  $t embeds the build-machine path $path"
            status=1
        fi
    done
done
if [ $status -eq 0 ]; then
    [ -n "${REPRO_DIR:-}" ] || rm -rf "$work"
    echo "repro-check: every binary is identical"
else
    echo "repro-check: FAILED (builds kept in $work)" >&2
fi
exit $status
