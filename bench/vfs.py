# SPDX-License-Identifier: Apache-2.0 OR MIT
"""Figure 17: the cost of vfsstat per counted VFS call (a read of /dev/zero or a write to /dev/null) and per
system call it does not count (getppid), against libbpf-tools' vfsstat where it loads and a bpftrace one-liner
counting the same calls on the same tracepoint. Measured as figure 8 is (snoop.measure): the workload's CPU time
traced and untraced, extra per call = (median traced - median untraced) / n.
"""

import subprocess

import tool_bench
from figures import bt, c_tool, our, theirs
from lib import dd_syscalls
import snoop

TITLE = "Cost per counted VFS call: vfsstat"

METHOD = """
Two workloads, each run untraced and under each tracer (1-second intervals, printed to a pipe the bench reads):
`dd if=/dev/zero of=/dev/null bs=1 count=n` makes n reads and n writes (2n counted calls: the row's events), and a
Python loop makes n `getppid()` calls, which vfsstat does not count but, on a kernel without fentry and kprobes
(this one), still pays for: there it counts the system calls that reach the VFS functions with one program on
raw_syscalls:sys_exit, which runs for every system call. *Extra per call* = (median CPU time traced − untraced)
/ n. The anchors: libbpf-tools' vfsstat (fentry, else kprobes on the vfs_* functions: its row says when it cannot
load here) and the bpftrace one-liner that counts the same system calls by number on the same tracepoint and
prints the counts every second. {cfg.repeat} rounds.
"""


def getppids(n):
    return snoop.run_cost(["/usr/bin/python3", "-c", f"import os\nfor _ in range({n}): os.getppid()"])


def libbpf_vfsstat():
    """libbpf-tools' vfsstat, or a missing contender saying why it cannot run here."""
    c = c_tool("vfsstat", ["1"], ready="^TIME")
    path = theirs("vfsstat")
    if path:
        try:
            p = subprocess.run([path, "1", "1"], capture_output=True, timeout=10)
            ok = p.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        if not ok:
            c.argv = None
            c.missing = "does not load here (it needs fentry or kprobes; this kernel allows neither)"
    return c


def specs(cfg):
    n_sys = cfg.syscalls // 4
    n_ppid = 100_000 if cfg.quick else 1_000_000
    contenders = lambda: [("ours", our("vfsstat", ["1"], ready="^TIME")), ("libbpf-tools", libbpf_vfsstat()),
                          ("bpftrace", bt(tool_bench.bpftrace_program("vfsstat")))]
    return [
        ("vfsstat: read + write (counted)", 2 * n_sys, lambda: dd_syscalls(n_sys), contenders()),
        ("vfsstat: getppid (not counted)", n_ppid, lambda: getppids(n_ppid), contenders()),
    ]


def fig_vfs_cost(cfg):
    return snoop.measure(cfg, specs(cfg))


render = snoop.render
