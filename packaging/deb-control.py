#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""The quick .deb's DEBIAN/control (what packaging/build-deb.sh writes), made from debian/control, the package's one
description: the source paragraph's Maintainer, Section, Priority and Homepage, the binary paragraph's Package
and Description, with the fields only a built package has (Version, Architecture, Installed-Size).

    deb-control.py VERSION ARCH INSTALLED_SIZE APP_PREFIX TOOL...

DEB_MAINTAINER (environment) replaces the Maintainer. The description's tool list names TOOL...; with an empty
APP_PREFIX its last paragraph says the tools have their plain names, and the package conflicts with libbpf-tools.
"""

import os
import subprocess
import sys
from pathlib import Path


def paragraphs(text):
    """debian/control's paragraphs as lists of (field, value) in order; continuation lines stay in the value."""
    result = []
    for block in text.strip().split("\n\n"):
        fields = []
        for line in block.split("\n"):
            if line.startswith("#"):
                continue
            if line.startswith((" ", "\t")) and fields:
                fields[-1] = (fields[-1][0], fields[-1][1] + "\n" + line)
            else:
                name, _, value = line.partition(":")
                fields.append((name, value.strip()))
        result.append(fields)
    return result


def wrap(prefix, words):
    lines, line = [], prefix
    for word in words:
        if len(line) + 1 + len(word) > 73:
            lines.append(line)
            line = " " + word
        else:
            line = f"{line} {word}" if line.strip() else f" {word}"
    lines.append(line)
    return lines


def static_built_using():
    """The source packages of the C libraries linked into the static binary, as debian/rules declares them.

    STATIC_BUILT_FROM names the -dev packages they came from when not the machine's own libelf, zlib and C library:
    the arm64 cross build links the cross C library (libc6-dev-arm64-cross, whose own Built-Using names the glibc
    it was made from) and libbpf-sys's vendored libelf and zlib, which come from no Debian package."""
    names = []
    for dev in (os.environ.get("STATIC_BUILT_FROM") or "libelf-dev zlib1g-dev libc6-dev").split():
        query = "${Built-Using}" if dev.endswith("-cross") else "${source:Package} (= ${source:Version})"
        out = subprocess.run(["dpkg-query", "-f", query, "-W", dev], check=True, capture_output=True, text=True).stdout
        if dev.endswith("-cross"):
            out = ", ".join(p.strip() for p in out.split(",") if p.strip().startswith("glibc "))
        if out.strip():
            names.append(out.strip())
    return ", ".join(names)


def main():
    version, arch, size, app_prefix, *tools = sys.argv[1:]
    root = Path(__file__).resolve().parent.parent
    source, binary = paragraphs((root / "debian" / "control").read_text())[:2]
    source, binary = dict(source), dict(binary)
    # The description: its summary and first paragraphs, the tool list (up to the next " ."), then the paragraph
    # on the installed names.
    text = binary["Description"]
    head, _, rest = text.partition("\n Tools:")
    _, _, tail = rest.partition("\n .\n")
    naming = tail.rsplit("\n .\n", 1)
    if not app_prefix:
        naming[-1] = "\n".join(wrap("", "The tools are installed under their own names in /usr/sbin, as libbpf-tools' are.".split()))
    elif app_prefix != "bpf-":
        naming[-1] = naming[-1].replace("bpf-", app_prefix)
    tool_lines = "\n".join(wrap(" Tools:", [t + "," for t in tools[:-1]] + [tools[-1] + "."]))
    description = head + "\n" + tool_lines + "\n .\n" + "\n .\n".join(naming)
    fields = [
        ("Package", binary["Package"]),
        ("Version", version),
        ("Architecture", arch),
        ("Maintainer", os.environ.get("DEB_MAINTAINER") or source["Maintainer"]),
        ("Installed-Size", size),
    ]
    if not app_prefix:
        fields.append(("Conflicts", "libbpf-tools"))
    fields.append(("Static-Built-Using", static_built_using()))
    fields += [
        ("Section", source["Section"]),
        ("Priority", source["Priority"]),
        ("Homepage", source["Homepage"]),
        ("Description", description),
    ]
    sys.stdout.write("".join(f"{name}: {value}\n" for name, value in fields))


if __name__ == "__main__":
    main()
