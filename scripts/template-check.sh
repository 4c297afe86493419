#!/usr/bin/env bash
# The template promise (what `make template-check` does): copying a tool's folder and changing only its package
# name gives a tool that builds, joins the multicall binary with one line, and runs.
#
# In a temporary copy of the workspace, copies tools/$TEMPLATE (default biolatency) to tools/my-new_tool, renames
# the package, appends the toolset line, builds both, and checks the new tool's `--help` and `--version` and
# `corebpf-tools --list`, and that its doc.md gives --help's examples and the man page's sections. It builds in
# its own target folder, seeded with a copy of this workspace's compiled release artifacts (when there are any) so
# that only the workspace's own crates are rebuilt. (Sharing the target folder itself would not do: cargo names a
# path crate's artifacts independently of its path, so the copy's build would replace this workspace's.)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
template=${TEMPLATE:-biolatency}
new=my-new_tool
work=$(mktemp -d /var/tmp/corebpf-template.XXXXXX)
trap 'rm -rf "$work"' EXIT
say() { echo "template-check: $*"; }

say "copying the workspace to $work/src"
mkdir -p "$work/src"
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp --parents -t "$work/src")

# The three commands of the README's "Adding a tool" section.
cd "$work/src"
cp -r "tools/$template" "tools/$new"
sed -i "s/^name = \"$template\"/name = \"$new\"/" "tools/$new/Cargo.toml"
echo "$new = { path = \"../tools/$new\", package = \"$new\" }" >> toolset/Cargo.toml

export CARGO_TARGET_DIR=$work/target
mkdir -p "$CARGO_TARGET_DIR"
if [ -d "$repo/target/release" ]; then
    say "seeding $CARGO_TARGET_DIR with the workspace's compiled dependencies"
    tar -C "$repo/target" --exclude=release/incremental -cf - release | tar -C "$CARGO_TARGET_DIR" -xf -
fi
say "building $new and corebpf-tools (target: $CARGO_TARGET_DIR)"
cargo build --release --quiet -p "$new" -p corebpf-tools
"$CARGO_TARGET_DIR/release/$new" --help | head -3
"$CARGO_TARGET_DIR/release/$new" --help | grep -q "^Usage: $new " || { say "FAILED: $new --help does not name $new"; exit 1; }
"$CARGO_TARGET_DIR/release/corebpf-tools" --list | grep -q "^ *$new " ||
    { say "FAILED: corebpf-tools --list does not list $new"; exit 1; }
"$CARGO_TARGET_DIR/release/corebpf-tools" "$new" --version | grep -q "^$new " ||
    { say "FAILED: corebpf-tools $new --version"; exit 1; }
# The copied doc.md is the new tool's documentation source: its --help examples are built in, its man page
# sections render (the text is the template's until rewritten).
help=$("$CARGO_TARGET_DIR/release/$new" --help)
grep -q "^examples:" <<<"$help" || { say "FAILED: $new --help lacks the examples of tools/$new/doc.md"; exit 1; }
man=$(COREBPF_GENERATE=man COREBPF_MAN_SECTIONS="tools/$new/doc.md" "$CARGO_TARGET_DIR/release/$new")
grep -q '^\.SH EXAMPLES' <<<"$man" || { say "FAILED: no man page EXAMPLES from tools/$new/doc.md"; exit 1; }
say "ok: tools/$new builds from a copy of tools/$template with only its package name changed, and runs"
