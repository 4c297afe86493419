#!/usr/bin/env bash
# soak/run.sh: what `make soak` does. Builds the release binary of every tool in tools/* (one
# `cargo build --release -p TOOL` each; a tool that does not build is left out and named in the report), then
# runs soak/soak.py, which starts them all at once under a mixed workload with faults for SOAK_SECONDS (default
# 600) and writes docs/soak.md (SOAK_REPORT elsewhere). As root. SOAK_NO_BUILD=1 uses target/release as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "soak: run as root (the tools load BPF programs)" >&2
    exit 1
fi
export PATH="$HOME/.cargo/bin:$PATH"
if [ "${SOAK_NO_BUILD:-0}" != 1 ]; then
    for dir in tools/*/; do
        tool=$(basename "$dir")
        [ -f "$dir/Cargo.toml" ] || continue
        if ! cargo build --release --quiet -p "$tool"; then
            echo "soak: $tool does not build; left out" >&2
            export "SOAK_SKIP_$tool=did not build (cargo build --release -p $tool failed)"
        fi
    done
fi
exec python3 soak/soak.py
