#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""The project's licence checks and debian/copyright (`make license-check`, `make copyright`).

Three things are checked, and CI fails on any of them:

- spdx: every tracked source file names its licence in an `SPDX-License-Identifier` line near its top, the one
  its part of the tree has (LICENSE says which): the BPF programs and their headers `GPL-2.0-only OR
  BSD-2-Clause`, everything else `Apache-2.0 OR MIT`; every BPF program's license section says "Dual BSD/GPL".
  `spdx --fix` writes the lines.
- deps: every crate the shipped binary links (the normal dependencies of the corebpf-tools package, from
  `cargo metadata`) and every C library linked into the static binary offers at least one licence from ALLOWED.
  The static binary contains libelf (GPL-2.0-or-later OR LGPL-3.0-or-later), so the whole must be shippable under
  GPL-2.0-compatible terms: permissive licences and the LGPL/GPL-2 family pass; Apache-2.0 alone, the GPL-3
  family, CDDL, EPL, MPL-1.x, SSPL and unknown licences fail.
- copyright: debian/copyright is the one this script writes (`copyright --check`), so the list of bundled crates
  with their licences never goes stale.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

USER_SPACE = "Apache-2.0 OR MIT"
KERNEL_SIDE = "GPL-2.0-only OR BSD-2-Clause"
BPF_LICENSE_SECTION = 'SEC("license") = "Dual BSD/GPL"'

# Licences under which a component may be combined into a binary shipped under GPL-2.0-compatible terms.
ALLOWED = {
    "0BSD", "BSD-2-Clause", "BSD-3-Clause", "BSL-1.0", "CC0-1.0", "ISC", "MIT", "MIT-0", "Unicode-3.0",
    "Unicode-DFS-2016", "Unlicense", "Zlib", "LGPL-2.1-only", "LGPL-2.1-or-later", "LGPL-3.0-or-later",
    "GPL-2.0-only", "GPL-2.0-or-later",
}

# C libraries linked into the static binary: (name, where it comes from, licence, copyright).
C_LIBRARIES = [
    ("libbpf", "vendored by the libbpf-sys crate", "LGPL-2.1-only OR BSD-2-Clause",
     "Copyright (c) libbpf authors"),
    ("libelf", "Debian's libelf-dev (elfutils), linked statically", "GPL-2.0-or-later OR LGPL-3.0-or-later",
     "Copyright (C) elfutils authors"),
    ("zlib", "Debian's zlib1g-dev, linked statically", "Zlib", "Copyright (C) 1995-2024 Jean-loup Gailly and Mark Adler"),
    ("glibc", "Debian's libc6-dev, linked statically", "LGPL-2.1-or-later", "Copyright (C) Free Software Foundation, Inc."),
]

SOURCE_SUFFIXES = (".rs", ".c", ".h", ".py", ".sh")
SOURCE_NAMES = ("Makefile",)
# Generated or foreign files that carry no header of ours.
EXEMPT = (re.compile(r"^vmlinux/"), re.compile(r"^bpf/include/asm/"))


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def expected_license(path):
    """The SPDX expression a tracked file must carry, or None if it needs none."""
    if any(rule.search(path) for rule in EXEMPT):
        return None
    name = path.rsplit("/", 1)[-1]
    if not (name.endswith(SOURCE_SUFFIXES) or name in SOURCE_NAMES or path in (".ci/run",)):
        return None
    kernel = (
        path.endswith(".bpf.c")
        or path.startswith("bpf/include/")
        or re.match(r"^(tools/[^/]+|templates/[^/]+|toolset)/src/[^/]+\.h$", path) is not None
    )
    return KERNEL_SIDE if kernel else USER_SPACE


def comment_line(path, expression):
    name = path.rsplit("/", 1)[-1]
    if name.endswith((".c", ".h", ".rs")):
        return f"// SPDX-License-Identifier: {expression}"
    return f"# SPDX-License-Identifier: {expression}"


def check_spdx(fix):
    problems = []
    for path in tracked_files():
        expression = expected_license(path)
        if expression is None:
            continue
        text = (ROOT / path).read_text()
        lines = text.split("\n")
        head = lines[:3]
        found = [i for i, line in enumerate(head) if "SPDX-License-Identifier:" in line]
        want = comment_line(path, expression)
        if found and head[found[0]].strip() == want:
            pass
        elif fix:
            if found:
                lines[found[0]] = want
            else:
                at = 1 if lines and lines[0].startswith("#!") else 0
                lines.insert(at, want)
            (ROOT / path).write_text("\n".join(lines))
        else:
            problems.append(f"{path}: wants the line `{want}`")
        if path.endswith(".bpf.c"):
            text = (ROOT / path).read_text()
            if 'SEC("license")' in text and BPF_LICENSE_SECTION not in text:
                if fix:
                    text = re.sub(r'SEC\("license"\) = "[^"]*"', BPF_LICENSE_SECTION, text)
                    (ROOT / path).write_text(text)
                else:
                    problems.append(f'{path}: the license section must say "Dual BSD/GPL"')
    return problems


def tokens(expression):
    return re.findall(r"\(|\)|[^\s()]+", expression.replace("/", " OR "))


def satisfied(expression):
    """Whether an SPDX expression offers a licence from ALLOWED (OR: any side; AND: both; WITH: its base)."""
    items = tokens(expression)
    pos = 0

    def parse_or():
        nonlocal pos
        value = parse_and()
        while pos < len(items) and items[pos].upper() == "OR":
            pos += 1
            value = parse_and() or value
        return value

    def parse_and():
        nonlocal pos
        value = parse_with()
        while pos < len(items) and items[pos].upper() == "AND":
            pos += 1
            value = parse_with() and value
        return value

    def parse_with():
        nonlocal pos
        value = parse_atom()
        if pos < len(items) and items[pos].upper() == "WITH":
            pos += 2  # an exception only widens what its base licence allows
        return value

    def parse_atom():
        nonlocal pos
        if pos >= len(items):
            raise ValueError(f"incomplete licence expression: {expression!r}")
        item = items[pos]
        pos += 1
        if item == "(":
            value = parse_or()
            if pos >= len(items) or items[pos] != ")":
                raise ValueError(f"unbalanced licence expression: {expression!r}")
            pos += 1
            return value
        return item.rstrip("+") in ALLOWED or item in ALLOWED

    value = parse_or()
    if pos != len(items):
        raise ValueError(f"cannot read licence expression: {expression!r}")
    return value


def cargo_metadata(path):
    if path:
        return json.loads(Path(path).read_text())
    host = next(
        line.split(": ", 1)[1]
        for line in subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout.splitlines()
        if line.startswith("host: ")
    )
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", host],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def shipped_packages(metadata):
    """The packages the corebpf-tools binary links: its normal dependencies, transitively (no build or dev ones)."""
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    root = next(p["id"] for p in metadata["packages"] if p["name"] == "corebpf-tools")
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for dep in nodes[node]["deps"]:
            if any(kind["kind"] is None for kind in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    return sorted((packages[i] for i in seen), key=lambda p: (p["name"], p["version"]))


def check_deps(metadata):
    problems = []
    for package in shipped_packages(metadata):
        licence = package.get("license")
        where = f'crate {package["name"]} {package["version"]}'
        if not licence:
            problems.append(f"{where}: no licence declared (license_file: {package.get('license_file')})")
            continue
        try:
            if not satisfied(licence):
                problems.append(f"{where}: licence {licence} is not allowed in the shipped binary")
        except ValueError as error:
            problems.append(f"{where}: {error}")
    for name, _, licence, _ in C_LIBRARIES:
        if not satisfied(licence):
            problems.append(f"C library {name}: licence {licence} is not allowed in the shipped binary")
    return problems


def copyright_text(metadata):
    """debian/copyright (machine-readable, DEP-5): the project's two parts, then what the static binary bundles."""
    bundled = []
    for package in shipped_packages(metadata):
        if package["source"] is None:
            continue  # the workspace's own crates
        authors = ", ".join(package.get("authors") or []) or "its authors"
        bundled.append(f' crate {package["name"]} {package["version"]}: {package["license"]} ({authors})')
    for name, origin, licence, holder in C_LIBRARIES:
        bundled.append(f" C library {name} ({origin}): {licence} ({holder})")
    bundled = [line.replace("\n", " ") for line in bundled]
    return "\n".join([
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/",
        "Upstream-Name: corebpf-tools",
        "Source: https://github.com/corebpf-tools/corebpf-tools",
        "Comment: Written by `make copyright` (scripts/license-check.py); do not edit by hand.",
        " The corebpf-tools binary is statically linked. Besides the project's own",
        " code it contains these crates (from crates.io) and C libraries, each under the",
        " licence named (an SPDX expression):",
        " .",
        *bundled,
        "",
        "Files: *",
        "Copyright: 2026 The corebpf-tools authors",
        "License: Apache-2.0 or MIT",
        "",
        "Files: bpf/include/* tools/*/src/*.bpf.c tools/*/src/*.h templates/*/src/*.bpf.c templates/*/src/*.h",
        " toolset/src/*.bpf.c",
        "Copyright: 2026 The corebpf-tools authors",
        "License: GPL-2.0-only or BSD-2-Clause",
        "",
        "License: Apache-2.0",
        " On Debian systems, the full text of the Apache License, Version 2.0 is in",
        " /usr/share/common-licenses/Apache-2.0.",
        "",
        "License: MIT",
        *(" " + line if line else " ." for line in (ROOT / "LICENSE-MIT").read_text().strip().split("\n")[2:]),
        "",
        "License: GPL-2.0-only",
        " This program is free software; you can redistribute it and/or modify it under the",
        " terms of the GNU General Public License, version 2, as published by the Free",
        " Software Foundation.",
        " .",
        " On Debian systems, the full text of the GNU General Public License version 2 is in",
        " /usr/share/common-licenses/GPL-2.",
        "",
        "License: BSD-2-Clause",
        *(" " + line if line else " ." for line in (ROOT / "LICENSES/BSD-2-Clause.txt").read_text().strip().split("\n")[2:]),
        "",
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", nargs="?", choices=["all", "spdx", "deps", "copyright"], default="all")
    parser.add_argument("--fix", action="store_true", help="spdx: write the missing lines")
    parser.add_argument("--write", action="store_true", help="copyright: write debian/copyright")
    parser.add_argument("--metadata", help="deps: read this `cargo metadata` output instead of running cargo")
    args = parser.parse_args()
    problems = []
    if args.what in ("all", "spdx"):
        problems += check_spdx(args.fix)
    if args.what in ("all", "deps", "copyright"):
        metadata = cargo_metadata(args.metadata)
        if args.what in ("all", "deps"):
            problems += check_deps(metadata)
        if args.what in ("all", "copyright"):
            text = copyright_text(metadata)
            target = ROOT / "debian" / "copyright"
            if args.write:
                target.parent.mkdir(exist_ok=True)
                target.write_text(text)
            elif not target.exists() or target.read_text() != text:
                problems.append("debian/copyright is stale: run `make copyright`")
    for problem in problems:
        print(f"license-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
