#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Keeps the tools' help and documentation in the project's own words (`make provenance-check`).

The tools take their interfaces from BCC and libbpf-tools (NOTICE): names, options and output formats are facts
they must match, but BCC's sentences are not ours to reuse. This check fails when a help or documentation text
repeats a phrase of BCC's tools word for word. BCC's texts are not in this repository; scripts/bcc-phrases.sha256
holds only digests of its normalised phrases (hashes are not prose): the first 16 hex digits (64 bits) of each
phrase's SHA-256, which keeps the file small while a chance match among our few thousand phrases stays below one
in a billion. `--update` makes it from a BCC source tree (git archive of iovisor/bcc: tools, libbpf-tools, man).

A phrase is normalised as: lower-case, runs of white space made one space, a trailing period dropped; only phrases
of four or more words count. BCC's phrases are its argparse `help=` and `description=` strings, the comments of
its examples blocks and *_example.txt files, its quoted strings, and the sentences of its man pages (tools/*.py,
tools/*_example.txt, libbpf-tools/*.c, man/man8/*.8). Ours, the texts people read as documentation:
  - tools/*/doc.md and toolset/man.md (corebpf-tools(8)), outside ``` fences except the `## --help` fence (a fenced sample of output holds BCC's
    banners and headers, which the tools print on purpose);
  - tools/*/tests/*.help, the --help snapshots;
  - the `description` of tools/*/Cargo.toml, each tool's one-line description (man page NAME, `--list`);
  - the `///` doc comments and `.help("...")` texts of tools/*/src, common/src/cli and the other common/src files
    that define clap arguments (clap's about and option texts).
Each line is cut at `#`, double spaces and quotes and into sentences, and each doc.md paragraph is also joined
and cut into sentences, so that a sentence wrapped over lines is found too.

  scripts/provenance-check.py                   check; print `file:line: phrase` per hit and exit 1 on any
  scripts/provenance-check.py --update BCC_DIR [LABEL]   rewrite scripts/bcc-phrases.sha256 from a BCC source
                                                         tree; LABEL (its commit) goes in the file's header
"""

import glob
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHES = os.path.join(ROOT, "scripts", "bcc-phrases.sha256")
MIN_WORDS = 4


def norm(text):
    return re.sub(r"\s+", " ", text.strip().lower()).rstrip(".").strip()


def digest(phrase):
    return hashlib.sha256(phrase.encode("utf-8")).hexdigest()[:16]


def bcc_phrases(bcc):
    """Every normalised phrase of MIN_WORDS words or more in BCC's tools, examples and man pages."""
    found = set()

    def add(text):
        p = norm(text)
        if len(p.split()) >= MIN_WORDS:
            found.add(p)

    files = (glob.glob(os.path.join(bcc, "tools", "*.py")) + glob.glob(os.path.join(bcc, "libbpf-tools", "*.c"))
             + glob.glob(os.path.join(bcc, "tools", "*_example.txt")) + glob.glob(os.path.join(bcc, "man", "man8", "*.8")))
    if not files:
        sys.exit(f"provenance-check: no BCC tools under {bcc} (expected tools/*.py, man/man8/*.8)")
    for f in files:
        with open(f, errors="replace") as fh:
            t = fh.read()
        for m in re.finditer(r"help\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')", t):
            add(m.group(1)[1:-1])
        for m in re.finditer(r'description\s*=\s*"((?:[^"\\]|\\.)*)"', t):
            add(m.group(1))
        m = re.search(r'examples\s*=\s*"""(.*?)"""', t, re.S)
        if m:
            for line in m.group(1).split("\n"):
                if "#" in line:
                    add(line.split("#", 1)[1])
        if f.endswith("_example.txt"):
            for line in t.split("\n"):
                if "#" in line:
                    add(line.split("#", 1)[1])
        for m in re.finditer(r'"((?:[^"\\]|\\.){12,})"', t):
            s = m.group(1).replace("\\n", " ")
            if "#" in s:
                add(s.split("#", 1)[1])
            add(s)
        if f.endswith(".8"):
            text = " ".join(l for l in t.split("\n") if not l.startswith("."))
            for line in t.split("\n"):
                if not line.startswith("."):
                    for sent in re.split(r"(?<=[.;:])\s+", line):
                        add(sent)
            for sent in re.split(r"(?<=[.;:])\s+", text):
                add(sent)
    return found


def candidates(text):
    """The phrases of one line or paragraph of ours."""
    body = re.sub(r"^\s*(///|//!|//)?\s*", "", text)
    out = {norm(part) for part in re.split(r"#|\s{2,}|\"", body)}
    out |= {norm(sent) for sent in re.split(r"(?<=[.;:])\s+", body)}
    out.add(norm(body))
    return {p for p in out if len(p.split()) >= MIN_WORDS}


def doc_units(path):
    """(line number, text) of a doc.md: each line and each joined paragraph outside fences, and each line of the
    `## --help` fence."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    units, para, in_fence, part = [], [], False, None
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_fence = not in_fence
            if para:
                units.append((para[0][0], " ".join(l for _, l in para)))
                para = []
            continue
        if in_fence:
            if part == "--help":
                units.append((n, line))
            continue
        if line.startswith("## "):
            part = line[3:].strip()
        units.append((n, line))
        if line.strip():
            para.append((n, line.strip()))
        elif para:
            units.append((para[0][0], " ".join(l for _, l in para)))
            para = []
    if para:
        units.append((para[0][0], " ".join(l for _, l in para)))
    return units


def help_units(path):
    with open(path, encoding="utf-8") as f:
        return list(enumerate(f.read().split("\n"), 1))


def rust_units(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    units, para = [], []
    for n, line in enumerate(lines, 1):
        units += [(n, m.group(1)) for m in re.finditer(r'\.help\("((?:[^"\\]|\\.)*)"\)', line)]
        if line.strip().startswith("///"):
            units.append((n, line))
            para.append((n, line.strip()[3:].strip()))
        elif para:
            units.append((para[0][0], " ".join(l for _, l in para)))
            para = []
    return units


def cargo_units(path):
    """A tool's one-line description (its Cargo.toml's `description`: the man page's NAME line and `--list`)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return [(n, m.group(1)) for n, line in enumerate(lines, 1)
            for m in [re.match(r'\s*description\s*=\s*"((?:[^"\\]|\\.)*)"', line)] if m]


def our_files():
    rel = lambda pattern: sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True))
    return ([(f, doc_units) for f in rel("tools/*/doc.md") + rel("toolset/man.md")] + [(f, help_units) for f in rel("tools/*/tests/*.help")]
            + [(f, rust_units) for f in rel("tools/*/src/**/*.rs") + clap_files(rel("common/src/**/*.rs"))]
            + [(f, cargo_units) for f in rel("tools/*/Cargo.toml")])


def clap_files(paths):
    """common/src/cli, and the other files of common that define clap arguments."""
    def defines_args(path):
        with open(path, encoding="utf-8") as f:
            return "#[arg(" in f.read()
    return [p for p in paths if "/common/src/cli/" in p or defines_args(p)]


def main():
    args = sys.argv[1:]
    if len(args) in (2, 3) and args[0] == "--update":
        phrases = bcc_phrases(args[1])
        label = args[2] if len(args) == 3 else args[1]
        with open(HASHES, "w", encoding="ascii") as f:
            f.write(f"# The first 16 hex digits of SHA-256 of each normalised phrase of BCC ({label}), {len(phrases)}\n"
                    "# phrases; written by `scripts/provenance-check.py --update`, read by `make provenance-check`.\n")
            f.write("".join(f"{h}\n" for h in sorted({digest(p) for p in phrases})))
        print(f"wrote {os.path.relpath(HASHES, ROOT)}: {len(phrases)} phrases of BCC ({args[1]})")
        return
    if args:
        sys.exit("usage: provenance-check.py [--update BCC_DIR]")
    with open(HASHES, encoding="ascii") as f:
        known = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    hits = []
    for path, units in our_files():
        seen = set()
        for n, text in units(path):
            for phrase in sorted(candidates(text)):
                if (n, phrase) not in seen and digest(phrase) in known:
                    seen.add((n, phrase))
                    hits.append(f"{os.path.relpath(path, ROOT)}:{n}: {phrase}")
    for line in hits:
        print(line)
    if hits:
        print(f"provenance-check: {len(hits)} phrase(s) repeat BCC's words; say it in the project's own words "
              "(NOTICE; the check: scripts/provenance-check.py)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
