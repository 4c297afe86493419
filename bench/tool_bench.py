# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Each tool's bench entry: `tools/<tool>/bench.toml`, read here so that nothing in bench/ names a tool by hand.

The entry says how to start the tool for the start-up and memory figures (its arguments and the line that says it
is tracing) and what its anchor is (a libbpf-tools binary or a bpftrace program doing the same work on the same
hook). Cost figures that compare a tool with its bpftrace anchor take the program from here too, so each
anchor is written once. The format is in docs/tool-doc.md ("The bench entry"); `make docs-check` fails for a tool
without one.

    args = ["-C"]                 # the tool's arguments (default none)
    ready = "^Tracing"            # a regular expression for the line printed once it traces (default ^Tracing)
    ready-on = "stderr"           # optional: that line comes on stderr (`-v`'s "attached with ..."), for a tool
                                  # that, as BCC's, prints nothing on stdout until its first report
    memory = "direct-writes"      # optional: the workload of the memory figure (WORKLOADS in figures.py)

    [anchor]                      # either a libbpf-tools binary ...
    libbpf-tools = "biolatency"
    args = []
    ready = "^Tracing"
    # ... or a bpftrace program (started with a BEGIN block that prints "ready"):
    # bpftrace = "tracepoint:sched:sched_waking { @[kstack] = count(); }"

    [[extra]]                     # more start-up rows: label, args, ready and an anchor table of their own
    label = "funccount t:syscalls:*"

`{libc}` in an argument or program stands for the path of this machine's C library. `{python_pid}` and
`{java_pid}` in an argument stand for the PID of an idle Python or Java process (for the language runtime tools:
ugc, javagc, uthreads, ucalls, ...), which the harness starts the first time a row needs it and stops when it
ends; they are filled in when a row is run ([`with_targets`]), not when its entry is read.
"""

import atexit
import glob
import os
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bpftrace's readiness signal ("Attaching N probes..." is printed before attaching, so it is not one): a BEGIN
# printf. bpftrace 0.17 runs BEGIN early, but its output reaches stdout only from the event loop, which starts
# after every probe is attached (strace: the "ready" write follows the tracepoint's PERF_EVENT_IOC_ENABLE).
BT_READY = 'BEGIN { printf("ready\\n"); } '


def libc_path():
    """The C library the system's programs use (the first of the usual multiarch places that exists)."""
    for pattern in ("/lib/*-linux-gnu/libc.so.6", "/usr/lib/*-linux-gnu/libc.so.6", "/lib64/libc.so.6"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return "/lib/libc.so.6"


# The idle processes `{python_pid}` and `{java_pid}` name: the command, and a library whose mapping says the
# runtime (and so its USDT probes) is loaded. The JVM runs with HotSpot's extended probes on, which the method and
# allocation tools (ucalls, uflow, uobjnew) need and the others do not mind.
TARGETS = {
    "python_pid": (["/usr/bin/python3", "-c", "import time; time.sleep(1e9)"], "python3"),
    "java_pid": (["java", "-XX:+ExtendedDTraceProbes", str(ROOT / "bench" / "Idle.java")], "libjvm.so"),
}
_started = {}


def _target(name):
    """The PID of the idle process `name` of TARGETS, started (and waited for) on first use."""
    if name not in _started:
        cmd, loaded = TARGETS[name]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        atexit.register(proc.kill)
        deadline = time.monotonic() + 30
        while loaded not in Path(f"/proc/{proc.pid}/maps").read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bench: the idle {name} process ({' '.join(cmd)}) did not start")
            time.sleep(0.1)
        time.sleep(0.5)
        _started[name] = proc
    return _started[name].pid


def with_targets(args):
    """`args` with `{python_pid}` and `{java_pid}` filled in (starting those processes if needed)."""
    out = []
    for a in args:
        for name in TARGETS:
            if "{" + name + "}" in a:
                a = a.replace("{" + name + "}", str(_target(name)))
        out.append(a)
    return out


def expand(value):
    """`value` with `{libc}` filled in."""
    return value.replace("{libc}", libc_path()) if isinstance(value, str) else value


_expand = expand


@dataclass
class Anchor:
    """What a tool is measured against: a libbpf-tools binary (`binary`) or a bpftrace program (`program`)."""
    binary: str = None
    program: str = None
    args: list = field(default_factory=list)
    ready: str = "^Tracing"

    @property
    def label(self):
        return "libbpf-tools" if self.binary else "bpftrace"


@dataclass
class Row:
    """One start-up row: the tool started with `args`, ready at `ready`, beside `anchor`."""
    tool: str
    label: str
    args: list
    ready: str
    anchor: Anchor
    memory: str = None
    ready_on_stderr: bool = False


def _anchor(table, tool, src, ready="^Tracing"):
    if not isinstance(table, dict) or ("libbpf-tools" in table) == ("bpftrace" in table):
        raise ValueError(f"{src}: [anchor] needs exactly one of libbpf-tools = NAME or bpftrace = PROGRAM ({tool})")
    if "bpftrace" in table:
        return Anchor(program=BT_READY + _expand(table["bpftrace"]), ready="^ready")
    return Anchor(binary=table["libbpf-tools"], args=[_expand(a) for a in table.get("args", [])],
                  ready=table.get("ready", ready))


def _row(tool, table, src, default_label, main=None):
    """A row from `table`; an [[extra]] row takes its `ready` lines from the `main` row unless it gives its own
    (the same tool prints the same banner whatever its flags)."""
    ready = table.get("ready", main.ready if main else "^Tracing")
    anchor_ready = main.anchor.ready if main and main.anchor.binary else "^Tracing"
    return Row(tool=tool, label=table.get("label", default_label), args=[_expand(a) for a in table.get("args", [])],
               ready=ready, anchor=_anchor(table.get("anchor"), tool, src, anchor_ready),
               memory=table.get("memory"), ready_on_stderr=table.get("ready-on", "stdout") == "stderr")


# The workloads a bench entry's `cost` can name (figure 24, bench/progcost.py).
COST_WORKLOADS = ("direct-writes", "pipe-pingpong", "execs", "syscalls", "opens", "tcp-connections", "getaddrinfo")


def cost_problem(entry):
    """What is wrong with a bench entry's `cost` (figure 24's workload), or None."""
    cost = entry.get("cost")
    if cost is None:
        return None
    name = cost.get("workload") if isinstance(cost, dict) else cost
    if name not in COST_WORKLOADS:
        return f"cost: no workload {name!r} (known: {', '.join(COST_WORKLOADS)})"
    return None


def entry(tool):
    """A tool's bench entry as a table (None if it has none)."""
    src = ROOT / "tools" / tool / "bench.toml"
    if not src.is_file():
        return None
    with open(src, "rb") as f:
        return tomllib.load(f)


def rows_of(tool):
    """The start-up rows of one tool: its main row first, then its [[extra]] rows."""
    src = ROOT / "tools" / tool / "bench.toml"
    with open(src, "rb") as f:
        entry = tomllib.load(f)
    main = _row(tool, entry, src, tool)
    return [main] + [_row(tool, extra, src, tool, main) for extra in entry.get("extra", [])]


def tools():
    """Every tool of the workspace (a tools/NAME folder with a Cargo.toml), sorted."""
    return sorted(p.parent.name for p in (ROOT / "tools").glob("*/Cargo.toml"))


def all_rows():
    """The start-up rows of every tool that has a bench entry, in the order of the tools' names."""
    return [row for tool in tools() if os.path.isfile(ROOT / "tools" / tool / "bench.toml") for row in rows_of(tool)]


def anchor(tool):
    """The anchor of a tool's main row."""
    return rows_of(tool)[0].anchor


def bpftrace_program(tool):
    """The bpftrace program a tool's main row is measured against (with its ready BEGIN block)."""
    program = anchor(tool).program
    if program is None:
        raise ValueError(f"tools/{tool}/bench.toml: the anchor is not a bpftrace program")
    return program
