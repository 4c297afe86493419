#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 OR MIT
# The template promise (what `make template-check` does, and CI with it): `make new-tool NAME=x KIND=k` gives, for
# each template of templates/ (hist, snoop), a tool that builds, lints clean, joins the multicall binary, documents
# itself, passes every check `make docs-check` makes of a tool, and passes its own tests against the kernel, with
# nothing edited by hand.
#
# In a temporary copy of the workspace (every file git tracks or would track), runs scripts/new-tool.sh
# my-new_KIND (a name with both - and _) for each template, builds them and corebpf-tools, checks `--help`, `--version`,
# `corebpf-tools --list` and the man page made from its doc.md, writes its help snapshot, runs the docs check,
# clippy and rustfmt on it, and runs its integration tests as root.
#
# The copy is built with a copy of this workspace's compiled test-profile artifacts, so that only the new tool and what
# lists it are compiled: the template check then costs about one tool's build, not the workspace's. Cargo reuses
# an artifact only if the compiler's command line is the same, and those name the target folder by its absolute
# path (a native library's `-L` of libbpf-sys, every `-L dependency=`), so a copy elsewhere would rebuild
# everything from libbpf-sys up. So the script runs in a private mount namespace where the copy is mounted over
# the workspace's own path: the same paths, none of the workspace's files touched, and the mounts gone with the
# script. Where no mount namespace can be made (not root), the copy is built where it lies, which rebuilds all.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${COREBPF_TEMPLATE_NS:-}" ] && [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    exec env COREBPF_TEMPLATE_NS=1 unshare --mount --propagation private "$0" "$@"
fi
kinds=$(ls "$repo/templates" | tr '\n' ' ' | sed 's/ $//')
work=$(mktemp -d /var/tmp/corebpf-template.XXXXXX)
trap 'cd /; rm -rf "$work"' EXIT
start=$SECONDS
say() { echo "template-check: [$((SECONDS - start)) s] $*"; }
fail() { say "FAILED: $*"; exit 1; }

say "copying the workspace to $work/src"
mkdir -p "$work/src"
git -C "$repo" ls-files -z --cached --others --exclude-standard |
    (cd "$repo" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
    (cd "$repo" && xargs -0 cp --parents --preserve=timestamps -t "$work/src")
# Folders keep their times too: a build script that watches a folder (every tool's watches bpf/include) sees the
# newest time of anything in it, the folder itself included, and a fresh folder time would rebuild every tool.
(cd "$work/src" && find . -type d -print0 | xargs -0 -I{} touch -c -r "$repo/{}" "{}")
# The workspace's compiled test-profile artifacts (Cargo.toml's `tests`, what `make test-build` and `make lint`
# build), copied for the copy (incremental state left out).
profile=tests
cached=${CARGO_TARGET_DIR:-$repo/target}
mkdir -p "$work/target"
if [ -d "$cached/$profile" ]; then
    say "seeding the copy's target folder with the workspace's compiled $profile artifacts"
    tar -C "$cached" --exclude="$profile/incremental" -cf - "$profile" | tar -C "$work/target" -xf -
fi
if [ -n "${COREBPF_TEMPLATE_NS:-}" ] && [ "$cached" = "$repo/target" ]; then
    # The copy takes the workspace's place, in this namespace only, with the seeded target folder as its own.
    mkdir -p "$work/src/target"
    mount --bind "$work/src" "$repo"
    mount --bind "$work/target" "$repo/target"
    trap 'cd /; umount "$repo/target" "$repo"; rm -rf "$work"' EXIT
    src=$repo
    say "the copy is mounted over $repo in a private mount namespace"
else
    src=$work/src
fi
export CARGO_TARGET_DIR=$src/target
[ "$src" = "$repo" ] || ln -s "$work/target" "$CARGO_TARGET_DIR"
cd "$src"
for kind in $kinds; do ./scripts/new-tool.sh "my-new_$kind" "$kind"; done

# The same commands and features as `make test-build` and `make lint` (CI runs them first), so that the seeded
# artifacts are fresh and only the new tool and the multicall binary are compiled here.
features=(--profile "$profile" --workspace --features corebpf-tests/vm)
say "building $kinds, their tests and corebpf-tools (target: $CARGO_TARGET_DIR)"
cargo test "${features[@]}" --no-run --quiet
cargo build "${features[@]}" --quiet --bin corebpf-tools
bin=$CARGO_TARGET_DIR/$profile
for kind in $kinds; do
    new=my-new_$kind
    help=$(COLUMNS=100 "$bin/$new" --help </dev/null)
    head -3 <<<"$help"
    grep -q "^Usage: $new " <<<"$help" || fail "$new --help does not name $new"
    grep -q "^examples:" <<<"$help" || fail "$new --help lacks the examples of tools/$new/doc.md"
    "$bin/corebpf-tools" --list | grep -q "^ *$new " || fail "corebpf-tools --list does not list $new"
    "$bin/corebpf-tools" "$new" --version | grep -q "^$new " || fail "corebpf-tools $new --version"
    man=$(COREBPF_GENERATE=man COREBPF_MAN_SECTIONS="tools/$new/doc.md" "$bin/$new")
    grep -q '^\.SH EXAMPLES' <<<"$man" || fail "no man page EXAMPLES from tools/$new/doc.md"
    printf '%s\n' "$help" > "tools/$new/tests/$new.help"   # what `make snapshots` writes
done

say "the parts every tool has (make docs-check), lint"
python3 scripts/gen-docs.py >/dev/null || true          # the pages show the snapshots (what it lacks: below)
# All but one thing: the description is still the template's until its author writes what the tool shows, which
# docs-check asks of every tool (it would list it for these too); anything else it finds fails the promise.
lacks=$(python3 scripts/gen-docs.py --check 2>&1 | grep -v "^tools/my-new_[a-z]*/Cargo.toml: its description is still its template's" || true)
[ -z "$lacks" ] || fail "make docs-check finds a new tool incomplete: $lacks"
cargo clippy "${features[@]}" --quiet --all-targets -- -D warnings || fail "clippy warns about a new tool"
for kind in $kinds; do
    new=my-new_$kind
    rustfmt --edition 2021 --check "tools/$new"/src/*.rs "tools/$new"/tests/*.rs || fail "$new is not rustfmt-clean"
    say "the integration tests of $new, against the kernel"
    COREBPF_BIN_DIR=$bin cargo test "${features[@]}" --quiet --test "$new" || fail "the tests of $new fail"
done
say "ok: make new-tool gives, from each template ($kinds), a whole tool that builds, lints clean and passes its tests"
