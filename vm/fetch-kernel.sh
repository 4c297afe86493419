#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Fetches one Debian cloud kernel for the VM kernel matrix into the cache and prints the path of its vmlinuz.
#
#   vm/fetch-kernel.sh 5.10|6.1|6.12|6.1-arm64|6.12-arm64
#
# A series ending in -arm64 is Debian's arm64 cloud kernel of that version, for the arm64 column of the matrix
# (vm/vmtest-arm64.sh boots it in qemu-system-aarch64); its private apt configuration asks for the arm64
# architecture, and it keeps no KVM modules (kvm is built into Debian's arm64 kernels; kvmexit is x86's), but
# beside the vmlinuz the guest's user space, from the same suite's arm64 packages: userland/, a root tree with
# busybox (busybox-static), the C library (libc6: the tools' uprobes on libc need one), bash (bashreadline's),
# libgcc_s (libgcc-s1: the cross-built test binaries need it) and OpenSSL (libssl3: sslsniff's test helper links
# it); and dev/include/openssl, the headers of libssl-dev (its architecture's own merged in), which the helper is
# cross-compiled with on the host (vm/vmtest.sh).
#
# Kernels come from Debian's archive through a private apt configuration (its own sources list, lists and cache
# under $VM_CACHE/apt-<suite>), so the machine's own apt sources and state are left untouched. The archive URIs are
# taken from the machine's apt sources (override with VM_DEBIAN_URI and VM_DEBIAN_SECURITY_URI). A kernel is
# fetched once: $VM_CACHE/kernels/<series>/vmlinuz stays until that folder is removed.
#
# Beside it, kvm/ holds the package's KVM modules, decompressed (irqbypass.ko, kvm.ko, kvm-amd.ko): the guests
# boot with `-cpu max`, which has SVM, so kvmexit's tests load them to run a tiny KVM guest (vm/README.md). md/
# holds, the same way, the md (software RAID) core, two of its personalities and the loop driver (md-mod.ko,
# raid0.ko, raid1.ko, loop.ko: none needs another module), which mdflush's tests load to build an array on two
# loop devices. A kernel cached before kvm/ or md/ existed gets them from the same package; if that package is
# gone from the archive, the kernel is fetched anew.
set -euo pipefail

series=${1:?usage: fetch-kernel.sh 5.10|6.1|6.12|6.1-arm64|6.12-arm64}
cache=${VM_CACHE:-$HOME/.cache/corebpf-vm}
dest=$cache/kernels/$series
kvm_modules="irqbypass kvm kvm-amd"
arch=amd64
case $series in *-arm64) arch=arm64 kvm_modules="" ;; esac
md_modules="md-mod raid0 raid1 loop"
# An arm64 guest's user space: busybox, the C library, bash (and its libtinfo), libgcc_s, which the cross-built
# test binaries and Rust helpers unwind with, and OpenSSL; beside it the headers (dev_pkgs) the cross-built helpers
# need. userland.complete names both lists: a userland kept with other lists is fetched again.
userland_pkgs="busybox-static libc6 bash libtinfo6 libgcc-s1 libssl3"
dev_pkgs="libssl-dev"
userland_ok() { [ $arch = amd64 ] || [ "$(cat "$dest/userland.complete" 2> /dev/null)" = "$userland_pkgs; $dev_pkgs" ]; }
kernel_ok() { [ -s "$dest/vmlinuz" ] && [ -f "$dest/kvm/complete" ] && [ -f "$dest/md/complete" ]; }
if kernel_ok && userland_ok; then
    echo "$dest/vmlinuz"
    exit 0
fi

# Which suite and meta-package give each kernel series (the meta-package names the current ABI's image).
case $series in
    5.10) suite=bullseye meta=linux-image-cloud-amd64 ;;
    6.1) suite=bookworm meta=linux-image-cloud-amd64 ;;
    6.12) suite=bookworm meta=linux-image-6.12-cloud-amd64 ;;
    6.1-arm64) suite=bookworm meta=linux-image-cloud-arm64 ;;
    6.12-arm64) suite=bookworm meta=linux-image-6.12-cloud-arm64 ;;
    *)
        echo "fetch-kernel.sh: unknown kernel series '$series' (known: 5.10, 6.1, 6.12, 6.1-arm64, 6.12-arm64)" >&2
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
[ $arch = amd64 ] || aptdir=$aptdir-$arch
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
[ $arch = amd64 ] || apt_opts+=(-o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
# extract_modules ROOT SET NAMES: the modules NAMES of the unpacked package at ROOT into $dest/SET, decompressed.
extract_modules() {
    local m f set=$2
    rm -rf "$dest/$set.tmp"
    mkdir -p "$dest/$set.tmp"
    for m in $3; do
        f=$(find "$1/lib/modules" "$1/usr/lib/modules" -name "$m.ko*" 2> /dev/null | head -1 || true)
        [ -n "$f" ] || {
            echo "fetch-kernel.sh: the package has no $m.ko" >&2
            return 1
        }
        case $f in
            *.xz) xz -dc "$f" ;;
            *.zst) zstd -dcq "$f" ;;
            *.gz) gzip -dc "$f" ;;
            *) cat "$f" ;;
        esac > "$dest/$set.tmp/$m.ko"
    done
    : > "$dest/$set.tmp/complete"
    rm -rf "${dest:?}/$set"
    mv "$dest/$set.tmp" "$dest/$set"
}
# extract_all ROOT: every module set the guests use (and, for an arm64 kernel, its user space).
extract_all() {
    extract_modules "$1" kvm "$kvm_modules"
    extract_modules "$1" md "$md_modules"
    [ $arch = amd64 ] || fetch_userland
}
# fetch_userland: $dest/userland, the guest's programs and libraries of this architecture (no documentation,
# locales or character-set modules), and $dest/dev/include, the headers of dev_pkgs.
fetch_userland() {
    local d
    rm -rf "$work/userland" "$dest/userland" "$dest/dev" "$dest/userland.complete"
    mkdir -p "$work/userland/dev" "$work/dev"
    # shellcheck disable=SC2086 # lists of package names
    (cd "$work/userland" && apt-get "${apt_opts[@]}" -qq download $userland_pkgs >&2 && cd dev && apt-get "${apt_opts[@]}" -qq download $dev_pkgs >&2) ||
        { apt-get "${apt_opts[@]}" -qq update >&2 && (cd "$work/userland" && apt-get "${apt_opts[@]}" -qq download $userland_pkgs >&2 && cd dev && apt-get "${apt_opts[@]}" -qq download $dev_pkgs >&2); }
    for d in "$work"/userland/*.deb; do dpkg-deb -x "$d" "$work/userland/root"; done
    for d in "$work"/userland/dev/*.deb; do dpkg-deb -x "$d" "$work/dev"; done
    rm -rf "$work"/userland/root/usr/share "$work"/userland/root/usr/lib/*/gconv
    # OpenSSL's headers, with the architecture's own (opensslconf.h, configuration.h) among them.
    mkdir -p "$work/dev/include/openssl"
    cp -a "$work"/dev/usr/include/openssl/. "$work"/dev/usr/include/*-linux-gnu/openssl/. "$work/dev/include/openssl/"
    mv "$work/userland/root" "$dest/userland"
    mkdir -p "$dest/dev"
    mv "$work/dev/include" "$dest/dev/include"
    echo "$userland_pkgs; $dev_pkgs" > "$dest/userland.complete"
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A kernel whose user space lacks a package the list names now: only that is fetched.
if kernel_ok; then
    echo "fetch-kernel.sh: fetching the arm64 user space ($userland_pkgs; $dev_pkgs)" >&2
    fetch_userland
    echo "$dest/vmlinuz"
    exit 0
fi

# A kernel cached without its modules: take them from the package it came from, if the archive still has it.
if [ -s "$dest/vmlinuz" ] && [ -s "$dest/package" ]; then
    pkg=$(cat "$dest/package")
    echo "fetch-kernel.sh: adding the KVM and md modules of $pkg" >&2
    if (cd "$work" && apt-get "${apt_opts[@]}" -qq download "$pkg" >&2) ||
        { apt-get "${apt_opts[@]}" -qq update >&2 && (cd "$work" && apt-get "${apt_opts[@]}" -qq download "$pkg" >&2); }; then
        dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"
        extract_all "$work/root"
        echo "$dest/vmlinuz"
        exit 0
    fi
    echo "fetch-kernel.sh: $pkg is no longer in the archive: fetching the current kernel" >&2
    rm -rf "$work"/*
fi

echo "fetch-kernel.sh: updating the private apt lists for $suite" >&2
apt-get "${apt_opts[@]}" -qq update >&2
pkg=$(apt-cache "${apt_opts[@]}" depends "$meta" | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -1)
if [ -z "$pkg" ]; then
    echo "fetch-kernel.sh: $meta in $suite names no kernel image" >&2
    exit 1
fi
echo "fetch-kernel.sh: downloading $pkg" >&2
(cd "$work" && apt-get "${apt_opts[@]}" -qq download "$pkg" >&2)
dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"
vmlinuz=$(ls "$work"/root/boot/vmlinuz-* | head -1)
cp "$work"/root/boot/config-* "$dest/config" 2> /dev/null || true
extract_all "$work/root"
cp "$vmlinuz" "$dest/vmlinuz.tmp"
echo "$pkg" > "$dest/package"
basename "$vmlinuz" | sed 's/^vmlinuz-//' > "$dest/release"
mv "$dest/vmlinuz.tmp" "$dest/vmlinuz"
echo "$dest/vmlinuz"
