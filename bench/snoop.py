# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 8: the cost per traced event of the event tools (execsnoop, opensnoop, syscount), each against
libbpf-tools' tool of the same name and a bpftrace one-liner doing the same work, over a workload of a known
number of events. The workload's CPU time (its own and its waited-for children's, from wait4) is measured traced
and untraced; extra per event = (median traced - median untraced) / n.
"""

import os
import subprocess
import time

from figures import BT_READY, bt, c_tool, our, orders, run_traced
from lib import BenchError, dd_syscalls, median, spread
import report

TITLE = "Cost per traced exec, open and syscall: the event tools"

METHOD = """
Each row is one workload of a known number of events, run untraced and under each tracer with default options
(printing every event to a pipe that the bench reads): `execs` is a shell loop that runs `/bin/true` n times
(n execve calls, each with a fork); `opens` is a Python loop that opens and closes `/etc/hostname` n times;
`syscalls` is `dd bs=1` copying /dev/zero to /dev/null (n/2 reads and n/2 writes), under syscount counting every
syscall of the system per syscall (`-L`: also timing each, from sys_enter to sys_exit), libbpf-tools' syscount
with the same flags, and bpftrace counting (and timing) by syscall number on the same tracepoints; the workload's
CPU time includes its children's (wait4). *Extra per event* =
(median CPU time traced − untraced) / n. The bpftrace one-liners do what the tool does in the kernel (copy the
event to user space and print it). {cfg.repeat} rounds.
"""

BT_EXECSNOOP = (BT_READY + "tracepoint:syscalls:sys_enter_execve { printf(\"%d %s\\n\", pid, str(args->filename)); "
                "join(args->argv); }")


BT_OPENSNOOP = (BT_READY + "tracepoint:syscalls:sys_enter_openat { @f[tid] = args->filename; } "
                "tracepoint:syscalls:sys_exit_openat /@f[tid]/ { printf(\"%d %s %d %s\\n\", pid, comm, args->ret, "
                "str(@f[tid])); delete(@f[tid]); }")


BT_SYSCOUNT = BT_READY + "tracepoint:raw_syscalls:sys_exit { @[args->id] = count(); }"

BT_SYSCOUNT_L = (BT_READY + "tracepoint:raw_syscalls:sys_enter { @s[tid] = nsecs; } "
                 "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @c[args->id] = count(); "
                 "@t[args->id] = sum(nsecs - @s[tid]); delete(@s[tid]); }")


def run_cost(argv):
    """Runs argv to completion; returns (wall seconds, CPU seconds of it and its waited-for children)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise BenchError(f"{argv[0]} failed (status {p.returncode}): {p.stderr.read().decode(errors='replace')}")
    p.stderr.close()
    return wall, ru.ru_utime + ru.ru_stime


def execs(n):
    return run_cost(["/bin/sh", "-c", f"i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done"])


def opens(n):
    return run_cost(["/usr/bin/python3", "-c", f"import os\nfor _ in range({n}): os.close(os.open('/etc/hostname', os.O_RDONLY))"])


def specs(cfg):
    """(name, n, workload, [(label, contender)])."""
    n_exec = 500 if cfg.quick else 2_000
    n_open = 20_000 if cfg.quick else 200_000
    n_sys = 100_000 if cfg.quick else 1_000_000  # read+write pairs
    return [
        ("execsnoop", n_exec, lambda: execs(n_exec),
         [("ours", our("execsnoop", ready="^PCOMM")), ("libbpf-tools", c_tool("execsnoop", ready="^PCOMM")),
          ("bpftrace", bt(BT_EXECSNOOP))]),
        ("opensnoop", n_open, lambda: opens(n_open),
         [("ours", our("opensnoop", ready="^PID")), ("libbpf-tools", c_tool("opensnoop", ready="^PID")),
          ("bpftrace", bt(BT_OPENSNOOP))]),
        ("syscount", 2 * n_sys, lambda: dd_syscalls(n_sys),
         [("ours", our("syscount")), ("libbpf-tools", c_tool("syscount")), ("bpftrace", bt(BT_SYSCOUNT))]),
        ("syscount -L", 2 * n_sys, lambda: dd_syscalls(n_sys),
         [("ours", our("syscount", ["-L"])), ("libbpf-tools", c_tool("syscount", ["-L"])),
          ("bpftrace", bt(BT_SYSCOUNT_L))]),
    ]


def fig_snoop_cost(cfg):
    return measure(cfg, specs(cfg))


def measure(cfg, specs):
    """Runs each spec (name, n, workload, [(label, contender)]) untraced and under each contender, `cfg.repeat`
    rounds in rotating order; the rows `render` prints. Other figures of per-event cost reuse it."""
    rows = []
    for name, n, workload, contenders in specs:
        row = {"name": name, "n": n, "cpu": {}, "times": {}, "missing": {}, "ns_per_event": {}}
        rows.append(row)
        active = [("none", None)]
        for k, c in contenders:
            if c.argv is None:
                row["missing"][k] = c.missing
            else:
                active.append((k, c))
        try:
            workload()  # warm-up
            for rep in range(cfg.repeat):
                for k, c in orders(active, rep):
                    (secs, cpu), _ = run_traced(c, workload)
                    row["times"].setdefault(k, []).append(secs)
                    row["cpu"].setdefault(k, []).append(cpu)
        except BenchError as e:
            row["error"] = str(e)
        base = median(row["cpu"].get("none", []))
        for k, _ in active[1:]:
            m = median(row["cpu"].get(k, []))
            if m is not None and base is not None:
                row["ns_per_event"][k] = (m - base) / n * 1e9
    return {"rows": rows}


def render(res):
    out = []
    for row in res["rows"]:
        base = median(row["cpu"].get("none", []))
        lines = []
        for k in ["none"] + [k for k in ("ours", "libbpf-tools", "bpftrace")]:
            if k in row["missing"]:
                lines.append([k, row["missing"][k], "", "", ""])
                continue
            if k not in row["cpu"]:
                continue
            m = median(row["cpu"][k])
            extra = row["ns_per_event"].get(k)
            lines.append([
                "no tracing" if k == "none" else f"{k}: {row['name']}" if k != "bpftrace" else "bpftrace one-liner",
                report.ms(m), report.ms(median(row["times"][k])),
                "–" if extra is None else f"**{extra / 1000:.1f} µs**" if abs(extra) > 10_000 else f"**{extra:.0f} ns**",
                report.pct(spread(row["cpu"][k])),
            ])
        text = f"**{row['name']}** ({row['n']:,} events)\n\n" + report.table(
            ["tracing", "workload CPU time", "wall time", "extra per event", "spread (CPU)"], lines)
        c = row["ns_per_event"]
        for anchor in ("libbpf-tools", "bpftrace"):
            if "ours" in c and anchor in c and c[anchor] > 0:
                text += f"\n\nRatio ours / {anchor}, extra CPU per event: **{report.ratio(c['ours'], c[anchor])}**."
        if "error" in row:
            text += f"\n\n**Error:** {row['error']}"
        out.append(text)
    return "\n\n".join(out)
