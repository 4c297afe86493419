#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# bench/run.sh: what `make bench` does. Installs the anchors (libbpf-tools, bpftrace) and build dependencies,
# builds the shipped binary (`make static`: corebpf-tools, static, fat LTO) and lays out a link per tool in
# target/bench/bin as `make install` would, then runs bench/bench.py, which writes docs/benchmarks.md.
# As root. BENCH_NO_BUILD=1 skips the build (use the binary already built); the BENCH_* settings of
# bench/bench.py (BENCH_REPEAT, BENCH_QUICK, BENCH_ONLY, BENCH_OUT, BENCH_SIZE_TOOLS) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "bench: run as root (it installs packages and loads BPF programs)" >&2
    exit 1
fi
./scripts/deps.sh                # build deps, libbpf-tools, bpftrace, python3; mounts tracefs
export PATH="$HOME/.cargo/bin:$PATH"

if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
    make --no-print-directory static
fi
bin=target/bench/bin
rm -rf "$bin"
mkdir -p "$bin"
ln -s "../../$(uname -m)-unknown-linux-gnu/dist/corebpf-tools" "$bin/corebpf-tools"
for dir in tools/*/; do
    ln -s corebpf-tools "$bin/$(basename "$dir")"
done
exec python3 bench/bench.py
