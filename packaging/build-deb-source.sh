#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 OR MIT
# Builds the Debian package the Debian way (what `make deb-source` does): exports HEAD (committed files only) to
# OUT_DIR/corebpf-tools-VERSION, runs dpkg-buildpackage there (debian/rules: `make static`, then `make
# install-files`), and checks the result with lintian, which must report no error (warnings are printed; the ones
# that are deliberate are overridden in debian/corebpf-tools.lintian-overrides, each with its reason).
#
#   packaging/build-deb-source.sh OUT_DIR
#
# Needs dpkg-dev, debhelper and lintian (scripts/deps.sh installs them) and Rust from rustup. Builds everything
# from scratch: minutes.
set -eu

out=${1:?usage: build-deb-source.sh OUT_DIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(dpkg-parsechangelog -l "$repo/debian/changelog" -S Version)
rm -rf "$out"
mkdir -p "$out"
git -C "$repo" archive --format=tar --prefix="corebpf-tools-$version/" HEAD | tar -x -C "$out"
(cd "$out/corebpf-tools-$version" && dpkg-buildpackage -us -uc)
changes=$(ls "$out"/corebpf-tools_"$version"_*.changes)
lintian --fail-on error --info "$changes"
echo "build-deb-source.sh: $changes: built, and lintian reports no error"
