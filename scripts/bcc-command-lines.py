#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Collects the command lines of BCC's own examples and smoke test for the tools this project has.

    scripts/bcc-command-lines.py BCC_CHECKOUT > tests/tests/bcc-command-lines.json

Reads every `tools/*_example.txt` (the lines a prompt starts: `# ./biolatency -mT 1 5`) and
`tests/python/test_tools_smoke.py` (the strings given to run_with_duration and run_with_int) of a BCC checkout,
keeps those whose command is a tool or an alias here (`tools/*/`, `tools/*/aliases`), and writes them as JSON: one
object per distinct command line, with the tool, its arguments (split as a shell would, cut at a pipe, a
redirection or a `;`; a PID the shell would substitute, `$(pidof x)`, is 1), and where the line came from. The command lines are facts about BCC's interface; the test
`bcc_command_lines_parse` (tests/tests/toolset.rs) hands each to the tool's own parser.
"""

import json
import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def our_names():
    names = set()
    for d in (ROOT / "tools").iterdir():
        if (d / "Cargo.toml").exists():
            names.add(d.name)
            aliases = d / "aliases"
            if aliases.exists():
                names.update(l.strip() for l in aliases.read_text().splitlines() if l.strip() and not l.startswith("#"))
    return names


def git_show(bcc, path):
    return subprocess.run(["git", "-C", bcc, "show", f"HEAD:{path}"], capture_output=True, text=True, check=True).stdout


def git_files(bcc, prefix):
    out = subprocess.run(["git", "-C", bcc, "ls-tree", "--name-only", "HEAD", prefix], capture_output=True,
                         text=True, check=True).stdout
    return out.split()


def command_of(line, names):
    """(tool, args) of one shell command line, or None if it runs no tool of ours."""
    # A process ID the example takes from the shell ($(pidof x), `pgrep -n x`, the smoke test's %d): any number.
    line = re.sub(r"\$\([^)]*\)|`[^`]*`|%d", "1", line)
    try:
        words = shlex.split(line, comments=False)
    except ValueError:
        return None
    cut = []
    for w in words:
        if w in ("|", ";", "&", "&&", "||") or re.match(r"^\d*[<>]", w):
            break
        cut.append(w)
    while cut and cut[0] in ("sudo", "timeout") or (cut and re.fullmatch(r"-\w+|\d+", cut[0]) and len(cut) > 1):
        cut = cut[1:]
    if not cut:
        return None
    tool = re.sub(r"\.py$", "", cut[0].split("/")[-1])
    return (tool, cut[1:]) if tool in names else None


def main():
    bcc = sys.argv[1]
    names = our_names()
    seen = {}
    for path in git_files(bcc, "tools/"):
        if not path.endswith("_example.txt"):
            continue
        for line in git_show(bcc, path).splitlines():
            m = re.match(r"^#\s+(\S.*)$", line)
            if not m:
                continue
            found = command_of(m.group(1), names)
            if found:
                seen.setdefault((found[0], tuple(found[1])), path)
    smoke = "tests/python/test_tools_smoke.py"
    for m in re.finditer(r"run_with_(?:duration|int)\(\s*\"([^\"]+)\"", git_show(bcc, smoke)):
        found = command_of(m.group(1), names)
        if found:
            seen.setdefault((found[0], tuple(found[1])), smoke)
    rows = [{"tool": t, "args": list(a), "from": src} for (t, a), src in sorted(seen.items())]
    sys.stdout.write("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")


if __name__ == "__main__":
    main()
