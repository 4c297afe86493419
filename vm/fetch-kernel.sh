#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Fetches one Debian cloud kernel for the VM kernel matrix into the cache and prints the path of its vmlinuz.
#
#   vm/fetch-kernel.sh 5.10|6.1|6.12
#
# Kernels come from Debian's archive through a private apt configuration (its own sources list, lists and cache
# under $VM_CACHE/apt-<suite>), so the machine's own apt sources and state are left untouched. The archive URIs are
# taken from the machine's apt sources (override with VM_DEBIAN_URI and VM_DEBIAN_SECURITY_URI). A kernel is
# fetched once: $VM_CACHE/kernels/<series>/vmlinuz stays until that folder is removed.
set -euo pipefail

series=${1:?usage: fetch-kernel.sh 5.10|6.1|6.12}
cache=${VM_CACHE:-$HOME/.cache/corebpf-vm}
dest=$cache/kernels/$series
if [ -s "$dest/vmlinuz" ]; then
    echo "$dest/vmlinuz"
    exit 0
fi

# Which suite and meta-package give each kernel series (the meta-package names the current ABI's image).
case $series in
    5.10) suite=bullseye meta=linux-image-cloud-amd64 ;;
    6.1) suite=bookworm meta=linux-image-cloud-amd64 ;;
    6.12) suite=bookworm meta=linux-image-6.12-cloud-amd64 ;;
    *)
        echo "fetch-kernel.sh: unknown kernel series '$series' (known: 5.10, 6.1, 6.12)" >&2
        exit 1
        ;;
esac

# The machine's Debian archive URIs, from deb822 .sources files or one-line sources.list entries.
machine_uris() {
    {
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n'
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p'
    } | grep -v '^$' | sort -u
}
uris=$(machine_uris || true)
main_uri=${VM_DEBIAN_URI:-$(echo "$uris" | grep -E '/debian/?$' | head -1 || true)}
security_uri=${VM_DEBIAN_SECURITY_URI:-$(echo "$uris" | grep -E '/debian-security/?$' | head -1 || true)}
if [ -z "$main_uri" ]; then
    echo "fetch-kernel.sh: no Debian archive in this machine's apt sources; set VM_DEBIAN_URI" >&2
    exit 1
fi

aptdir=$cache/apt-$suite
mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$dest"
{
    echo "deb $main_uri $suite main"
    echo "deb $main_uri $suite-updates main"
    [ -n "$security_uri" ] && echo "deb $security_uri $suite-security main"
} > "$aptdir/sources.list"
apt_opts=(
    -o "Dir::Etc::SourceList=$aptdir/sources.list"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$aptdir/lists"
    -o "Dir::Cache=$aptdir/cache"
    -o "Dir::State::Status=/dev/null"
    -o "APT::Get::List-Cleanup=0"
    -o "APT::Sandbox::User=root"
)
echo "fetch-kernel.sh: updating the private apt lists for $suite" >&2
apt-get "${apt_opts[@]}" -qq update >&2
pkg=$(apt-cache "${apt_opts[@]}" depends "$meta" | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -1)
if [ -z "$pkg" ]; then
    echo "fetch-kernel.sh: $meta in $suite names no kernel image" >&2
    exit 1
fi
echo "fetch-kernel.sh: downloading $pkg" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get "${apt_opts[@]}" -qq download "$pkg" >&2)
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"
vmlinuz=$(ls "$work"/root/boot/vmlinuz-* | head -1)
cp "$work"/root/boot/config-* "$dest/config" 2> /dev/null || true
cp "$vmlinuz" "$dest/vmlinuz.tmp"
echo "$pkg" > "$dest/package"
basename "$vmlinuz" | sed 's/^vmlinuz-//' > "$dest/release"
mv "$dest/vmlinuz.tmp" "$dest/vmlinuz"
echo "$dest/vmlinuz"
