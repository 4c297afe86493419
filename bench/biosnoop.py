# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 21: biosnoop's cost per traced block I/O, against libbpf-tools' biosnoop (where it loads) and a bpftrace
one-liner doing the same work (the issuing process kept per request, one line printed per completion), over n
O_DIRECT 4 KiB writes by dd to a preallocated file on the root disk."""

import os
import subprocess

import tool_bench
from figures import DIRECT_FILE, bt, c_tool, our
from lib import dd_direct, prepare_direct
import snoop

TITLE = "Cost per traced block I/O: biosnoop"

METHOD = """
The workload is `dd oflag=direct conv=notrunc bs=4k` overwriting n blocks of a preallocated file on the root disk:
n block requests, one after the other. It runs untraced and under each tracer with default options (one line per
request, printed to a pipe the bench reads): ours (block_io_start, block_rq_insert, block_rq_issue,
block_rq_complete, block_rq_merge as tp_btf), libbpf-tools' biosnoop, and a bpftrace one-liner on the classic
block tracepoints that keeps the issuing PID and comm per (disk, sector) at block_io_start, the issue time at
block_rq_issue, and prints a line at block_rq_complete (what BCC's biosnoop does on its tracepoint path).
*Extra per event* = (median CPU time of dd traced − untraced) / n. The probes at request start, insert and issue
run in dd's context and are in its CPU time; the completion probe runs in the disk's interrupt and is charged to
whatever task it interrupts, so the wall-time column shows the whole cost per I/O better. {cfg.repeat} rounds.
"""


def libbpf_tools_biosnoop():
    """libbpf-tools' biosnoop, or a contender marked with why it cannot run here (its fentry/kprobe on
    blk_account_io_start does not load on kernels without those)."""
    c = c_tool("biosnoop", ready="^TIME")
    if c.argv is None:
        return c
    try:
        p = subprocess.run(["timeout", "-s", "INT", "3", c.argv[0]], capture_output=True, text=True, timeout=20)
        loaded = "TIME(s)" in p.stdout
    except (OSError, subprocess.TimeoutExpired):
        loaded = False
    if not loaded:
        c.argv = None
        c.missing = "does not load here (needs fentry or kprobes on blk_account_io_start)"
    return c


def specs(cfg):
    n = cfg.direct_ios
    return [
        ("biosnoop", n, lambda: dd_direct(DIRECT_FILE, n),
         [("ours", our("biosnoop", ready="^TIME")), ("libbpf-tools", libbpf_tools_biosnoop()),
          ("bpftrace", bt(tool_bench.bpftrace_program("biosnoop")))]),
    ]


def fig_biosnoop_cost(cfg):
    prepare_direct(DIRECT_FILE, cfg.direct_ios)
    try:
        return snoop.measure(cfg, specs(cfg))
    finally:
        try:
            os.unlink(DIRECT_FILE)
        except OSError:
            pass


render = snoop.render
