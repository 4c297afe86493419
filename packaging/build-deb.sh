#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Builds the Debian package from the static binaries (what `make deb` does):
#
#   packaging/build-deb.sh OUT_DIR TOOL...
#
# Settings (environment; the Makefile passes them): BIN_SRC (the static binaries), VERSION, DEB_APP_PREFIX
# (default bpf-: /usr/sbin/bpf-biolatency, beside libbpf-tools' /usr/sbin/biolatency; empty for plain names,
# which then declare Conflicts: libbpf-tools), DEB_MAINTAINER (default: debian/control's), SOURCE_DATE_EPOCH
# (file times, man page dates), DEB_ARCH (the package's architecture, default the machine's: arm64 for
# `make deb ARCH=arm64`), RUN_WITH (runs a binary of another architecture, see install-tools.sh). The control file's fields and description come from debian/control
# (packaging/deb-control.py), the copyright file is debian/copyright.
# Writes OUT_DIR/corebpf-tools_VERSION_ARCH.deb and prints its path. Reproducible: fixed owners, modes, times
# and order, gzip -n; the same binaries give the same package bytes.
set -eu

out=${1:?usage: build-deb.sh OUT_DIR TOOL...}
shift
here=$(cd "$(dirname "$0")" && pwd)
: "${BIN_SRC:?BIN_SRC is not set}" "${VERSION:?VERSION is not set}"
: "${SOURCE_DATE_EPOCH:=0}"
DEB_APP_PREFIX=${DEB_APP_PREFIX-bpf-}
arch=${DEB_ARCH:-$(dpkg --print-architecture)}
export SOURCE_DATE_EPOCH

# Static: an ELF file with no program interpreter (readelf reads any architecture's; ldd only the machine's).
[ -x "$BIN_SRC/corebpf-tools" ] && readelf -h "$BIN_SRC/corebpf-tools" > /dev/null 2>&1 &&
    ! readelf -l "$BIN_SRC/corebpf-tools" | grep -q 'program interpreter' || {
    echo "build-deb.sh: $BIN_SRC/corebpf-tools is not statically linked (run make static)" >&2
    exit 1
}

root=$out/root
rm -rf "$root"
mkdir -p "$root"
DESTDIR=$root PREFIX=/usr APP_PREFIX=$DEB_APP_PREFIX ZSHCOMPDIR=/usr/share/zsh/vendor-completions \
    BIN_SRC=$BIN_SRC RUN_WITH=${RUN_WITH:-} "$here/install-tools.sh" install "$@" > /dev/null
install -d -m 0755 "$root/usr/share/doc/corebpf-tools"
install -m 0644 "$here/../debian/copyright" "$root/usr/share/doc/corebpf-tools/copyright"
install -m 0644 "$here/../NOTICE" "$root/usr/share/doc/corebpf-tools/NOTICE"
install -d -m 0755 "$root/usr/share/doc/corebpf-tools/examples"
install -m 0644 "$here/exporter/exporter.conf" "$here/exporter/corebpf-exporter.service" \
    "$root/usr/share/doc/corebpf-tools/examples/"
gzip -n -9 < "$here/../debian/changelog" > "$root/usr/share/doc/corebpf-tools/changelog.gz"
chmod 0644 "$root/usr/share/doc/corebpf-tools/changelog.gz"
install -d -m 0755 "$root/usr/share/lintian/overrides"
install -m 0644 "$here/../debian/corebpf-tools.lintian-overrides" "$root/usr/share/lintian/overrides/corebpf-tools"

# Installed-Size as dpkg-gencontrol computes it: KiB per file, rounded up, and 1 per directory.
size=$(find "$root" -mindepth 1 \( -type f -printf '%s\n' \) -o \( -type d -printf 'd\n' \) |
    awk '$1 == "d" { n += 1; next } { n += int(($1 + 1023) / 1024) } END { print n }')
install -d -m 0755 "$root/DEBIAN"
DEB_MAINTAINER=${DEB_MAINTAINER:-} python3 "$here/deb-control.py" "$VERSION" "$arch" "$size" "$DEB_APP_PREFIX" "$@" \
    > "$root/DEBIAN/control"
chmod 0644 "$root/DEBIAN/control"

find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb=$out/corebpf-tools_${VERSION}_$arch.deb
rm -f "$out"/corebpf-tools_*_"$arch".deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" > /dev/null
echo "$deb"
