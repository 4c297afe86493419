#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Starts a new tool from a template (what `make new-tool NAME=mytool [KIND=hist|snoop]` runs): copies
# templates/KIND/ (hist, a histogram tool, by default; snoop, an event tool with a line per event) to tools/NAME,
# names every file and every mention after the tool (`template` -> NAME, `TEMPLATE` -> the name in capitals for C
# header guards), then runs `make docs`, which adds the tool to toolset/Cargo.toml, the README's table and
# docs/tools/. The new folder builds, runs and passes its tests as it is; then make it the tool you want
# (README.md, "Adding a tool").
set -euo pipefail
name=${1:?usage: scripts/new-tool.sh NAME [hist|snoop]}
kind=${2:-hist}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
[[ $name =~ ^[a-z][a-z0-9_-]*$ ]] || { echo "new-tool: $name: use lower-case letters, digits, - and _" >&2; exit 2; }
[ ! -e "tools/$name" ] || { echo "new-tool: tools/$name already exists" >&2; exit 1; }
[ -d "templates/$kind" ] || { echo "new-tool: no template $kind (templates: $(ls templates | tr '\n' ' '))" >&2; exit 2; }
upper=$(tr 'a-z-' 'A-Z_' <<<"$name")

cp -r "templates/$kind" "tools/$name"
cd "tools/$name"
for f in $(find . -depth -name '*template*'); do
    mv "$f" "$(dirname "$f")/$(basename "$f" | sed "s/template/$name/g")"
done
grep -rlI -e template -e TEMPLATE . | xargs -r sed -i "s/template/$name/g; s/TEMPLATE/$upper/g"
cd "$repo"
# It writes the generated files, then lists what the new tool still lacks (its --help snapshot, until built).
python3 scripts/gen-docs.py | grep -v '^wrote ' || true
echo "new-tool: tools/$name is ready: 'make build', then 'make snapshots' writes its --help snapshot"
