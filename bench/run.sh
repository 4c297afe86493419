#!/usr/bin/env bash
# bench/run.sh: what `make bench` does. Installs the anchors (libbpf-tools, bpftrace) and build dependencies,
# builds release binaries of every tool, then runs bench/bench.py, which writes docs/benchmarks.md.
# As root. BENCH_NO_BUILD=1 skips the build (use the binaries already in target/release); the BENCH_* settings
# of bench/bench.py (BENCH_REPEAT, BENCH_QUICK, BENCH_ONLY, BENCH_OUT) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "bench: run as root (it installs packages and loads BPF programs)" >&2
    exit 1
fi
./scripts/deps.sh                # build deps, libbpf-tools, bpftrace, python3; mounts tracefs
export PATH="$HOME/.cargo/bin:$PATH"

if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
    # Build each tool on its own, so one tool that does not build does not keep the others from being measured.
    for dir in tools/*/; do
        tool=$(basename "$dir")
        cargo build --release --quiet -p "$tool" || echo "bench: $tool did not build; it is left out" >&2
    done
fi
exec python3 bench/bench.py
