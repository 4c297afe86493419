#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Lists the command-line flags of BCC's and libbpf-tools' versions of the tools this project has.

    scripts/upstream-flags.py BCC_CHECKOUT > tests/tests/upstream-flags.json

Reads, from a BCC checkout (which holds libbpf-tools too), each `tools/TOOL.py`'s argparse definitions
(`parser.add_argument("-P", "--parent_process", action="store_true", ...)`) and each `libbpf-tools/TOOL.c`'s
argp options (`{ "pid", 'p', "PID", 0, "...", 0 }`), for the tools (and aliases) here, and writes one JSON object
per flag: the tool, the flag, whether it takes a value, and which project has it. Flags hidden from help
(argparse.SUPPRESS, OPTION_HIDDEN) and -h are left out. Under a name BCC has, its flags are the ones to match
(issue 53: each short flag means what BCC's does); libbpf-tools' count only for the tools BCC does not have. The
test `upstream_flags_are_taken` (tests/tests/toolset.rs) hands each to the tool's parser.
"""

import json
import re
import subprocess
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from importlib import import_module  # noqa: E402

names_of = import_module("bcc-command-lines").our_names


def git_show(repo, path):
    out = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def calls(text, opener):
    """The argument text of each `opener(...)` call, parentheses balanced, strings skipped."""
    for m in re.finditer(re.escape(opener), text):
        depth, i, quote = 1, m.end(), None
        while i < len(text) and depth:
            c = text[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        yield text[m.end():i - 1]


def bcc_flags(source):
    flags = []
    for args in calls(source, "add_argument("):
        if "SUPPRESS" in args:
            continue
        names = re.findall(r"^\s*[\"'](-[^\"']+)[\"']|,\s*[\"'](-[^\"']+)[\"']", args.split("help=")[0])
        names = [a or b for a, b in names]
        if not names:
            continue
        action = re.search(r"action\s*=\s*[\"'](\w+)[\"']", args)
        takes = not (action and action.group(1) in ("store_true", "store_false", "store_const", "count", "version"))
        flags += [(n, takes) for n in names if n not in ("-h", "--help")]
    return flags


def argp_flags(source):
    flags = []
    m = re.search(r"struct argp_option \w+\[\]\s*=\s*\{(.*?)\n\};", source, re.S)
    if not m:
        return flags
    for entry in re.finditer(r"\{\s*(\"[^\"]*\"|NULL|0)\s*,\s*('(?:\\.|[^'])'|\d+|[A-Z_]+)\s*,\s*(\"[^\"]*\"|NULL|0)\s*,"
                             r"\s*([^,]*),", m.group(1)):
        long, short, arg, options = entry.groups()
        if "OPTION_HIDDEN" in options:
            continue
        takes = arg not in ("NULL", "0")
        if long.startswith('"'):
            flags.append(("--" + long.strip('"'), takes))
        if short.startswith("'") and re.fullmatch(r"'[A-Za-z0-9]'", short):
            flags.append(("-" + short[1], takes))
    return [f for f in flags if f[0] not in ("-h", "--help", "--usage", "-?")]


def main():
    repo = sys.argv[1]
    rows = []
    for tool in sorted(names_of()):
        bcc = git_show(repo, f"tools/{tool}.py")
        if bcc is not None:
            rows += [{"tool": tool, "flag": f, "value": v, "from": "bcc"} for f, v in bcc_flags(bcc)]
            continue
        c = git_show(repo, f"libbpf-tools/{tool}.c")
        if c is not None:
            rows += [{"tool": tool, "flag": f, "value": v, "from": "libbpf-tools"} for f, v in argp_flags(c)]
    seen, unique = set(), []
    for r in rows:
        if (r["tool"], r["flag"]) not in seen:
            seen.add((r["tool"], r["flag"]))
            unique.append(r)
    sys.stdout.write("[\n" + ",\n".join(json.dumps(r) for r in unique) + "\n]\n")


if __name__ == "__main__":
    main()
