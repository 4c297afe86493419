#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Installs the multicall binary corebpf-tools with its man page corebpf-tools(8), a link per tool, each tool's man
# page and bash, zsh and fish completions (what `make install` and `make deb` do), or lists or removes exactly those files.
#
#   packaging/install-tools.sh install|list|uninstall TOOL...
#
# Settings (environment; the Makefile passes its variables):
#   BIN_SRC       folder of the built corebpf-tools (required for install)
#   DESTDIR       staging root (default: none)
#   PREFIX        /usr/local by default; binaries go to $PREFIX/sbin, man pages to $PREFIX/share/man/man8
#   APP_PREFIX    prepended to every tool's installed name: APP_PREFIX=bpf- installs the link bpf-biolatency, its
#                 man page bpf-biolatency.8.gz and completions for the command bpf-biolatency (corebpf-tools
#                 itself keeps its name)
# The links are symbolic and relative (`bpf-biolatency -> corebpf-tools`): package managers then store one binary,
# never a copy per name.
#   BASHCOMPDIR, ZSHCOMPDIR, FISHCOMPDIR   completion folders (defaults below)
#   SCHEMADIR     the JSON Schemas of the tools' --json lines (docs/json/TOOL.schema.json; default
#                 $PREFIX/share/corebpf-tools/json)
#   SOURCE_DATE_EPOCH   dates the man pages (reproducible builds)
#   RUN_WITH      a command that runs the binary when it is built for another architecture (the Makefile gives
#                 qemu-aarch64-static for ARCH=aarch64 on x86_64): the generated pages do not depend on it
# The man pages and completions come from the binaries themselves (COREBPF_GENERATE, see
# common/src/cli/man_completions.rs), with the hand-written sections of the tool's documentation source,
# tools/TOOL/doc.md (its parts titled in capitals: DESCRIPTION, EXAMPLES...).
set -eu

action=${1:?usage: install-tools.sh install|list|uninstall TOOL...}
shift
here=$(cd "$(dirname "$0")" && pwd)
tools_dir=$(cd "$here/../tools" && pwd)
docs_dir=$(cd "$here/../docs" && pwd)
toolset_doc=$(cd "$here/../toolset" && pwd)/man.md
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
APP_PREFIX=${APP_PREFIX:-}
RUN_WITH=${RUN_WITH:-}
BINDIR=${BINDIR:-$PREFIX/sbin}
MANDIR=${MANDIR:-$PREFIX/share/man/man8}
BASHCOMPDIR=${BASHCOMPDIR:-$PREFIX/share/bash-completion/completions}
ZSHCOMPDIR=${ZSHCOMPDIR:-$PREFIX/share/zsh/site-functions}
FISHCOMPDIR=${FISHCOMPDIR:-$PREFIX/share/fish/vendor_completions.d}
SCHEMADIR=${SCHEMADIR:-$PREFIX/share/corebpf-tools/json}

MULTICALL=corebpf-tools

# The other names a tool is installed under: its folder's `aliases` file (one per line, # comments), if any.
aliases_of() {
    [ -f "$tools_dir/$1/aliases" ] || return 0
    sed -e 's/#.*//' -e 's/[[:space:]]//g' "$tools_dir/$1/aliases" | grep -v '^$' || true
}

# The files installed for one tool, one per line, without DESTDIR: its own, and a link and man page per alias.
files_of() {
    name=$APP_PREFIX$1
    echo "$BINDIR/$name"
    echo "$MANDIR/$name.8.gz"
    echo "$BASHCOMPDIR/$name"
    echo "$ZSHCOMPDIR/_$name"
    echo "$FISHCOMPDIR/$name.fish"
    echo "$SCHEMADIR/$1.schema.json"
    for alias in $(aliases_of "$1"); do
        echo "$BINDIR/$APP_PREFIX$alias"
        echo "$MANDIR/$APP_PREFIX$alias.8.gz"
    done
}

# Runs the tool in generation mode: generate TOOL WHAT > FILE.
generate() {
    COREBPF_GENERATE=$2 COREBPF_GENERATE_NAME=$APP_PREFIX$1 COREBPF_MAN_SECTIONS=$tools_dir/$1/doc.md \
        $RUN_WITH "$BIN_SRC/$MULTICALL" "$1" < /dev/null
}

# The multicall binary's own page, corebpf-tools(8): its hand-written sections are toolset/man.md, its list of
# tools comes from the binary, named with APP_PREFIX.
generate_multicall_page() {
    COREBPF_GENERATE=man COREBPF_GENERATE_PREFIX=$APP_PREFIX COREBPF_MAN_SECTIONS=$toolset_doc \
        $RUN_WITH "$BIN_SRC/$MULTICALL" < /dev/null
}

# Every installed file, one per line, without DESTDIR.
all_files() {
    echo "$BINDIR/$MULTICALL"
    echo "$MANDIR/$MULTICALL.8.gz"
    for t in "$@"; do files_of "$t"; done
}

case $action in
list)
    all_files "$@"
    ;;
uninstall)
    for f in $(all_files "$@"); do
        if [ -e "$DESTDIR$f" ] || [ -L "$DESTDIR$f" ]; then
            rm -f "$DESTDIR$f"
            echo "removed $DESTDIR$f"
        fi
    done
    ;;
install)
    : "${BIN_SRC:?BIN_SRC (the folder of the built binaries) is not set}"
    [ -x "$BIN_SRC/$MULTICALL" ] ||
        { echo "install-tools.sh: $BIN_SRC/$MULTICALL is not built (run make static)" >&2; exit 1; }
    for t in "$@"; do
        [ -f "$tools_dir/$t/doc.md" ] ||
            { echo "install-tools.sh: $tools_dir/$t/doc.md is missing (see $docs_dir/tool-doc.md)" >&2; exit 1; }
    done
    install -d -m 0755 "$DESTDIR$BINDIR" "$DESTDIR$MANDIR" "$DESTDIR$BASHCOMPDIR" "$DESTDIR$ZSHCOMPDIR" \
        "$DESTDIR$FISHCOMPDIR" "$DESTDIR$SCHEMADIR"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    install -m 0755 "$BIN_SRC/$MULTICALL" "$DESTDIR$BINDIR/$MULTICALL"
    generate_multicall_page > "$tmp/$MULTICALL.8"
    gzip -9 -n -c "$tmp/$MULTICALL.8" > "$tmp/$MULTICALL.8.gz"
    install -m 0644 "$tmp/$MULTICALL.8.gz" "$DESTDIR$MANDIR/$MULTICALL.8.gz"
    for t in "$@"; do
        name=$APP_PREFIX$t
        ln -sfn "$MULTICALL" "$DESTDIR$BINDIR/$name"
        generate "$t" man > "$tmp/$name.8"
        gzip -9 -n -c "$tmp/$name.8" > "$tmp/$name.8.gz"
        install -m 0644 "$tmp/$name.8.gz" "$DESTDIR$MANDIR/$name.8.gz"
        generate "$t" bash > "$tmp/bash"
        install -m 0644 "$tmp/bash" "$DESTDIR$BASHCOMPDIR/$name"
        generate "$t" zsh > "$tmp/zsh"
        install -m 0644 "$tmp/zsh" "$DESTDIR$ZSHCOMPDIR/_$name"
        generate "$t" fish > "$tmp/fish"
        install -m 0644 "$tmp/fish" "$DESTDIR$FISHCOMPDIR/$name.fish"
        install -m 0644 "$docs_dir/json/$t.schema.json" "$DESTDIR$SCHEMADIR/$t.schema.json"
        # Each alias (ext4slower for fsslower) is a link to the binary, its man page a link to the tool's.
        for alias in $(aliases_of "$t"); do
            ln -sfn "$MULTICALL" "$DESTDIR$BINDIR/$APP_PREFIX$alias"
            ln -sfn "$name.8.gz" "$DESTDIR$MANDIR/$APP_PREFIX$alias.8.gz"
        done
        echo "installed $DESTDIR$BINDIR/$name -> $MULTICALL, its man page, completions and JSON Schema"
    done
    ;;
*)
    echo "install-tools.sh: unknown action '$action' (install, list or uninstall)" >&2
    exit 2
    ;;
esac
