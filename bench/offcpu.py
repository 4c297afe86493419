# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 11: the cost per context switch of offcputime (a stamp and two stack lookups at every switch-out, a sum
at every switch-in) and of wakeuptime (a stamp at every switch-out, a kernel stack and a sum at every wakeup),
each against libbpf-tools' port and a bpftrace one-liner doing the same work, on perf's pipe ping-pong pinned to
one CPU (every switch is between the two processes, and the tracers' programs run on their CPU time). Extra per
switch = (median traced CPU - median untraced) / context switches.
"""

from figures import BT_READY, bt, c_tool, our, switch_cost
from lib import median, spread
import report

TITLE = "Cost per context switch: offcputime, wakeuptime"

METHOD = """
`perf bench sched pipe -l n` pinned to CPU 0 (two processes exchanging one byte through two pipes, 2n context
switches), run untraced and under each tracer tracing every thread with user and kernel stacks: ours
(`offcputime`), libbpf-tools' `offcputime`, and a bpftrace one-liner that does the same in the kernel (time and
both stacks of the thread switched out, a sum per stack pair at switch-in). The workload's CPU time (its own and
its children's) includes the BPF programs run in its context. *Extra per switch* = (median CPU traced − untraced)
/ context switches counted in /proc/stat. The same for wakeuptime (`wakeuptime`, libbpf-tools' `wakeuptime`,
and a bpftrace one-liner stamping every switch-out and summing the time blocked per waker kernel stack, waker and
target name at sched_waking). {cfg.repeat} rounds.
"""

BT_OFFCPU = (BT_READY + "tracepoint:sched:sched_switch { @t[args->prev_pid] = nsecs; @k[args->prev_pid] = kstack; "
             "@u[args->prev_pid] = ustack; $s = @t[args->next_pid]; if ($s) { "
             "@[@k[args->next_pid], @u[args->next_pid], args->next_comm] = sum((nsecs - $s) / 1000); "
             "delete(@t[args->next_pid]); } }")


BT_WAKEUP = (BT_READY + "tracepoint:sched:sched_switch { @t[args->prev_pid] = nsecs; } "
             "tracepoint:sched:sched_waking /@t[args->pid]/ { "
             "@[kstack, comm, args->comm] = sum((nsecs - @t[args->pid]) / 1000); delete(@t[args->pid]); }")

# The rows of the figure: key, label.
NAMES = {"none": "no tracing", "ours": "ours: offcputime", "libbpf-tools": "libbpf-tools offcputime",
         "bpftrace": "bpftrace one-liner (offcputime)", "wake-ours": "ours: wakeuptime",
         "wake-libbpf-tools": "libbpf-tools wakeuptime", "wake-bpftrace": "bpftrace one-liner (wakeuptime)"}


def fig_offcpu_cost(cfg):
    # libbpf-tools' offcputime prints nothing until it ends, so the bench cannot tell when it has attached.
    theirs = c_tool("offcputime")
    theirs.argv, theirs.missing = None, "prints no banner: attach time unknown"
    contenders = [("none", None), ("ours", our("offcputime")), ("libbpf-tools", theirs), ("bpftrace", bt(BT_OFFCPU)),
                  ("wake-ours", our("wakeuptime")), ("wake-libbpf-tools", c_tool("wakeuptime")),
                  ("wake-bpftrace", bt(BT_WAKEUP))]
    return switch_cost(cfg, contenders)


def render(res):
    n = res["n"]
    names = NAMES
    rows = []
    for k in names:
        if k not in res["cpu"]:
            continue  # a figure measured before the row was added
        if k in res["missing"]:
            rows.append([names[k], res["missing"][k], "", "", "", ""])
            continue
        m = median(res["cpu"][k])
        extra = res["ns_per_switch"].get(k)
        rows.append([
            names[k], report.ms(m), report.ms(median(res["times"][k])), f"{median(res['switches'][k]) or 0:,.0f}",
            "–" if extra is None else f"**{extra:.0f} ns**", report.pct(spread(res["cpu"][k])),
        ])
    text = report.table(["tracing", f"CPU time ({n:,} round trips)", "wall time", "context switches",
                         "extra per switch", "spread (CPU)"], rows)
    c = res.get("ns_per_switch", {})
    for prefix, tool in (("", "offcputime"), ("wake-", "wakeuptime")):
        for anchor in ("libbpf-tools", "bpftrace"):
            ours, theirs = prefix + "ours", prefix + anchor
            if ours in c and theirs in c and c[theirs] > 0:
                text += (f"\n\nRatio ours / {anchor}, {tool}, extra CPU per context switch: "
                         f"**{report.ratio(c[ours], c[theirs])}**.")
    if "error" in res:
        text += f"\n\n**Error:** {res['error']}"
    return text
