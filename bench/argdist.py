# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 19: the cost per write of argdist's generic, prebuilt histogram program (the seeds' first example:
`map[log2(count)]++` on every write) against bpftrace's `hist(args->count)` on the same tracepoint. Measured as
figure 8 is (snoop.measure): the workload's CPU time traced and untraced, extra per write = (median traced -
median untraced) / n.
"""

from figures import BT_READY, bt, our
from lib import dd_syscalls
import snoop

TITLE = "Cost per write: argdist -H and trace on sys_enter_write"

METHOD = """
`dd if=/dev/zero of=/dev/null bs=1 count=n` makes n one-byte writes (and n reads, which neither tracer sees), run
untraced, under `argdist -H 't:syscalls:sys_enter_write():u64:args->count'` (one generic BPF program whose
fetch and filter are rodata parameters, printing every second) and under the bpftrace one-liner
`tracepoint:syscalls:sys_enter_write {{ @ = hist(args->count); }}` (compiled by LLVM at start-up). *Extra per
write* = (median CPU time traced − untraced) / n; the untraced row gives dd's own cost per write, so the extra
can be read as a percentage of it (the seeds' "~5%" claim). The second row prints every write instead: `trace
't:syscalls:sys_enter_write "%d", args->count'` (the same generic fetch, a ring-buffer record per event, a line
per event to a pipe; trace skips its own writes, the one-liner its own too) against `tracepoint:syscalls:sys_enter_write /comm != "bpftrace"/ {{ printf("%d\\n", args->count); }}`, over a
tenth of the writes. {cfg.repeat} rounds.
"""

SPEC = "t:syscalls:sys_enter_write():u64:args->count"
BT_HIST = BT_READY + "tracepoint:syscalls:sys_enter_write { @ = hist(args->count); }"
TRACE_PROBE = 't:syscalls:sys_enter_write "%d", args->count'
BT_PRINT = BT_READY + 'tracepoint:syscalls:sys_enter_write /comm != "bpftrace"/ { printf("%d\\n", args->count); }'



def specs(cfg):
    n = cfg.syscalls
    return [
        ("argdist -H write sizes", n, lambda: dd_syscalls(n),
         [("ours", our("argdist", ["-H", SPEC], ready=r"^\[")), ("bpftrace", bt(BT_HIST))]),
        ("trace printing each write", n // 10, lambda: dd_syscalls(n // 10),
         [("ours", our("trace", [TRACE_PROBE], ready="^PID")), ("bpftrace", bt(BT_PRINT))]),
    ]


def fig_argdist_cost(cfg):
    return snoop.measure(cfg, specs(cfg))


render = snoop.render
