#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Installs what building and testing corebpf-tools needs on Debian/Ubuntu (run as root).
# Build: clang (BPF compiler), libelf, zlib, pkg-config, make, gcc. Tests and benchmarks: bpftool, the anchors
# (libbpf-tools, bpftrace), and the tools test helpers use (a JDK for the Java runtime tools' workloads; libc6-dbg
# names the C library's local functions, such as the IFUNC implementations trace's tests probe). Rust itself comes from rustup (1.88 or newer).
set -euo pipefail

build_pkgs=(clang llvm make gcc pkg-config libelf-dev zlib1g-dev)
test_pkgs=(libc6-dbg systemd python3-venv openjdk-17-jdk-headless xfsprogs btrfs-progs bpftool libbpf-tools bpftrace systemtap-sdt-dev iproute2 procps man-db python3 qemu-system-x86 busybox-static cpio e2fsprogs musl-tools prometheus chromium lintian debhelper dpkg-dev)

if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: run as root (it installs packages with apt-get)" >&2
    exit 1
fi
# The arm64 build (`make static ARCH=aarch64`, `make deb ARCH=arm64`): the cross compiler and C library, the tools
# libbpf-sys needs to build its vendored libelf (autoreconf, flex, bison, gawk), QEMU's user mode (the binary
# writes its own man pages when packaged) and its system emulator (`make vmtest-arm64`).
arm64_pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross autoconf automake libtool autopoint gettext flex bison gawk
    qemu-user-static qemu-system-arm)
missing=()
for p in "${build_pkgs[@]}" "${test_pkgs[@]}" "${arm64_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "deps.sh: Rust is not installed; install Rust 1.88 or newer with rustup (https://rustup.rs)" >&2
    exit 1
fi

# The Rust standard library for the arm64 build.
if command -v rustup > /dev/null 2>&1 && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    rustup target add aarch64-unknown-linux-gnu
fi

# The host tests run under cargo-nextest (tests of different binaries side by side; `make test-run`).
if ! command -v cargo-nextest >/dev/null 2>&1; then
    echo "deps.sh: installing cargo-nextest (cargo install, a few minutes)"
    cargo install --locked --quiet cargo-nextest
fi

# The exporter's Kubernetes manifest is checked against Kubernetes' own schemas, offline, by kubernetes-validate
# (PyPI; it carries the schemas), in a virtual environment of its own (tests/tests/exporter.rs).
venv=/opt/corebpf-tools-venv
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    echo "deps.sh: installing kubernetes-validate in $venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install --quiet kubernetes-validate
fi

# Classic tracepoints need tracefs; tp_btf, raw_tp, uprobes and perf events do not.
if [ ! -d /sys/kernel/tracing/events ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
echo "deps.sh: build and test dependencies are installed"
