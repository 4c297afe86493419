#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# soak/run.sh: what `make soak` does (after `make static`): runs soak/soak.py, which starts every tool at once,
# as the shipped binary (corebpf-tools and a link per tool in $COREBPF_BIN_DIR, default target/bin), under a mixed
# workload with faults for SOAK_SECONDS (default 600) and writes docs/soak.md (SOAK_REPORT elsewhere). As root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "soak: run as root (the tools load BPF programs)" >&2
    exit 1
fi
export PATH="$HOME/.cargo/bin:$PATH"
export COREBPF_BIN_DIR=${COREBPF_BIN_DIR:-$PWD/target/bin}
[ -x "$COREBPF_BIN_DIR/corebpf-tools" ] || { echo "soak: $COREBPF_BIN_DIR/corebpf-tools is not built (make static bin-links)" >&2; exit 1; }
exec python3 soak/soak.py
