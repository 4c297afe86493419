# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 24: what each tool's BPF programs cost per workload event, by the kernel's own clock.

With `kernel.bpf_stats_enabled=1` the kernel times every run of every loaded program (`run_time_ns`, `run_cnt`,
shown in /proc/PID/fdinfo of each program fd). That clock runs in the traced event's context and sees no
scheduling noise, so unlike wall or CPU time it can decide a ratio near 1. For each tool whose bench entry names a
`cost` workload (tools/TOOL/bench.toml), ours and the anchor are attached side by side to the same events, in
both orders (the program attached first runs first and warms the caches for the second); the workload runs
several times while both are attached, and each run's program time is read from both processes' program fds.

The floor of a mechanism is an empty program on it (bench/floor.bpf.c, loaded by bench/floor.py), timed the same
way: what the kernel's clock charges a program that does nothing. A tool's floor per workload event is the sum,
over its programs, of runs per event times the floor of that program's kind.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import figures
import tool_bench
from figures import DIRECT_FILE, Contender, contenders_of
from lib import BenchError, dd_direct, dd_syscalls, fd_infos, getaddrinfo_calls, median, pct, prepare_direct, spread, \
    table, tcp_connections

TITLE = "Cost per workload event of each tool's BPF programs, by the kernel's clock"

METHOD = """
`kernel.bpf_stats_enabled=1` makes the kernel time every run of every BPF program (`run_time_ns`, `run_cnt`); the
bench reads both from /proc/PID/fdinfo of each program file descriptor of the tool's process, before and after each
workload run, so a program's time is its own whatever else is attached. Ours and the anchor are attached side by
side to the same events: first ours then the anchor, {cfg.cost_rounds} workload runs; then the anchor first,
{cfg.cost_rounds} more (the program attached first runs first on each event). *ns per event* is the tools'
program time summed over the workload run, divided by the run's events; the median of the 2 × {cfg.cost_rounds} runs, with
the spread (max − min) / median. The workloads: `direct-writes` {cfg.cost_ios} O_DIRECT 4 KiB writes (dd);
`pipe-pingpong` {cfg.cost_pingpongs} round trips of one byte between two processes over two pipes (each is two
wakeups and two or more context switches); `execs` {cfg.cost_execs} execs of /bin/true; `syscalls`
{cfg.cost_syscalls} one-byte read+write pairs (dd bs=1, /dev/zero to /dev/null); `opens` {cfg.cost_opens}
open+close pairs; `tcp-connections` {cfg.cost_conns} loopback connections; `getaddrinfo` {cfg.cost_lookups}
getaddrinfo() calls. Programs that run on every event of the system (sched_switch, sys_enter) also count what the
rest of the machine does during the run, the same for both sides.

*Floor* is the time the kernel's clock charges an empty program (`return 0`, bench/floor.bpf.c) of the same kind,
per run: tp_btf, raw_tp and classic tracepoints on `sys_enter`, uprobe and uretprobe on libc's `write()`,
perf_event on a 999 Hz CPU clock, measured during the `syscalls` workload; a tool's floor per event is the sum of
its programs' runs per event times their kind's floor, the least any tool on the same hooks could cost.
*Above floor* is ours / floor. Ratios are ours / anchor.
"""

# bpf_prog_type numbers (include/uapi/linux/bpf.h) and the floor program that stands for each.
PROG_KINDS = {2: "uprobe", 5: "tracepoint", 7: "perf_event", 17: "raw_tp", 26: "tp_btf"}


def workloads(cfg):
    """name -> (events per run, what one event is, the workload); the names are tool_bench.COST_WORKLOADS."""
    return {
        "direct-writes": (cfg.cost_ios, "write", lambda: dd_direct(DIRECT_FILE, cfg.cost_ios)),
        "pipe-pingpong": (cfg.cost_pingpongs, "round trip", lambda: pipe_pingpong(cfg.cost_pingpongs)),
        "execs": (cfg.cost_execs, "exec", lambda: execs(cfg.cost_execs)),
        "syscalls": (cfg.cost_syscalls, "read+write", lambda: dd_syscalls(cfg.cost_syscalls)),
        "opens": (cfg.cost_opens, "open+close", lambda: opens(cfg.cost_opens)),
        "tcp-connections": (cfg.cost_conns, "connection", lambda: tcp_connections(cfg.cost_conns)),
        "getaddrinfo": (cfg.cost_lookups, "lookup", lambda: getaddrinfo_calls(cfg.cost_lookups)),
    }


def pipe_pingpong(n):
    """n one-byte round trips between this process and a child over two pipes."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for _ in range(n):
                os.read(a_r, 1)
                os.write(b_w, b"x")
        finally:
            os._exit(0)
    try:
        for _ in range(n):
            os.write(a_w, b"x")
            os.read(b_r, 1)
    finally:
        for fd in (a_r, a_w, b_r, b_w):
            os.close(fd)
        os.waitpid(pid, 0)


def execs(n):
    subprocess.run(["/bin/sh", "-c", f"i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done"], check=True)


def opens(n):
    with tempfile.NamedTemporaryFile(prefix="corebpf-bench-open-") as f:
        path = f.name
        for _ in range(n):
            os.close(os.open(path, os.O_RDONLY))


# ---- reading the kernel's clock ----------------------------------------------------------------------------

def programs(pid):
    """{prog_id: (prog_type, run_time_ns, run_cnt)} of the program fds `pid` holds (link fds name a prog_id too,
    but carry no prog_type)."""
    out = {}
    for fields in fd_infos(pid):
        if "prog_type" in fields:
            out[int(fields["prog_id"])] = (int(fields["prog_type"]), int(fields.get("run_time_ns", 0)),
                                           int(fields.get("run_cnt", 0)))
    return out


def program_names():
    """{prog_id: name} of every loaded program (bpftool; the name is cut to 15 characters by the kernel)."""
    import json

    try:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, timeout=20).stdout
        return {p["id"]: p.get("name", "?") for p in json.loads(out or "[]")}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def delta(before, after):
    """{prog_id: (type, ns, runs)} over a workload run."""
    return {i: (t, ns - before.get(i, (t, 0, 0))[1], cnt - before.get(i, (t, 0, 0))[2])
            for i, (t, ns, cnt) in after.items()}


class BpfStats:
    """kernel.bpf_stats_enabled on for the figure's life, then put back."""

    PATH = "/proc/sys/kernel/bpf_stats_enabled"

    def __enter__(self):
        self.old = Path(self.PATH).read_text().strip()
        Path(self.PATH).write_text("1")
        return self

    def __exit__(self, *exc):
        Path(self.PATH).write_text(self.old)


# ---- the floor --------------------------------------------------------------------------------------------

def floor_contender():
    return Contender("floor", [sys.executable, str(Path(__file__).resolve().parent / "floor.py"),
                               "tp_btf", "raw_tp", "tracepoint", "uprobe", "uretprobe", "perf_event"], "^ready")


def measure_floor(cfg):
    """{kind: [ns per run, one per round]} of the empty programs, over the `syscalls` workload."""
    kinds = {}
    with floor_contender().start() as t:
        t.wait_ready()
        time.sleep(0.2)
        for _ in range(cfg.cost_rounds * 2):
            before = programs(t.pid)
            dd_syscalls(cfg.cost_syscalls)
            d = delta(before, programs(t.pid))
            for ptype, ns, runs in d.values():
                if runs:
                    kinds.setdefault(PROG_KINDS.get(ptype, str(ptype)), []).append(ns / runs)
        t.stop()
    return kinds


# ---- the figure -------------------------------------------------------------------------------------------

def cost_specs():
    """(tool, workload name, ours, anchor) for every tool whose bench entry names a cost workload."""
    specs = []
    only = set(os.environ.get("BENCH_COST_TOOLS", "").split(",")) - {""}
    for tool in tool_bench.tools():
        if only and tool not in only:
            continue
        entry = tool_bench.entry(tool)
        if entry is None or "cost" not in entry:
            continue
        row = tool_bench.rows_of(tool)[0]
        cost = entry["cost"]
        ours, theirs = contenders_of(row)
        if isinstance(cost, dict):  # a cost table may give the tools other arguments than the start-up row
            name = cost["workload"]
            if "args" in cost:
                ours = figures.our(tool, tool_bench.with_targets(cost["args"]), ready=row.ready)
            if "anchor-args" in cost and row.anchor.binary:
                theirs = figures.c_tool(row.anchor.binary, tool_bench.with_targets(cost["anchor-args"]),
                                        row.anchor.ready)
            if "bpftrace" in cost:
                theirs = figures.bt(tool_bench.BT_READY + tool_bench.expand(cost["bpftrace"]))
        else:
            name = cost
        specs.append((tool, name, ours, theirs))
    return specs


def by_name(d, names):
    """A run's deltas keyed by program name ({name: (type, ns, runs)}): the same program of two runs of a tool
    has two IDs. Programs of one name in one process (several attachments of one function) are added up."""
    out = {}
    for i, (ptype, ns, cnt) in d.items():
        name = names.get(i, f"id {i}")
        _, ns0, cnt0 = out.get(name, (ptype, 0, 0))
        out[name] = (ptype, ns0 + ns, cnt0 + cnt)
    return out


def one_order(first, second, workload, rounds, sample):
    """Attaches `first` then `second`, runs the workload `rounds` times; appends to sample[side] each run's
    program deltas, by program name."""
    with first[1].start() as a:
        a.wait_ready()
        with second[1].start() as b:
            b.wait_ready()
            time.sleep(0.3)
            procs = ((first[0], a), (second[0], b))
            names = program_names()
            for _ in range(rounds):
                before = {side: programs(t.pid) for side, t in procs}
                workload()
                for side, t in procs:
                    if t.p.poll() is not None:
                        raise BenchError(f"{side} exited during the workload: {t.stderr_tail()}")
                    sample[side].append(by_name(delta(before[side], programs(t.pid)), names))
            b.stop()
        a.stop()


def summarize(runs, n, floor):
    """Per-side figures from its per-run deltas: ns per event (each run), floor per event, per-program rows."""
    per_event = [sum(ns for _, ns, _ in d.values()) / n for d in runs]
    progs = {}
    for d in runs:
        for name, (ptype, ns, cnt) in d.items():
            p = progs.setdefault(name, {"type": ptype, "ns": [], "runs": []})
            p["ns"].append(ns / cnt if cnt else 0)
            p["runs"].append(cnt / n)
    floor_per_event = sum(median(p["runs"]) * floor.get(PROG_KINDS.get(p["type"]), 0) for p in progs.values())
    return per_event, floor_per_event, progs


def fig_program_cost(cfg):
    if not os.path.exists(BpfStats.PATH):
        return {"error": "this kernel has no kernel.bpf_stats_enabled"}
    rows = []
    loads = workloads(cfg)
    with BpfStats():
        try:
            floor_runs = measure_floor(cfg)
        except (BenchError, OSError, subprocess.CalledProcessError) as e:
            return {"error": f"the floor programs: {e}"}
        floor = {k: median(v) for k, v in floor_runs.items()}
        prepare_direct(DIRECT_FILE, cfg.cost_ios)
        try:
            for tool, wname, ours, theirs in cost_specs():
                row = {"name": tool, "workload": wname, "anchor": theirs.label}
                rows.append(row)
                if wname not in loads:
                    row["error"] = f"tools/{tool}/bench.toml: no cost workload {wname!r} (known: {', '.join(loads)})"
                    continue
                n, unit, workload = loads[wname]
                row["unit"] = unit
                missing = [c.label for c in (ours, theirs) if c.argv is None]
                if missing:
                    row["error"] = f"{', '.join(missing)} not available"
                    continue
                sample = {"ours": [], "theirs": []}
                try:
                    workload()  # warm-up, untraced
                    one_order(("ours", ours), ("theirs", theirs), workload, cfg.cost_rounds, sample)
                    one_order(("theirs", theirs), ("ours", ours), workload, cfg.cost_rounds, sample)
                except BenchError as e:
                    row["error"] = str(e)
                    continue
                for side in ("ours", "theirs"):
                    per_event, floor_pe, progs = summarize(sample[side], n, floor)
                    row[side] = {"per_event": per_event, "floor": floor_pe, "programs": progs}
        finally:
            try:
                os.unlink(DIRECT_FILE)
            except OSError:
                pass
    return {"floor": floor_runs, "rows": rows}


# ---- rendering --------------------------------------------------------------------------------------------

def ns(x):
    return "–" if x is None else (f"{x:.0f} ns" if x >= 10 else f"{x:.1f} ns")


def ratio_of(row):
    if "ours" not in row or "theirs" not in row:
        return None
    o, t = median(row["ours"]["per_event"]), median(row["theirs"]["per_event"])
    return o / t if t else None


def program_list(side):
    parts = []
    for name, p in sorted(side["programs"].items(), key=lambda kv: -median(kv[1]["runs"]) * median(kv[1]["ns"])):
        runs = median(p["runs"])
        if runs == 0:
            continue
        kind = PROG_KINDS.get(p["type"], str(p["type"]))
        parts.append(f"{name} ({kind}) {ns(median(p['ns']))} × {runs:.2f}")
    return "; ".join(parts) or "no runs"


def render(res):
    floor = res.get("floor", {})
    text = table(["kind", "empty program, ns per run (median)", "spread"],
                        [[k, ns(median(v)), pct(spread(v))] for k, v in sorted(floor.items())])
    rows, details = [], []
    for r in res.get("rows", []):
        if "error" in r:
            rows.append([r["name"], r["workload"], r["anchor"], "**failed**", r["error"], "", "", "", ""])
            continue
        o, t = r["ours"], r["theirs"]
        rat = ratio_of(r)
        rows.append([
            r["name"], f"{r['workload']} (per {r['unit']})", r["anchor"],
            f"**{ns(median(o['per_event']))}**", ns(median(t["per_event"])),
            "–" if rat is None else f"**{rat:.2f}×**",
            ns(o["floor"]), "–" if not o["floor"] else f"{median(o['per_event']) / o['floor']:.1f}×",
            f"{pct(spread(o['per_event']))} / {pct(spread(t['per_event']))}",
        ])
        details.append([r["name"], program_list(o), program_list(t)])
    text += "\n\n" + table(
        ["tool", "workload", "anchor", "ours: ns per event", "anchor: ns per event", "ratio", "floor per event",
         "ours above floor", "spread ours / anchor"], rows)
    text += "\n\nEach program: name (kind) ns per run × runs per workload event, the costliest first.\n\n"
    text += table(["tool", "ours", "anchor"], details)
    return text


def targets(res):
    """(met, missed) tool names: per event at or below the anchor."""
    met, missed = [], []
    for r in res.get("rows", []):
        rat = ratio_of(r) if "error" not in r else None
        if rat is None:
            continue
        (met if rat <= 1.0 else missed).append((r["name"], rat))
    return met, missed

